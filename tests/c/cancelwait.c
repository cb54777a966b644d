/* cancelwait.c: pthread_cancel of threads blocked in cancellation points,
 * as programs stop their workers: one in pthread_cond_wait (its cleanup
 * handler unlocks the mutex, which the wait took again), one in a read of
 * an empty pipe, one in sleep. Main joins them, then takes the mutex.
 * Prints each thread's result and cleanup count. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cleaned[3];
static int pipefd[2];

static void cleanup(void *arg) {
    long k = (long)arg;
    cleaned[k]++;
    if (k == 0)
        pthread_mutex_unlock(&m);
}

static void *in_cond_wait(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    pthread_cleanup_push(cleanup, (void *)0);
    for (;;)
        pthread_cond_wait(&cv, &m);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *in_read(void *arg) {
    (void)arg;
    char c;
    pthread_cleanup_push(cleanup, (void *)1);
    for (;;)
        if (read(pipefd[0], &c, 1) < 0)
            break;
    pthread_cleanup_pop(0);
    return NULL;
}

static void *in_sleep(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup, (void *)2);
    for (;;)
        sleep(10);
    pthread_cleanup_pop(0);
    return NULL;
}

int main(void) {
    void *(*start[3])(void *) = {in_cond_wait, in_read, in_sleep};
    pthread_t t[3];
    if (pipe(pipefd) != 0)
        return 1;
    for (int k = 0; k < 3; k++)
        pthread_create(&t[k], NULL, start[k], NULL);
    usleep(20000);
    for (int k = 0; k < 3; k++)
        pthread_cancel(t[k]);
    for (int k = 0; k < 3; k++) {
        void *r;
        pthread_join(t[k], &r);
        printf("thread %d canceled %d cleaned %d\n", k, r == PTHREAD_CANCELED, cleaned[k]);
    }
    pthread_mutex_lock(&m);
    printf("mutex taken again\n");
    pthread_mutex_unlock(&m);
    return 0;
}
