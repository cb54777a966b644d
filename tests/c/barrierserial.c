/* barrierserial.c: 3 threads meet at one barrier for ROUNDS rounds (default
 * 2000); each counts the rounds it was the serial thread, which the kernel's
 * timing decides. Prints the counts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define NTHREADS 3
static pthread_barrier_t bar;
static long rounds = 2000;
static long serial[NTHREADS];
static void *worker(void *arg) {
    long id = (long)arg;
    for (long r = 0; r < rounds; r++)
        if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD)
            serial[id]++;
    return NULL;
}
int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    pthread_t t[NTHREADS];
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++) printf("thread %d serial %ld\n", i, serial[i]);
    return 0;
}
