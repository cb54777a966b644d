/* lockorder.c: the order two threads take a lock decides the output, and
 * the log does not show it (seed 000 §2.1, Fig. 2). The doubler sleeps
 * first, so on a multi-core run the adder almost always updates x first:
 * (1 + 1) * 2 = 4, and sleeps longer after. The single-core initial replay
 * runs the doubler first (its sleep ends first in the log) and prints 3,
 * an unmatched write; coarse-grained exploration must find the preemption
 * at the doubler's lock that lets the adder go first. With an argument,
 * prints it first, in a write of its own before the threads start.
 * Usage: lockorder [GREETING] */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long x = 1;

static void *doubler(void *arg) {
    (void)arg;
    usleep(20000);
    pthread_mutex_lock(&m);
    x *= 2;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *adder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    x += 1;
    pthread_mutex_unlock(&m);
    usleep(50000);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        dprintf(1, "%s\n", argv[1]);
    pthread_t a, b;
    pthread_create(&a, NULL, doubler, NULL);
    pthread_create(&b, NULL, adder, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("x=%ld\n", x);
    return 0;
}
