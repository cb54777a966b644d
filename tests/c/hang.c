/* A program that hangs: the main thread locks a mutex it already holds
 * and a worker waits on a condition nobody signals, both in futex waits
 * for ever. A user kills it (kill -9) to find out where it hung. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, w = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&w);
    for (;;)
        pthread_cond_wait(&never, &w);
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    pthread_mutex_lock(&m);
    pthread_mutex_lock(&m);
    return 0;
}
