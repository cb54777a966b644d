/* raisekill.c: four threads signal their own process 20 times each, two
 * with raise(SIGUSR1) (to themselves) and two with kill(getpid(),
 * SIGUSR2) (to whichever thread the kernel picks), printing a line after
 * each. The handler prints a line naming the signal and the thread, with
 * getpid and gettid, which the runtime buffers. Signals land together
 * (SIGUSR2 at the entry of SIGUSR1's handler), in the runtime, and in
 * the writes. Prints how many times the handler ran.
 * Usage: raisekill */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int caught;

static void on_signal(int signo) {
    char line[64];
    int n = snprintf(line, sizeof line, "handler %d in %d of %d\n", signo, gettid(), getpid());
    write(1, line, (size_t)n);
    atomic_fetch_add(&caught, 1);
}

static void *signal_own(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 20; i++) {
        if (id % 2)
            raise(SIGUSR1);
        else
            kill(getpid(), SIGUSR2);
        char line[64];
        int n = snprintf(line, sizeof line, "thread %ld round %d in %d\n", id, i, gettid());
        write(1, line, (size_t)n);
    }
    return NULL;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, signal_own, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("caught %d\n", atomic_load(&caught));
    return 0;
}
