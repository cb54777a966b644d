/* getrandom.c: getrandom(buf, 16, 0) in main and in a worker thread; prints
 * both in hex. NOT deterministic across real runs (intended). */
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>

static unsigned char wbuf[16];
static ssize_t wn;

static void *worker(void *arg) {
    (void)arg;
    wn = getrandom(wbuf, sizeof wbuf, 0);
    return NULL;
}

static void hex(const char *who, const unsigned char *b, ssize_t n) {
    printf("%s n=%zd ", who, n);
    for (ssize_t i = 0; i < n; i++) printf("%02x", b[i]);
    printf("\n");
}

int main(void) {
    unsigned char mbuf[16];
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    ssize_t mn = getrandom(mbuf, sizeof mbuf, 0);
    pthread_join(t, NULL);
    hex("main", mbuf, mn);
    hex("worker", wbuf, wn);
    return 0;
}
