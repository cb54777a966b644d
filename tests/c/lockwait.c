/* lockwait.c: a data race that only the place of a contended lock's wait
 * orders. The main thread holds a mutex for about 100 ms of computing
 * (1,000 rounds, each with a clock_gettime) and then reads a flag without
 * a lock; the other thread sets the flag after 1 ms, then waits for the
 * mutex. The flag's store comes long before the other thread's
 * acquisition, which the main thread's unlock allows, and long before
 * the main thread's read. Prints the flag as read. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int flag;

static void *setter(void *arg) {
    (void)arg;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    flag = 1;
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_mutex_lock(&lock);
    pthread_create(&t, NULL, setter, NULL);
    struct timespec now;
    for (int round = 0; round < 1000; round++) {
        for (volatile int k = 0; k < 100000; k++) {
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
    int seen = flag;
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    printf("flag %d\n", seen);
    return 0;
}
