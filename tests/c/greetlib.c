/* greetlib.c: a shared library whose helper's name is chosen at build time
 * (-DHELPER=name), so that a test can rebuild the library after recording
 * it and see which copy the debugger reads: the recorded one (the trace's
 * copy) or the rebuilt one. */
#include <stdio.h>

int HELPER(int x) {
    return x * 2;
}

int greet(int x) {
    int y = HELPER(x);
    printf("greet %d\n", y);
    return y;
}
