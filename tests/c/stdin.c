/* stdin.c: a worker thread reads all of stdin with read(0, ...);
 * main joins and prints the newline and byte counts. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static long long lines, bytes;

static void *reader(void *arg) {
    (void)arg;
    char buf[4096];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0) {
        bytes += n;
        for (ssize_t i = 0; i < n; i++) if (buf[i] == '\n') lines++;
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    pthread_join(t, NULL);
    printf("lines=%lld bytes=%lld\n", lines, bytes);
    return 0;
}
