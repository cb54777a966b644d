/* regcount.c: counts iterations of a short computation until a timer
 * signal (setitimer, 300 ms) makes its handler clear a flag, then prints
 * the count. The loop calls nothing and keeps its counter and state in
 * registers: no stack word changes from one iteration to the next. The
 * count depends on the exact instruction the signal hit: a replay that
 * delivers it anywhere else prints another count. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>

static volatile sig_atomic_t run = 1;

static void done(int sig) {
    (void)sig;
    run = 0;
}

int main(void) {
    struct sigaction sa = {.sa_handler = done};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    setitimer(ITIMER_REAL, &it, NULL);
    uint64_t x = 1;
    unsigned long count = 0;
    while (run) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 31;
        count++;
    }
    printf("%lu iterations, x = %016llx\n", count, (unsigned long long)x);
    return 0;
}
