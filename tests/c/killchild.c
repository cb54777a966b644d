/* killchild.c: 20 times, forks a child that tells the parent it runs (a
 * byte on a pipe), then calls getppid for ever, and sends it SIGKILL.
 * kill(2) returns before the child is dead, so a recording often logs
 * calls of the child after the parent's kill (GNU parallel and shells
 * kill children that are still starting up). Prints each child's end. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    for (int i = 0; i < 20; i++) {
        int fds[2];
        if (pipe(fds) != 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            if (write(fds[1], "x", 1) != 1)
                _exit(2);
            for (;;)
                getppid();
        }
        close(fds[1]);
        char c;
        if (read(fds[0], &c, 1) != 1)
            return 1;
        close(fds[0]);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        printf("child %d: %s %d\n", i, WIFSIGNALED(status) ? "killed by signal" : "exited", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    return 0;
}
