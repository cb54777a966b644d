/* sharedmap.c: two threads count into a MAP_SHARED anonymous page under a
 * mutex. A fork would share that page rather than copy it, so the replayer
 * must take no checkpoint of this process. Prints the total. */
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long *shared;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        (*shared)++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void) {
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("total=%ld\n", *shared);
    return 0;
}
