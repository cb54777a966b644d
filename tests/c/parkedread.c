/* A thread that says it is parked (an atomic flag, no lock) and then
 * blocks in a read of a pipe, as an event loop's thread does before it
 * waits in epoll_wait; the main thread polls the flag, reading the time
 * in each turn, and writes to the pipe once it sees it set. How many
 * turns main took in each round depends on timing; the replay must
 * reproduce them, so the flag's store must be replayed where the reader
 * entered its read, not where the read returned (after main's write).
 * Prints the rounds and main's turns in all. */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 200

static int fds[2];
static int parked;

static void *sleeper(void *arg) {
    (void)arg;
    for (int round = 0; round < ROUNDS; round++) {
        struct stat st;
        stat("/", &st);
        __atomic_store_n(&parked, 1, __ATOMIC_RELEASE);
        char c;
        if (read(fds[0], &c, 1) != 1)
            return NULL;
    }
    return NULL;
}

int main(void) {
    if (pipe(fds) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    long turns = 0;
    for (int round = 0; round < ROUNDS; round++) {
        while (!__atomic_load_n(&parked, __ATOMIC_ACQUIRE)) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            turns++;
        }
        __atomic_store_n(&parked, 0, __ATOMIC_RELEASE);
        if (write(fds[1], "x", 1) != 1)
            return 1;
    }
    pthread_join(t, NULL);
    printf("rounds %d turns %ld\n", ROUNDS, turns);
    return 0;
}
