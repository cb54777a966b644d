/* downcount.c: counts down from ~0 until a timer signal (setitimer,
 * 300 ms) makes its handler clear a flag, then prints what is left. The
 * loop calls nothing and keeps its count and state in registers; the
 * count goes down by one an iteration. What is left depends on the exact
 * instruction the signal hit: a replay that delivers it anywhere else
 * prints another number. */
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
    unsigned long left = ~0UL;
    while (run) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ULL;
        left--;
    }
    printf("%lu left, x = %016llx\n", left, (unsigned long long)x);
    return 0;
}
