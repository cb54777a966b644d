/* lostupdates.c: two threads meet at a barrier, then each adds 1 to a
 * shared counter ITERATIONS times (default 20,000,000) with a plain load
 * and store, no lock, no syscall; prints the total. On two cores updates
 * are lost (total < 2 * ITERATIONS); a one-core replay runs the stretches
 * between syscalls whole, one after the other, and loses none, so no
 * schedule reproduces the recorded total: a replay that cannot be made
 * valid. Usage: lostupdates [ITERATIONS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long counter;
static long iterations = 20000000;
static pthread_barrier_t start;

static void *adder(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < iterations; i++)
        counter = counter + 1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        iterations = atol(argv[1]);
    pthread_t t[2];
    pthread_barrier_init(&start, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, adder, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("total %ld of %ld\n", counter, 2 * iterations);
    return 0;
}
