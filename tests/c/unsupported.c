/* unsupported.c: calls a syscall whose effects weft cannot replay
 * (personality, queried), so the recorder logs it as an unsupported event
 * with a warning, and the replay returns its logged result and warns too. */
#include <stdio.h>
#include <sys/personality.h>

int main(void) {
    int r = personality(0xffffffff);
    printf("r=%d\n", r);
    return 0;
}
