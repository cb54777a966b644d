/* spinlocks.c: two threads take turns through a spin lock of their own
 * (no pthread call, no futex), each making a logged call inside it: a
 * clock_gettime and a write of a line that names the thread and its
 * round, so stdout shows the order in which they held the lock. After
 * each release a thread waits a while for the other to take the lock
 * (a bounded wait: the other may be done), so that it changes hands often
 * even on a loaded machine. KIND is "tas" (xchg with pause) or "ttas"
 * (spin on a plain load, then xchg).
 * On one core, the thread that left the lock ran on past its release
 * and took it again before the other, whose call the log has next, saw
 * it free: a livelock.
 * Usage: spinlocks KIND [ROUNDS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int lock;
static volatile int takes; /* critical sections so far */
static int ttas;
static int rounds = 400;
static long total;

static void take(void) {
    for (;;) {
        if (ttas)
            while (lock)
                ;
        if (!__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
            return;
        if (!ttas)
            __builtin_ia32_pause();
    }
}

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < rounds; i++) {
        take();
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        char line[32];
        int n = snprintf(line, sizeof line, "%ld %d\n", id, i);
        if (write(1, line, n) != n)
            abort();
        total += id;
        int taken = ++takes;
        __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
        for (int k = 0; k < 200000 && takes == taken; k++)
            __builtin_ia32_pause();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "tas") && strcmp(argv[1], "ttas"))) {
        fprintf(stderr, "usage: spinlocks tas|ttas [ROUNDS]\n");
        return 2;
    }
    ttas = !strcmp(argv[1], "ttas");
    if (argc > 2)
        rounds = atoi(argv[2]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("total %ld\n", total);
    return 0;
}
