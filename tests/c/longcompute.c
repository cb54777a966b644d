/* longcompute.c: a worker computes (ROUNDS, the argument, rounds of a
 * dependent multiply-add chain: 1,000,000,000 take about 2 s here) with
 * no syscall, then prints the result; main joins it. A replay with a
 * livelock timeout shorter than the computation must not call it a
 * livelock: the worker's registers change around its loop. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *worker(void *arg) {
    unsigned long x = 1, rounds = (unsigned long)arg;
    for (unsigned long i = 0; i < rounds; i++)
        x = x * 6364136223846793005UL + i;
    printf("computed %016lx\n", x);
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000000UL;
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)rounds);
    pthread_join(t, NULL);
    return 0;
}
