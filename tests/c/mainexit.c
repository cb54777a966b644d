/* mainexit.c: main starts 2 workers then calls pthread_exit(NULL) while they
 * run. Each worker does 200 mutex-protected increments and a write(1, ...)
 * of "w<id> <i>\n" every 50 iterations (interleaving between workers may
 * vary). The process exits 0 once the last worker finishes. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *worker(void *arg) {
    long id = (long)arg;
    char line[32];
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
        if (i % 50 == 0) {
            int len = snprintf(line, sizeof line, "w%ld %d\n", id, i);
            if (write(1, line, len) != len) return NULL;
        }
    }
    return NULL;
}

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_exit(NULL);
}
