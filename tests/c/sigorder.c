/* sigorder.c: a signal that lands as a buffered call returns, and whose
 * handler prints, while another thread prints. Thread "sender" sends
 * thread "caller" SIGUSR2 (tgkill) ROUNDS times, printing a numbered line
 * after each; "caller" makes 100,000 buffered calls (clock_gettime), and
 * its handler prints a line (a tgkill after it returned fails). The lines' order on
 * stdout is what a replay must print too.
 * Usage: sigorder [ROUNDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int caller_tid;

static void on_signal(int signo) {
    (void)signo;
    write(1, "handler\n", 8);
}

static void *caller(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    atomic_store(&caller_tid, (int)syscall(SYS_gettid));
    struct timespec ts;
    for (int i = 0; i < 100000; i++)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 50;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the main thread never takes it */
    pthread_t t;
    pthread_create(&t, NULL, caller, NULL);
    while (!atomic_load(&caller_tid))
        ;
    char line[32];
    for (int i = 0; i < rounds; i++) {
        syscall(SYS_tgkill, getpid(), atomic_load(&caller_tid), SIGUSR2);
        int n = snprintf(line, sizeof line, "sent %d\n", i);
        write(1, line, (size_t)n);
    }
    pthread_join(t, NULL);
    return 0;
}
