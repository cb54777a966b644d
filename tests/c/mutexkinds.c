/* mutexkinds.c: mutexes the in-process runtime must order as it orders
 * plain pthread ones (weft issue 12: "pthread mutexes (all types)").
 * argv[1] picks one:
 *   robust    a thread takes a robust mutex and exits holding it; two more
 *             threads then lock it, the first getting EOWNERDEAD (it makes
 *             the mutex consistent), the second 0
 *   adaptive  4 threads append their id to a log 5,000 times each under a
 *             PTHREAD_MUTEX_ADAPTIVE_NP mutex (its contended lock spins,
 *             reading the TSC)
 *   c11       C11 threads (<threads.h>): 3 producers hand 2,000 items each
 *             to a consumer through mtx_t and cnd_t, after a call_once
 *             (which thread runs it is a race weft does not order, README's
 *             known limits: it is not printed) (glibc's mtx_lock and the
 *             rest call its pthread functions past the interposed symbols)
 * Prints what depends on the order: the robust results, a hash of the
 * adaptive log, or the consumer's hash of the producers' order. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

static pthread_mutex_t robust_mutex;

static void *die_holding(void *arg) {
    pthread_mutex_lock(&robust_mutex);
    return arg;
}

static void *lock_robust(void *arg) {
    int r = pthread_mutex_lock(&robust_mutex);
    if (r == EOWNERDEAD)
        r = pthread_mutex_consistent(&robust_mutex) == 0 ? EOWNERDEAD : -1;
    printf("lock: %s\n", r == EOWNERDEAD ? "owner died" : r == 0 ? "taken" : "failed");
    pthread_mutex_unlock(&robust_mutex);
    return arg;
}

static void robust(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust_mutex, &attr);
    void *(*steps[3])(void *) = {die_holding, lock_robust, lock_robust};
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        pthread_create(&t, NULL, steps[i], NULL);
        pthread_join(t, NULL);
    }
}

static pthread_mutex_t adaptive_mutex = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static int order[20000], n;

static void *append(void *arg) {
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&adaptive_mutex);
        order[n++] = (int)(long)arg;
        for (volatile int k = 0; k < 100; k++)
            ;
        pthread_mutex_unlock(&adaptive_mutex);
    }
    return NULL;
}

static void adaptive(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, append, (void *)i);
    unsigned long h = 0;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++)
        h = h * 3 + (unsigned long)order[i];
    printf("adaptive: %d appends, order hash %lx\n", n, h);
}

#define ITEMS 2000
static mtx_t queue_lock;
static cnd_t queue_changed;
static once_flag queue_once = ONCE_FLAG_INIT;
static int queue[16], head, count, initialized;

static void init_queue(void) {
    initialized = 1;
}

static int produce(void *arg) {
    int me = (int)(long)arg;
    call_once(&queue_once, init_queue);
    for (int i = 0; i < ITEMS; i++) {
        mtx_lock(&queue_lock);
        while (count == 16)
            cnd_wait(&queue_changed, &queue_lock);
        queue[(head + count++) % 16] = me;
        cnd_broadcast(&queue_changed);
        mtx_unlock(&queue_lock);
    }
    return 0;
}

static void c11(void) {
    mtx_init(&queue_lock, mtx_plain);
    cnd_init(&queue_changed);
    thrd_t t[3];
    for (long i = 0; i < 3; i++)
        thrd_create(&t[i], produce, (void *)i);
    unsigned long h = 0;
    for (int taken = 0; taken < 3 * ITEMS; taken++) {
        mtx_lock(&queue_lock);
        while (count == 0)
            cnd_wait(&queue_changed, &queue_lock);
        h = h * 3 + (unsigned long)queue[head];
        head = (head + 1) % 16;
        count--;
        cnd_broadcast(&queue_changed);
        mtx_unlock(&queue_lock);
    }
    for (int i = 0; i < 3; i++)
        thrd_join(t[i], NULL);
    printf("c11: initialized %d, order hash %lx\n", initialized, h);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    if (!strcmp(argv[1], "robust"))
        robust();
    else if (!strcmp(argv[1], "adaptive"))
        adaptive();
    else if (!strcmp(argv[1], "c11"))
        c11();
    else
        return 2;
    return 0;
}
