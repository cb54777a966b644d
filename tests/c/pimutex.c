/* pimutex.c: four threads add to a counter under a priority-inheritance
 * mutex (PTHREAD_PRIO_INHERIT: glibc locks it with FUTEX_LOCK_PI and
 * FUTEX_UNLOCK_PI when contended). Prints the total, 4000. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m;
static long total;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        total++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT) != 0) return 1;
    pthread_mutex_init(&m, &a);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("total %ld\n", total);
    return 0;
}
