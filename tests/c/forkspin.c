/* forkspin.c: openssl speed's shape. Two forked children each set a
 * timer, take and release a mutex (the in-process runtime logs both),
 * then, until their SIGALRM, hash the same 128 bytes over and over, calling the hash from
 * two places in each iteration, counting the iterations in their stack
 * frame (as openssl's benchmark loop does), and print the count. A
 * replay must keep the second child from running on past its release
 * (it makes no call until the signal), and find each signal's iteration
 * again, though the hash's code runs many times in each.
 * Usage: forkspin [MILLISECONDS] (default 500) */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char block[128] = "the same bytes, every iteration";
static unsigned long digest;

static void on_alarm(int sig) {
    (void)sig;
    stop = 1;
}

/* FNV-1a of `n` bytes at `p`. */
__attribute__((noinline)) static unsigned long fnv(const unsigned char *p, int n) {
    unsigned long h = 14695981039346656037UL;
    for (int i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3UL;
    return h;
}

static void child(int n, long ms) {
    signal(SIGALRM, on_alarm);
    struct itimerval t = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &t, NULL);
    /* The child's last event before its signal: a release. */
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    volatile long count;
    for (count = 0; !stop; count++)
        digest = fnv(block, 64) ^ fnv(block + 64, 64);
    printf("child %d: %ld iterations, digest %016lx\n", n, (long)count, digest);
    exit(0);
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 500;
    for (int n = 0; n < 2; n++) {
        if (fork() == 0)
            child(n, ms);
    }
    for (int n = 0; n < 2; n++)
        wait(NULL);
    printf("parent: both children done\n");
    return 0;
}
