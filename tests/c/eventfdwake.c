/* eventfdwake.c: a worker wakes the main thread as libuv's uv_async_send
 * wakes its event loop, 200 rounds: it sets a pending flag (an atomic),
 * then writes 1 to an eventfd; the main thread polls the eventfd until
 * it is readable, reads it, and takes the round's value when it finds the
 * flag set. The recorder logs the write where it returns, which may be
 * after the main thread's read. Prints the sum of the values taken (and,
 * on stderr, how many reads found no flag). */
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ROUNDS 200

static int efd;
static sem_t go;
static atomic_int pending;
static long value;

static void *worker(void *arg) {
    (void)arg;
    for (long r = 1; r <= ROUNDS; r++) {
        sem_wait(&go);
        value = r * r;
        atomic_store(&pending, 1);
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) != sizeof one) return NULL;
    }
    return NULL;
}

int main(void) {
    efd = eventfd(0, 0);
    sem_init(&go, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    long sum = 0, empty = 0;
    for (int r = 1; r <= ROUNDS; r++) {
        sem_post(&go);
        for (;;) {
            struct pollfd p = {efd, POLLIN, 0};
            if (poll(&p, 1, 0) == 0) continue;
            uint64_t v;
            if (read(efd, &v, sizeof v) != sizeof v) return 1;
            if (atomic_exchange(&pending, 0)) break;
            empty++;
        }
        sum += value;
    }
    pthread_join(t, NULL);
    printf("sum %ld\n", sum);
    fprintf(stderr, "reads that found no flag: %ld\n", empty);
    return 0;
}
