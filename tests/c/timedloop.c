/* timedloop.c MODE: counts iterations of a short computation until a
 * timer signal (setitimer, 300 ms) makes its handler clear a flag, then
 * prints the count. The count depends on the exact instruction the
 * signal hit: a replay that delivers it anywhere else prints another.
 * No stack word alone shows the count:
 *   up    the loop calls nothing and keeps its count and state in
 *         registers (some 150 million iterations);
 *   down  the same, counting down from ~0;
 *   call  each round calls a step function from four places, and keeps
 *         its values in callee-saved registers, so it saves the caller's
 *         (the count's) on its stack: where the signal hits (mostly in the
 *         step function) the count is a stack word of the round's frame
 *         that changes once in four hits, beside registers that change at
 *         each. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static volatile sig_atomic_t run = 1;

static void done(int sig) {
    (void)sig;
    run = 0;
}

#define STEP(x) ((x) ^= (x) >> 29, (x) *= 0xbf58476d1ce4e5b9ULL, (x) ^= (x) >> 31)

__attribute__((noinline)) static unsigned long up(uint64_t *x) {
    unsigned long n = 0;
    while (run) {
        STEP(*x);
        n++;
    }
    return n;
}

__attribute__((noinline)) static unsigned long down(uint64_t *x) {
    unsigned long left = ~0UL;
    while (run) {
        STEP(*x);
        left--;
    }
    return left;
}

__attribute__((noinline)) static uint64_t step(uint64_t x) {
    return STEP(x);
}

__attribute__((noinline)) static uint64_t round4(uint64_t x) {
    uint64_t a = step(x);
    uint64_t b = step(a ^ 1);
    uint64_t c = step(b ^ 2);
    return a ^ b ^ step(c + a);
}

__attribute__((noinline)) static unsigned long call(uint64_t *x) {
    unsigned long n = 0;
    uint64_t y = *x;
    while (run) {
        y = round4(y);
        n++;
    }
    *x = y;
    return n;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "up";
    unsigned long (*loop)(uint64_t *) = !strcmp(mode, "down") ? down : !strcmp(mode, "call") ? call : up;
    struct sigaction sa = {.sa_handler = done};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    setitimer(ITIMER_REAL, &it, NULL);
    uint64_t x = 1;
    unsigned long count = loop(&x);
    printf("%s: %lu, x = %016llx\n", mode, count, (unsigned long long)x);
    return 0;
}
