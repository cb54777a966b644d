/* A thread with an alternate signal stack (Rust's runtime gives every
 * thread one) takes a signal on it after another thread's synchronization
 * points, where a replay may take checkpoints: a replay resumed from one
 * must still give it the alternate stack. The worker has the stack and
 * waits in a read while the main thread locks and unlocks (the last
 * synchronization points), then takes the signal and ends the program;
 * the main thread is then in a read that never returns. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ALT_SIZE (64 * 1024)

static char *alt;
static volatile int on_alt;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;
static int ready[2], go[2], never[2];

static void on_usr1(int sig) {
    char here;
    (void)sig;
    on_alt = &here >= alt && &here < alt + ALT_SIZE;
}

static void *worker(void *arg) {
    (void)arg;
    alt = malloc(ALT_SIZE);
    stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE};
    char c;
    if (sigaltstack(&ss, NULL) != 0 || write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
        exit(1);
    pthread_kill(pthread_self(), SIGUSR1);
    printf("counter=%d, handler on the alternate stack: %s\n", counter, on_alt ? "yes" : "no");
    fflush(stdout);
    _exit(0); /* exit() would lock in ld.so: synchronization points */
}

int main(void) {
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(never) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 1;
    for (int i = 0; i < 20; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    if (write(go[1], "g", 1) != 1)
        return 1;
    return read(never[0], &c, 1);
}
