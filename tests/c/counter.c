/* counter.c: for the debugger tests. NWORKERS worker threads each call
 * work_step() STEPS times; work_step() runs under a mutex and increments
 * the shared global `counter`, so the k-th call of work_step() (in any
 * thread) finds counter == k - 1 on entry. Every worker sets its own
 * thread-local tls_id to 100 + id before its first step. The workers meet
 * at a barrier first, so every worker thread exists when work_step() is
 * first called. Prints "counter=60 stats=20,20,20" (deterministic). */
#include <pthread.h>
#include <stdio.h>

#define NWORKERS 3
#define STEPS 20

long counter;
long stats[4];            /* stats[id]: steps of worker id (more globals to watch) */
__thread int tls_id;      /* 0 in main, 100 + id in worker id */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;

/* Called with `lock` held. */
void work_step(int id, int i) {
    counter++;
    stats[id] += 1;
    (void)i;
}

void *worker(void *arg) {
    int id = (int)(long)arg;
    tls_id = 100 + id;
    pthread_barrier_wait(&start);
    for (int i = 0; i < STEPS; i++) {
        pthread_mutex_lock(&lock);
        work_step(id, i);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(void) {
    pthread_t t[NWORKERS];
    pthread_barrier_init(&start, NULL, NWORKERS);
    for (long i = 0; i < NWORKERS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NWORKERS; i++) pthread_join(t[i], NULL);
    printf("counter=%ld stats=%ld,%ld,%ld\n", counter, stats[0], stats[1], stats[2]);
    return 0;
}
