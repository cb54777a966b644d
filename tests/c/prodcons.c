/* prodcons.c: mutex + condvar bounded buffer (4 slots), 2 producers,
 * 2 consumers, 1000 items total. Prints the deterministic sum of items. */
#include <pthread.h>
#include <stdio.h>

#define SLOTS 4
#define TOTAL 1000
#define NPROD 2
#define NCONS 2

static int buf[SLOTS], head, tail, count;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static long long sums[NCONS];

static void *producer(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < TOTAL / NPROD; i++) {
        int item = (int)id * (TOTAL / NPROD) + i + 1; /* items 1..1000 */
        pthread_mutex_lock(&m);
        while (count == SLOTS) pthread_cond_wait(&not_full, &m);
        buf[tail] = item; tail = (tail + 1) % SLOTS; count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static void *consumer(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < TOTAL / NCONS; i++) {
        pthread_mutex_lock(&m);
        while (count == 0) pthread_cond_wait(&not_empty, &m);
        int item = buf[head]; head = (head + 1) % SLOTS; count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&m);
        sums[id] += item;
    }
    return NULL;
}

int main(void) {
    pthread_t p[NPROD], c[NCONS];
    for (long i = 0; i < NCONS; i++) pthread_create(&c[i], NULL, consumer, (void *)i);
    for (long i = 0; i < NPROD; i++) pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < NPROD; i++) pthread_join(p[i], NULL);
    for (int i = 0; i < NCONS; i++) pthread_join(c[i], NULL);
    printf("sum=%lld\n", sums[0] + sums[1]);
    return 0;
}
