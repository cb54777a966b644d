/* countalarm.c: counts iterations of a pure computation until a timer
 * signal (setitimer, 50 ms) makes its handler clear a flag, then prints
 * the count, as benchmarks such as `openssl speed` do. Each iteration
 * takes and releases a mutex (a pthread synchronization point, as
 * openssl's locks are) and then computes for a few microseconds in
 * straight-line code, in registers only. The count depends on the exact
 * instruction the signal hit: a replay that delivers it anywhere else
 * prints another count. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>

static volatile sig_atomic_t run = 1;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void done(int sig) {
    (void)sig;
    run = 0;
}

#define S x ^= x >> 29; x *= 0xbf58476d1ce4e5b9ULL;
#define S4 S S S S
#define S16 S4 S4 S4 S4
#define S64 S16 S16 S16 S16
#define S256 S64 S64 S64 S64
#define S1024 S256 S256 S256 S256

int main(void) {
    struct sigaction sa = {.sa_handler = done};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_value = {0, 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    uint64_t x = 1;
    unsigned long count = 0;
    while (run) {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
        S1024
        count++;
    }
    printf("%lu iterations, x = %016llx\n", count, (unsigned long long)x);
    return 0;
}
