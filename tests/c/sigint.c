/* ^C while recording: the terminal sends SIGINT to the foreground process
 * group, weft included. The program's handler makes its blocking read of
 * stdin fail with EINTR; it stops its worker and exits normally. Only the
 * main thread takes SIGINT (the worker blocks it). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stop;

static void on_int(int sig) { got = sig; }

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    while (!stop)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void) {
    struct sigaction sa = {.sa_handler = on_int};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char c;
    ssize_t n = read(0, &c, 1);
    printf("read: %zd (%s), SIGINT taken: %s\n", n, n < 0 ? strerror(errno) : "a byte", got == SIGINT ? "yes" : "no");
    pthread_mutex_lock(&m);
    stop = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    return 0;
}
