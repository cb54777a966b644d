/* A racy publication: main takes a lock (a logged event), sets a flag
 * with a plain store right after it, then computes for long before its
 * next event. The worker computes for a shorter while, reads the flag
 * without the lock, and prints what it saw. On two cores the worker sees
 * the flag set; a replay on one core that runs main's code after the lock
 * only when main's next event is due shows the worker a clear flag.
 * Usage: racy_publish [WORK] (WORK: the worker's rounds; main's are 4x). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int flag; /* written and read without a common lock */
static long rounds = 30000000;

/* CPU work with no syscall: the replay cannot stop it at a point. */
static unsigned long compute(long n) {
    volatile unsigned long x = 1;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static void *worker(void *arg) {
    (void)arg;
    compute(rounds);
    int seen = flag;
    printf("worker saw the flag %s\n", seen ? "set" : "clear");
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&lock);
    flag = 1;
    compute(4 * rounds);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    puts("main done");
    return 0;
}
