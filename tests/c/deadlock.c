/* deadlock.c: two threads take two mutexes in opposite orders; a barrier
 * makes sure each holds its first before it asks for its second, so both
 * block for ever. A user kills it (kill -9) to find out where it hung. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both;

static void *first_a(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&lock_b); /* a waits here */
    return NULL;
}

static void *first_b(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock_b);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&lock_a); /* b waits here */
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&both, NULL, 2);
    pthread_create(&a, NULL, first_a, NULL);
    pthread_create(&b, NULL, first_b, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
