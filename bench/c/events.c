/* events.c: the debugger benchmark's program. Two threads take turns on a
 * mutex; each turn reads the clock (a logged syscall, since weft hides the
 * vDSO), so a run of ROUNDS rounds per thread logs about 2 x ROUNDS events.
 * `marker` is written once every STRIDE rounds of thread 0, so a
 * watchpoint on it hits about every 2 x STRIDE events. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STRIDE 500

static long rounds = 50000;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long shared;
long marker;

static void *worker(void *arg) {
    long id = (long)arg;
    struct timespec ts;
    for (long i = 0; i < rounds; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        pthread_mutex_lock(&m);
        shared += ts.tv_nsec & 1;
        pthread_mutex_unlock(&m);
        if (id == 0 && i % STRIDE == 0)
            marker = i;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("marker=%ld shared=%ld\n", marker, shared);
    return 0;
}
