/* exitlive.c: main returns (exit_group) while two threads loop on a mutex
 * and a condition variable: they go on logging until the exit_group takes
 * effect, after it in the global order. Prints nothing. */
#include <pthread.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile int x;

static void *spin(void *arg) {
    for (;;) {
        pthread_mutex_lock(&m);
        x++;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
    }
    return arg;
}

int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, spin, NULL);
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&m);
        x++;
        pthread_mutex_unlock(&m);
    }
    return 0;
}
