/* pendingspin.c: the main thread hands each round to a worker through a
 * pipe and waits by spinning on an atomic flag that the worker clears
 * after its logged write, with no call in between (as Redis's main thread
 * waits for its I/O threads); the worker then spins until main, after its
 * next logged call, says it saw the flag clear. The log places the
 * worker's write before main's call, and the clear after it: a one-core
 * replay that runs main to that call spins for ever unless the worker
 * runs on first, and the worker spins in turn until main runs again.
 * With CALLS, the worker writes CALLS times per round (a batch of
 * replies). Prints "m" and CALLS "w" per round, then "done ROUNDS".
 * Usage: pendingspin [ROUNDS [CALLS]] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_int pending, seen;
static int work[2], calls = 1;

static void *worker(void *arg) {
    (void)arg;
    char c;
    while (read(work[0], &c, 1) == 1) {
        for (int k = 0; k < calls; k++)
            if (write(1, "w", 1) != 1)
                return NULL;
        atomic_store(&pending, 0);
        while (!atomic_load(&seen))
            ;
        atomic_store(&seen, 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    if (argc > 2)
        calls = atoi(argv[2]);
    if (pipe(work) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    for (int r = 0; r < rounds; r++) {
        atomic_store(&pending, 1);
        if (write(1, "m", 1) != 1 || write(work[1], "x", 1) != 1)
            return 1;
        while (atomic_load(&pending))
            ;
        getppid(); /* a logged call after the wait */
        atomic_store(&seen, 1);
    }
    close(work[1]);
    pthread_join(t, NULL);
    printf("\ndone %d\n", rounds);
    return 0;
}
