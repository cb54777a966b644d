/* time.c: time(NULL), clock_gettime(CLOCK_MONOTONIC/CLOCK_REALTIME) and
 * gettimeofday in main and in a worker thread. Output is NOT deterministic
 * across real runs (intended): a replay must reproduce it exactly. */
#include <pthread.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

struct sample {
    time_t t;
    struct timespec mono, real;
    struct timeval tod;
};

static void take(struct sample *s) {
    s->t = time(NULL);
    clock_gettime(CLOCK_MONOTONIC, &s->mono);
    clock_gettime(CLOCK_REALTIME, &s->real);
    gettimeofday(&s->tod, NULL);
}

static void show(const char *who, const struct sample *s) {
    printf("%s time=%lld mono=%lld.%09ld real=%lld.%09ld tod=%lld.%06ld\n", who,
           (long long)s->t, (long long)s->mono.tv_sec, s->mono.tv_nsec,
           (long long)s->real.tv_sec, s->real.tv_nsec,
           (long long)s->tod.tv_sec, (long)s->tod.tv_usec);
}

static struct sample ws;

static void *worker(void *arg) {
    (void)arg;
    take(&ws);
    return NULL;
}

int main(void) {
    struct sample ms;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    take(&ms);
    pthread_join(t, NULL);
    show("main", &ms);
    show("worker", &ws);
    return 0;
}
