/* restartpoll.c: a thread polls a pipe and another sleeps, while main
 * forks children that exit: SIGCHLD, which no thread handles, interrupts
 * them under a tracer, and the kernel resumes each call through
 * restart_syscall. The poll then returns the pipe's readiness in revents
 * (which restart_syscall writes), and the sleep ends. Main blocks SIGCHLD,
 * so the signal goes to the other threads. Prints the poll's result and
 * revents, and the sleep's result. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int p[2];

static void *poller(void *arg) {
    (void)arg;
    struct pollfd fd = {p[0], POLLIN, 0};
    int n = poll(&fd, 1, 2000);
    printf("poll %d revents %#x\n", n, fd.revents);
    return NULL;
}

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec t = {0, 60 * 1000 * 1000};
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
    printf("sleep %d\n", r);
    return NULL;
}

int main(void) {
    if (pipe(p) != 0)
        return 1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_t t[2];
    pthread_create(&t[0], NULL, poller, NULL);
    pthread_create(&t[1], NULL, sleeper, NULL);
    pthread_sigmask(SIG_BLOCK, &chld, NULL);
    usleep(10000);
    for (int k = 0; k < 3; k++) {
        if (fork() == 0)
            _exit(k);
        wait(NULL);
        usleep(5000);
    }
    usleep(80000);
    if (write(p[1], "x", 1) != 1)
        return 1;
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    return 0;
}
