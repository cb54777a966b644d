/* segv.c: a worker thread writes through a NULL pointer while main is
 * blocked in pthread_join. Expected: process killed by SIGSEGV. */
#include <pthread.h>
#include <stdio.h>

static void *worker(void *arg) {
    (void)arg;
    printf("worker starting\n");
    fflush(stdout);
    volatile int *p = 0;
    *p = 1;
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL); /* never returns */
    printf("unreachable\n");
    return 0;
}
