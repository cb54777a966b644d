/* Prints the signal dispositions and mask the program started with: a
 * program run under weft must find them as a shell leaves them (SIG_DFL,
 * nothing blocked), whatever weft's own process ignores. */
#include <signal.h>
#include <stdio.h>

static const char *disposition(int sig) {
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa.sa_handler == SIG_DFL ? "default" : sa.sa_handler == SIG_IGN ? "ignored" : "handled";
}

int main(void) {
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    int blocked = 0;
    for (int sig = 1; sig < NSIG; sig++)
        blocked += sigismember(&mask, sig) == 1;
    printf("SIGINT %s, SIGPIPE %s, SIGTERM %s, %d blocked\n", disposition(SIGINT), disposition(SIGPIPE),
           disposition(SIGTERM), blocked);
    return 0;
}
