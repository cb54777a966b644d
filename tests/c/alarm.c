/* Signals from outside the program: SIGALRM from the kernel's timer
 * (ualarm), taken by one thread only (the others block it). It arrives
 *   1. in a blocking read, with a handler without SA_RESTART: EINTR;
 *   2. in a blocking read, with SA_RESTART: the read restarts and gets
 *      the byte the main thread writes later;
 *   3. in a condition wait (a futex wait), which glibc resumes;
 *   4. while the thread spins through a mutex, not in any syscall;
 *   5. in sigsuspend, which unblocks it only while it waits;
 *   6. in nanosleep, which reports the time it had left.
 * With the argument "fatal", SIGALRM has its default action and kills the
 * program blocked in a read. Each step allows 0.5 s of slack. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STEP 500000 /* microseconds */

static volatile sig_atomic_t hits;
static int fds[2];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void on_alarm(int sig) {
    (void)sig;
    hits++;
}

static void handle(int flags) {
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = flags};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
}

static void *taker(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    char c = 0;

    ualarm(STEP, 0);
    ssize_t n = read(fds[0], &c, 1);
    printf("read: %zd (%s), hits %d\n", n, n < 0 ? strerror(errno) : "a byte", (int)hits);

    handle(SA_RESTART);
    ualarm(STEP, 0);
    n = read(fds[0], &c, 1);
    printf("read again: %zd '%c', hits %d\n", n, c, (int)hits);

    ualarm(STEP, 0);
    pthread_mutex_lock(&m);
    while (!done)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    printf("condition met, hits %d\n", (int)hits);

    ualarm(STEP, 0);
    while (hits < 4) {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
        /* Some work between the rounds: each round is 2 logged events,
         * and half a second of bare rounds made 9 million of them. */
        for (volatile int k = 0; k < 20000; k++) {
        }
    }
    printf("spun until hit %d\n", (int)hits);

    sigset_t none, now;
    sigemptyset(&none);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    ualarm(STEP, 0);
    sigsuspend(&none);
    pthread_sigmask(SIG_SETMASK, NULL, &now);
    printf("suspended until hit %d, SIGALRM blocked again: %s\n", (int)hits, sigismember(&now, SIGALRM) ? "yes" : "no");

    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    ualarm(STEP, 0);
    struct timespec req = {2, 0}, rem = {0, 0};
    int r = nanosleep(&req, &rem);
    printf("nanosleep: %d (%s), hits %d, %ld.%09ld s left\n", r, r ? strerror(errno) : "slept", (int)hits, (long)rem.tv_sec, rem.tv_nsec);
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    if (pipe(fds) != 0)
        return 1;
    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        char c;
        ualarm(STEP, 0);
        ssize_t n = read(fds[0], &c, 1);
        return (int)n;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    handle(0);
    pthread_t t;
    pthread_create(&t, NULL, taker, NULL);
    usleep(3 * STEP);
    if (write(fds[1], "x", 1) != 1)
        return 1;
    usleep(2 * STEP);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("joined\n");
    return 0;
}
