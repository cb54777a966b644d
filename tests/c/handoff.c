/* handoff.c: two threads hand a turn back and forth ROUNDS times (default
 * 1000) through one atomic word, each spinning with `pause` until the
 * turn is its own: no syscall, no lock, nothing logged between the two
 * threads' starts and their returns. With "yield", the spin calls
 * sched_yield instead. Prints what each thread summed.
 * Usage: handoff [ROUNDS [yield]] */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int turn;
static long rounds = 1000, sums[2];
static int yield;

static void *take_turns(void *arg) {
    int me = (int)(long)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != me) {
            if (yield)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
        sums[me] += i * (me + 1);
        atomic_store_explicit(&turn, 1 - me, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]);
    yield = argc > 2 && strcmp(argv[2], "yield") == 0;
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, take_turns, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("sums %ld %ld\n", sums[0], sums[1]);
    return 0;
}
