/* twosignals.c: two signals that reach a sleeping child together, as
 * `kill(p, SIGTERM); kill(p, SIGCONT)` from timeout(1) do. The child
 * sleeps 2 s in nanosleep; the parent, 0.2 s in, sends it SIGUSR1 then
 * SIGUSR2 back to back. Both are pending when the child leaves the
 * kernel: with handlers (argument "handled"), the second arrives at the
 * first one's handler entry, and the child counts 2 before it prints; with
 * both ignored ("ignored"), both interrupt the one sleep, which goes on.
 * Prints what the child saw and how it ended. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t caught;

static void on_signal(int signo) {
    (void)signo;
    caught++;
}

int main(int argc, char **argv) {
    int handled = argc > 1 && strcmp(argv[1], "handled") == 0;
    signal(SIGUSR1, handled ? on_signal : SIG_IGN);
    signal(SIGUSR2, handled ? on_signal : SIG_IGN);
    pid_t child = fork();
    if (child == 0) {
        struct timespec nap = {handled ? 2 : 0, handled ? 0 : 500000000}, left;
        int r = nanosleep(&nap, &left);
        printf("child: nanosleep %d, caught %d\n", r, (int)caught);
        return 0;
    }
    usleep(200000);
    kill(child, SIGUSR1);
    kill(child, SIGUSR2);
    int status;
    waitpid(child, &status, 0);
    printf("parent: child exited %d\n", WEXITSTATUS(status));
    return 0;
}
