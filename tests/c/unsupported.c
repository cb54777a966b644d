/* unsupported.c: calls a syscall outside weft's table (sched_getparam), so
 * the recorder logs it as an unsupported event with a warning, and the
 * replay returns its logged result and warns too. */
#include <sched.h>
#include <stdio.h>

int main(void) {
    struct sched_param p;
    int r = sched_getparam(0, &p);
    printf("r=%d\n", r);
    return 0;
}
