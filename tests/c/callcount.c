/* callcount.c: counts rounds of a hash until a timer signal (setitimer,
 * 300 ms) makes its handler clear a flag, then prints the count. Each
 * round calls the hash's step function from four places; the round
 * keeps its values in callee-saved registers, so it saves the caller's
 * (the counter's) on its stack. Where the signal hits (mostly in the
 * step function), the counter is a stack word of the round's frame that
 * changes once in four hits, beside registers that change at each. The
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

__attribute__((noinline)) static uint64_t step(uint64_t x) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 31;
    return x;
}

__attribute__((noinline)) static uint64_t round4(uint64_t x) {
    uint64_t a = step(x);
    uint64_t b = step(a ^ 1);
    uint64_t c = step(b ^ 2);
    return a ^ b ^ step(c + a);
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
        x = round4(x);
        count++;
    }
    printf("%lu rounds, x = %016llx\n", count, (unsigned long long)x);
    return 0;
}
