/* pipe.c: a writer thread write()s 100 "msg <i>\n" messages into a pipe and
 * closes it; a reader thread reads until EOF. Main prints total bytes. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static int fds[2];
static long long nread;

static void *writer(void *arg) {
    (void)arg;
    char msg[32];
    for (int i = 0; i < 100; i++) {
        int len = snprintf(msg, sizeof msg, "msg %d\n", i);
        if (write(fds[1], msg, len) != len) perror("write");
    }
    close(fds[1]);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    char buf[256];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) nread += n;
    close(fds[0]);
    return NULL;
}

int main(void) {
    if (pipe(fds) != 0) { perror("pipe"); return 1; }
    pthread_t w, r;
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("bytes=%lld\n", nread);
    return 0;
}
