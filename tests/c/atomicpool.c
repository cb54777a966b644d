/* atomicpool.c: a pool without a queue. THREADS threads take the next
 * item's index by an atomic fetch_add on a shared counter, work on it
 * (unequal amounts), and print which thread did which item. Which thread
 * takes which item is decided by the counter alone, which no logged call
 * orders: on several cores a thread takes its next item as soon as it
 * has printed its last one.
 * Usage: atomicpool [ITEMS] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 3

static atomic_int next_item;
static int items = 40;

static long work(int item) {
    long sum = 0;
    long rounds = 200000 + (item * 7919L) % 100000;
    for (long k = 0; k < rounds; k++) {
        sum += k ^ item;
    }
    return sum;
}

static void *worker(void *arg) {
    long id = (long)arg;
    int item;
    while ((item = atomic_fetch_add(&next_item, 1)) < items) {
        char line[64];
        int n = snprintf(line, sizeof line, "thread %ld item %d %ld\n", id, item, work(item) % 1000);
        if (write(1, line, (size_t)n) != n) {
            return NULL;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        items = atoi(argv[1]);
    }
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) {
        pthread_create(&t[i], NULL, worker, (void *)i);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    return 0;
}
