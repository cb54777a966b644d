/* timedwait.c: pthread_cond_timedwait with a CLOCK_REALTIME deadline 30 ms
 * ahead that nobody signals (expects ETIMEDOUT) while a worker computes a
 * value. Main joins the worker after the timedwait and prints both results
 * in a fixed order, so output is deterministic. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned long worker_result;

static void *worker(void *arg) {
    (void)arg;
    unsigned long x = 1;
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    worker_result = x;
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 30 * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    int rc;
    pthread_mutex_lock(&m);
    do rc = pthread_cond_timedwait(&cv, &m, &dl); while (rc == 0); /* spurious wakeup */
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("timedout=%d\n", rc == ETIMEDOUT);
    printf("worker %s\n", worker_result ? "done" : "failed");
    return 0;
}
