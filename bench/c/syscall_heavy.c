/* syscall_heavy.c: issue 12's syscall-heavy program. Two threads each make
 * ITERATIONS rounds (default 200,000) of clock_gettime + stat of FILE, and
 * every 64th round open/read (up to 512 bytes)/close of FILE (default: the
 * program itself). Prints a checksum of the sizes stat'ed and the bytes
 * read, which is the same on every run over the same file; the times are
 * taken but not summed, as a server logging them would.
 * Usage: syscall_heavy [ITERATIONS [FILE]] */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long iterations = 200000;
static const char *file;

struct result {
    unsigned long long sum;  /* sizes stat'ed plus bytes read */
    long reads;              /* open/read/close rounds */
    long clock_failures;     /* clock_gettime != 0: none expected */
};

static void *worker(void *arg) {
    struct result *r = arg;
    unsigned char buf[512];
    for (long i = 0; i < iterations; i++) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
            r->clock_failures++;
        struct stat st;
        if (stat(file, &st) == 0)
            r->sum += (unsigned long long)st.st_size;
        if (i % 64 == 0) {
            int fd = open(file, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, buf, sizeof buf);
            for (ssize_t k = 0; k < n; k++)
                r->sum = r->sum * 31 + buf[k];
            close(fd);
            r->reads++;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        iterations = atol(argv[1]);
    file = argc > 2 ? argv[2] : argv[0];
    pthread_t t[2];
    struct result r[2] = {{0}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("iterations %ld reads %ld %ld clock failures %ld checksums %016llx %016llx\n", iterations,
           r[0].reads, r[1].reads, r[0].clock_failures + r[1].clock_failures, r[0].sum, r[1].sum);
    return 0;
}
