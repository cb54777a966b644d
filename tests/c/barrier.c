/* barrier.c: 3 threads synchronised by a pthread_barrier_t over 5 rounds;
 * each round every thread adds to a mutex-protected per-round counter.
 * Prints per-round totals (deterministic) after joining. */
#include <pthread.h>
#include <stdio.h>

#define NTHREADS 3
#define ROUNDS 5

static pthread_barrier_t bar;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int totals[ROUNDS];

static void *worker(void *arg) {
    long id = (long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&m);
        totals[r] += (int)(id + 1) * (r + 1);
        pthread_mutex_unlock(&m);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(void) {
    pthread_t t[NTHREADS];
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int r = 0; r < ROUNDS; r++) printf("round %d total=%d\n", r, totals[r]);
    return 0;
}
