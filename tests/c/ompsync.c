/* ompsync.c: OpenMP's own locks (libgomp's, not pthread's): 4 threads
 * take an unnamed critical section, a named one, an omp_lock_t and an
 * omp_nest_lock_t ROUNDS times each, with uneven work in between, and
 * append their thread number to an order string inside each; and the
 * thread that runs each round's single construct (whose barrier orders
 * the appends) to a fifth. The strings
 * depend on which thread got each lock first: a replay prints them as
 * recorded only if it grants libgomp's locks in the recorded order.
 * Usage: ompsync [ROUNDS] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define MAX 256

static char order[5][MAX + 1];
static int len[5];

static void note(int which, int t) {
    if (len[which] < MAX)
        order[which][len[which]++] = (char)('0' + t);
}

/* Work that takes a thread-dependent, round-dependent time. */
static unsigned long work(int t, int k) {
    unsigned long x = (unsigned long)(t * 7919 + k);
    for (long i = 0; i < 20000L * (1 + (t * 3 + k) % 5); i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    omp_lock_t lock;
    omp_nest_lock_t nest;
    omp_init_lock(&lock);
    omp_init_nest_lock(&nest);
    unsigned long sink = 0;
    omp_set_num_threads(THREADS);
#pragma omp parallel reduction(^ : sink)
    {
        int t = omp_get_thread_num();
        for (int k = 0; k < rounds; k++) {
            sink ^= work(t, k);
#pragma omp critical
            note(0, t);
            sink ^= work(t, k + 1);
#pragma omp critical(named)
            note(1, t);
            omp_set_lock(&lock);
            note(2, t);
            omp_unset_lock(&lock);
            while (!omp_test_nest_lock(&nest))
                sink ^= work(t, k + 2);
            omp_set_nest_lock(&nest);
            note(3, t);
            omp_unset_nest_lock(&nest);
            omp_unset_nest_lock(&nest);
#pragma omp single
            note(4, t);
        }
    }
    omp_destroy_lock(&lock);
    omp_destroy_nest_lock(&nest);
    for (int i = 0; i < 5; i++)
        printf("order %d: %s\n", i, order[i]);
    printf("sink %lx\n", sink);
    return 0;
}
