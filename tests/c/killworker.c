/* killworker.c: a worker thread computes in a loop that keeps its count
 * in a register; another thread sleeps 100 ms and then pthread_kills it
 * with SIGUSR1, whose handler clears the flag the loop tests. The main
 * thread prints the worker's count. The signal is the worker's first
 * logged event: its tgkill runs in the replay too, before the worker
 * (which the replay runs one thread at a time) has reached the
 * recorded iteration. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t run = 1;
static pthread_t worker_thread;
static unsigned long count;
static uint64_t state;

static void done(int sig) {
    (void)sig;
    run = 0;
}

static void *worker(void *arg) {
    (void)arg;
    uint64_t x = 1;
    unsigned long n = 0;
    while (run) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ULL;
        n++;
    }
    count = n;
    state = x;
    return NULL;
}

static void *killer(void *arg) {
    (void)arg;
    usleep(100000);
    pthread_kill(worker_thread, SIGUSR1);
    return NULL;
}

int main(void) {
    signal(SIGUSR1, done);
    pthread_t k;
    pthread_create(&worker_thread, NULL, worker, NULL);
    pthread_create(&k, NULL, killer, NULL);
    pthread_join(k, NULL);
    pthread_join(worker_thread, NULL);
    printf("%lu iterations, x = %016llx\n", count, (unsigned long long)state);
    return 0;
}
