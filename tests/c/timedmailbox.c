/* A one-slot mailbox between two threads that meet only through an atomic
 * word and futex(2) waits with a timeout, as Rust's recv_timeout and
 * libstdc++'s future::wait_for do: each side checks the word, and waits
 * for it to change for at most 50 us. The producer posts ROUNDS values;
 * the consumer takes each one. Prints the sum taken, which is the same on
 * every run; how many waits timed out differs from run to run, so a replay
 * must give each wait its recorded outcome at its recorded place. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 2000

static unsigned box; /* 0: empty, else the value posted */
static long timeouts[2];

/* Waits while `*word == seen`, for at most 50 us; counts a timeout. */
static void wait_while(unsigned *word, unsigned seen, long *timed_out) {
    struct timespec ts = {0, 50000};
    if (syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0) == -1 && errno == ETIMEDOUT)
        ++*timed_out;
}

static void wake(unsigned *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *producer(void *arg) {
    (void)arg;
    for (unsigned v = 1; v <= ROUNDS; v++) {
        unsigned now;
        while ((now = __atomic_load_n(&box, __ATOMIC_ACQUIRE)) != 0)
            wait_while(&box, now, &timeouts[0]);
        __atomic_store_n(&box, v, __ATOMIC_RELEASE);
        wake(&box);
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    unsigned long sum = 0;
    for (int taken = 0; taken < ROUNDS; taken++) {
        unsigned v;
        while ((v = __atomic_load_n(&box, __ATOMIC_ACQUIRE)) == 0)
            wait_while(&box, 0, &timeouts[1]);
        sum += v;
        __atomic_store_n(&box, 0, __ATOMIC_RELEASE);
        wake(&box);
    }
    pthread_join(t, NULL);
    printf("sum %lu (timeouts: %s)\n", sum, timeouts[0] + timeouts[1] > 0 ? "some" : "none");
    return 0;
}
