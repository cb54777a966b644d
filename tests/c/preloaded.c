/* preloaded.c: what a program sees of weft's preloading. Prints the
 * descriptor its first open gets (3 natively: weft's buffers must not
 * hold one) and CLOCK_REALTIME's seconds (1000000000 under
 * tests/c/fakeclock.c, which the user preloads: the user's interposer must
 * come first, as natively). */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>

int main(void) {
    int fd = open("/dev/null", O_RDONLY);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("first fd %d, seconds %s\n", fd, ts.tv_sec == 1000000000 ? "faked" : "real");
    return 0;
}
