/* inproc_paths.c: every call that weft's in-process runtime buffers, made
 * directly from C in two threads (ROUNDS rounds each, default 200):
 * clock_gettime, gettimeofday, time, stat, lstat, fstat, fstatat, statx,
 * read and pread of the regular file FILE, glibc's getdents64 on the
 * directory DIR, getrandom, gettid and getpid. Each thread prints an
 * FNV-1a hash of all it got back, plus its first time and random bytes: a
 * replay that made these calls for real instead of taking them from the
 * log would print other times, random bytes and ids. DIR's entries are
 * printed sorted.
 * Usage: inproc_paths FILE DIR [ROUNDS] */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *file, *dir;
static long rounds = 200;

struct result {
    uint64_t hash;            /* FNV-1a of every result */
    struct timespec first;    /* the first clock_gettime */
    unsigned char random[8];  /* the first getrandom */
    long failures;            /* calls that failed: none expected */
    char names[4096];         /* DIR's entries, from the first round */
};

static void mix(struct result *r, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        r->hash = (r->hash ^ b[i]) * 0x100000001b3ULL;
}

/* Mixes st's size, inode and modification time into r. */
static void mix_stat(struct result *r, int rc, const struct stat *st) {
    if (rc != 0) {
        r->failures++;
        return;
    }
    mix(r, &st->st_size, sizeof st->st_size);
    mix(r, &st->st_ino, sizeof st->st_ino);
    mix(r, &st->st_mtim, sizeof st->st_mtim);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists DIR with getdents64: mixes every record, keeps the names sorted. */
static void list_dir(struct result *r, long round) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        r->failures++;
        return;
    }
    char buf[4096], *names[64];
    int count = 0;
    ssize_t n;
    while ((n = getdents64(fd, buf, sizeof buf)) > 0) {
        mix(r, buf, (size_t)n);
        for (ssize_t at = 0; at < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + at);
            if (round == 0 && count < 64 && d->d_name[0] != '.')
                names[count++] = strdup(d->d_name);
            at += d->d_reclen;
        }
    }
    if (n < 0)
        r->failures++;
    close(fd);
    qsort(names, (size_t)count, sizeof *names, by_name);
    for (int i = 0; i < count; i++) {
        strncat(r->names, " ", sizeof r->names - strlen(r->names) - 1);
        strncat(r->names, names[i], sizeof r->names - strlen(r->names) - 1);
        free(names[i]);
    }
}

/* Reads FILE with read, then 16 bytes at offset 3 with pread. */
static void read_file(struct result *r) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r->failures++;
        return;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0)
        r->failures++;
    else
        mix(r, buf, (size_t)n);
    n = pread(fd, buf, 16, 3);
    if (n < 0)
        r->failures++;
    else
        mix(r, buf, (size_t)n);
    struct stat st;
    mix_stat(r, fstat(fd, &st), &st);
    close(fd);
}

static void *worker(void *arg) {
    struct result *r = arg;
    r->hash = 0xcbf29ce484222325ULL;
    for (long i = 0; i < rounds; i++) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
            r->failures++;
        if (i == 0)
            r->first = ts;
        mix(r, &ts, sizeof ts);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        mix(r, &ts, sizeof ts);
        struct timeval tv;
        gettimeofday(&tv, NULL);
        mix(r, &tv, sizeof tv);
        time_t now = time(NULL);
        mix(r, &now, sizeof now);
        struct stat st;
        mix_stat(r, stat(file, &st), &st);
        mix_stat(r, lstat(file, &st), &st);
        mix_stat(r, fstatat(AT_FDCWD, file, &st, 0), &st);
        struct statx sx;
        if (statx(AT_FDCWD, file, 0, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0)
            r->failures++;
        else
            mix(r, &sx, sizeof sx);
        read_file(r);
        list_dir(r, i);
        unsigned char random[8];
        if (getrandom(random, sizeof random, 0) != sizeof random)
            r->failures++;
        if (i == 0)
            memcpy(r->random, random, sizeof random);
        mix(r, random, sizeof random);
        pid_t ids[2] = {gettid(), getpid()};
        mix(r, ids, sizeof ids);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE DIR [ROUNDS]\n", argv[0]);
        return 2;
    }
    file = argv[1];
    dir = argv[2];
    if (argc > 3)
        rounds = atol(argv[3]);
    static struct result r[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        printf("thread %d: hash %016llx first time %lld.%09ld random ", i, (unsigned long long)r[i].hash,
               (long long)r[i].first.tv_sec, r[i].first.tv_nsec);
        for (int k = 0; k < 8; k++)
            printf("%02x", r[i].random[k]);
        printf(" failures %ld\n", r[i].failures);
    }
    printf("entries:%s\n", r[0].names);
    return 0;
}
