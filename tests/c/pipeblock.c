/* pipeblock.c: one thread blocks in read() on an empty pipe (a call the
 * in-process runtime cannot complete, so it takes the ptrace path) while
 * another keeps making buffered calls, stat and clock_gettime, for about
 * 50 ms before it writes the pipe. Prints what was read and how many
 * rounds of buffered calls the writer made (a number that differs from
 * run to run, so a replay that does not take the times from the log
 * prints another). Usage: pipeblock [FILE] (default: the program) */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static const char *file;
static char got[64];
static ssize_t got_n;

static void *reader(void *arg) {
    (void)arg;
    got_n = read(fds[0], got, sizeof got - 1);
    return NULL;
}

static long long ns(const struct timespec *t) {
    return t->tv_sec * 1000000000LL + t->tv_nsec;
}

int main(int argc, char **argv) {
    file = argc > 1 ? argv[1] : argv[0];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long rounds = 0, stats = 0;
    do {
        struct stat st;
        stats += stat(file, &st) == 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        rounds++;
        for (volatile int spin = 0; spin < 20000; spin++)
            ; /* a few µs of work between rounds: thousands of rounds, not 100,000s */
    } while (ns(&now) - ns(&start) < 50000000LL);
    const char msg[] = "hello through the pipe";
    if (write(fds[1], msg, strlen(msg)) != (ssize_t)strlen(msg))
        perror("write");
    pthread_join(t, NULL);
    got[got_n > 0 ? got_n : 0] = 0;
    printf("read %zd bytes: %s\n", got_n, got);
    printf("writer rounds %ld, stats %ld, waited %lld ms\n", rounds, stats, (ns(&now) - ns(&start)) / 1000000);
    return 0;
}
