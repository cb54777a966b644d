/* fakeclock.c: a preload library of the user's (libfaketime's way): its
 * clock_gettime calls the next one (dlsym RTLD_NEXT: libc's natively,
 * weft's runtime under weft) and sets CLOCK_REALTIME's seconds to
 * 1000000000. Build: cc -shared -fPIC -o libfakeclock.so fakeclock.c */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*next)(clockid_t, struct timespec *);
    if (!next)
        next = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = next(clock, ts);
    if (r == 0 && clock == CLOCK_REALTIME)
        ts->tv_sec = 1000000000;
    return r;
}
