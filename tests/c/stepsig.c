/* Signals that arrive while a thread passes pthread breakpoints: a worker
 * locks and unlocks a mutex in a loop while the main thread sends it
 * SIGUSR1 with pthread_kill, one at a time: the handler answers through a
 * pipe, which main reads before the next. The replay steps the worker
 * over its breakpoints while a signal is pending. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t done;
static int answer[2];
static long counter;

static void on_usr1(int sig) { (void)sig; write(answer[1], "x", 1); }

static void lock_unlock(void) {
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    (void)arg;
    while (!done)
        lock_unlock();
    return NULL;
}

int main(void) {
    signal(SIGUSR1, on_usr1);
    pipe(answer);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    int answers = 0;
    for (int k = 0; k < 50; k++) {
        pthread_kill(t, SIGUSR1);
        lock_unlock();
        char c;
        answers += read(answer[0], &c, 1);
    }
    done = 1;
    pthread_join(t, NULL);
    printf("worker answered %d signals\n", answers);
    return 0;
}
