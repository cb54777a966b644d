/* maskwait.c: SIGALRM is blocked except while the program waits in pselect
 * or ppoll with a mask that lets it through (as GNU make waits for
 * SIGCHLD); a timer interrupts each wait. Prints each wait's result and
 * whether SIGALRM is still blocked after it, which the kernel restores
 * after the handler: a replay that unblocked it for the delivery printed
 * "blocked 0". */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/select.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

static int blocked(void) {
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    return sigismember(&now, SIGALRM);
}

int main(void) {
    int p[2];
    if (pipe(p) != 0)
        return 1;
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sigset_t block, open;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    sigprocmask(SIG_BLOCK, &block, &open);
    sigdelset(&open, SIGALRM);
    struct itimerval tick = {{0, 5000}, {0, 5000}};
    setitimer(ITIMER_REAL, &tick, NULL);
    for (int k = 0; k < 3; k++) {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(p[0], &r);
        int n = pselect(p[0] + 1, &r, NULL, NULL, NULL, &open);
        printf("pselect %d errno %d blocked %d\n", n, n < 0 ? errno : 0, blocked());
        struct pollfd fd = {p[0], POLLIN, 0};
        n = ppoll(&fd, 1, NULL, &open);
        printf("ppoll %d errno %d blocked %d\n", n, n < 0 ? errno : 0, blocked());
    }
    printf("alarms %d\n", (int)alarms);
    return 0;
}
