/* rtsignals.c: real-time signals, which programs get without asking for
 * them: setgid and setuid in a process with a second thread, blocked in a
 * read of an empty pipe (glibc's SIGSETXID, signal 33, makes every thread
 * change its ids); pthread_cancel (glibc's SIGCANCEL, signal 32) of that
 * thread, and a thread that calls pthread_exit; and SIGRTMIN+1 from a
 * timer, caught by a handler, 5 times. Prints what happened. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks;

static void tick(int sig) {
    (void)sig;
    ticks++;
}

static void cleanup(void *name) {
    printf("cleanup %s\n", (const char *)name);
}

static int pipefd[2];

static void *reader(void *arg) {
    (void)arg;
    char c;
    pthread_cleanup_push(cleanup, "reader");
    while (read(pipefd[0], &c, 1) != 0) {
    }
    pthread_cleanup_pop(0);
    return NULL;
}

static void *exiter(void *arg) {
    (void)arg;
    pthread_exit((void *)7);
}

int main(void) {
    pthread_t t;
    void *r;
    if (pipe(pipefd) != 0) {
        return 1;
    }
    pthread_create(&t, NULL, reader, NULL);
    usleep(5000);
    if (setgid(getgid()) != 0 || setuid(getuid()) != 0) {
        perror("setid");
    }
    pthread_cancel(t);
    pthread_join(t, &r);
    printf("reader %s\n", r == PTHREAD_CANCELED ? "canceled" : "returned");
    pthread_create(&t, NULL, exiter, NULL);
    pthread_join(t, &r);
    printf("exiter %ld\n", (long)r);

    signal(SIGRTMIN + 1, tick);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 1};
    timer_t timer;
    timer_create(CLOCK_MONOTONIC, &ev, &timer);
    struct itimerspec every = {{0, 2000000}, {0, 2000000}};
    timer_settime(timer, 0, &every, NULL);
    while (ticks < 5) {
        pause();
    }
    timer_delete(timer);
    printf("ticks %d\n", (int)ticks);
    return 0;
}
