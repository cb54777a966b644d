/* A signal the program sends to a thread that blocks it stays pending
 * while the thread passes a few synchronization points, and is delivered
 * when the thread unblocks it. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter, ready[2], sent[2];

static void on_usr1(int sig) { got = sig; }

static void *worker(void *arg) {
    (void)arg;
    char c;
    if (write(ready[1], "r", 1) != 1 || read(sent[0], &c, 1) != 1)
        return NULL;
    for (int i = 0; i < 5; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    int before = got;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    printf("handled before unblocking: %s, after: %s\n", before ? "yes" : "no", got ? "yes" : "no");
    return NULL;
}

int main(void) {
    struct sigaction sa = {.sa_handler = on_usr1};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (pipe(ready) != 0 || pipe(sent) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 1;
    pthread_kill(t, SIGUSR1);
    if (write(sent[1], "s", 1) != 1)
        return 1;
    pthread_join(t, NULL);
    return 0;
}
