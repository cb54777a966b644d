/* calls.c: for the debugger tests. main calls add() three times, one
 * call per line, each with the value the call before returned; so the
 * line a reverse command stops at and add's argument there say which call
 * it is (x = 1, 2, 3). Prints "a=4 total=6". */
#include <stdio.h>

int total;

int add(int x) {
    total += x;
    return x + 1;
}

int main(void) {
    int a = 1;
    a = add(a); /* first call */
    a = add(a); /* second call */
    a = add(a); /* third call */
    printf("a=%d total=%d\n", a, total);
    return 0;
}
