/* lineloop.c: a loop of 5,000 rounds on one source line (line 9), for
 * gdb's `next` over it: gdb steps while the pc stays in the line's range,
 * which a stub with range stepping (vCont;r) does itself. */
#include <stdio.h>
static volatile long counter;
long result;
int main(void) {
    long n = 5000;
    for (long i = 0; i < n; i++) counter++;
    result = counter * 2;
    printf("result %ld\n", result);
    return 0;
}
