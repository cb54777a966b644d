/* killself.c: three threads each send their own process SIGUSR2
 * (kill(getpid(), ...)) 20 times, printing a line after each; the
 * handler counts. The main thread waits in pthread_join. The
 * kernel gives a signal sent to a whole process to whichever thread can
 * take it: the main thread in its wait, or a sender at its kill's
 * return. Prints how many times the handler ran.
 * Usage: killself */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int caught;

static void on_signal(int signo) {
    (void)signo;
    atomic_fetch_add(&caught, 1);
}

static void *send_own(void *arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) {
        kill(getpid(), SIGUSR2);
        write(1, "sent\n", 5);
    }
    return NULL;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, send_own, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("caught %d\n", atomic_load(&caught));
    return 0;
}
