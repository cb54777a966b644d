/* readthreads.c: threads share one stdio stream. Usage: readthreads MODE
 * - fgets, getline, fread, scanf: 3 threads read stdin (numbers, one a
 *   line) with that call until its end; which lines each thread gets
 *   depends only on the order in which they took the stream's lock, with
 *   no logged call in between while the lines come from its buffer. Each
 *   prints its count and sum.
 * - lockfile: 3 threads write records of three calls each to stdout
 *   under flockfile (one in three after a spin on ftrylockfile), with the
 *   _unlocked calls inside: the records' order in the stream's buffer is
 *   the order the threads took its lock.
 * Built with -D_FORTIFY_SOURCE=2 too, where fgets and fread are their
 * _chk forms. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *mode;

/* Reads the next number from stdin with the call MODE names, into *value;
 * 0 at the end of the input. */
static int next_number(long *value) {
    char buf[64];
    if (!strcmp(mode, "fgets")) {
        if (!fgets(buf, sizeof buf, stdin))
            return 0;
        *value = atol(buf);
    } else if (!strcmp(mode, "getline")) {
        static __thread char *line;
        static __thread size_t size;
        if (getline(&line, &size, stdin) < 0)
            return 0;
        *value = atol(line);
    } else if (!strcmp(mode, "fread")) {
        /* Fixed-width records: the input's lines are padded to 8 bytes. */
        if (fread(buf, 8, 1, stdin) != 1)
            return 0;
        buf[8] = 0;
        *value = atol(buf);
    } else {
        if (scanf("%ld", value) != 1)
            return 0;
    }
    return 1;
}

static void *reader(void *arg) {
    long id = (long)arg, n = 0, sum = 0, value;
    while (next_number(&value)) {
        n++;
        sum += value;
    }
    printf("reader %ld: %ld numbers, sum %ld\n", id, n, sum);
    return NULL;
}

static void *writer(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 300; i++) {
        if (i % 3 == 0) {
            while (ftrylockfile(stdout))
                ;
        } else {
            flockfile(stdout);
        }
        fputs("writer ", stdout);
        putc_unlocked('0' + (int)id, stdout);
        printf(" record %d\n", i);
        funlockfile(stdout);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: readthreads fgets|getline|fread|scanf|lockfile\n");
        return 2;
    }
    mode = argv[1];
    void *(*work)(void *) = strcmp(mode, "lockfile") ? reader : writer;
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    return 0;
}
