/* A process tree: fork + wait + exit status, a pipe between parent and
 * child, fork then exec of /bin/true and of a program that prints, vfork +
 * exec, a grandchild, a threaded child, a child killed by a signal, a
 * process that execs itself, and SIGCHLD with a handler. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t chld;
static void on_chld(int s) { (void)s; chld++; }
static void *worker(void *a) { printf("thread %ld in a child\n", (long)a); return 0; }

static int status_of(pid_t p) {
    int status;
    if (waitpid(p, &status, 0) != p) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "again") == 0) { printf("exec'd myself\n"); return 7; }
    struct sigaction sa = {0};
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, 0);

    int fds[2];
    pipe(fds);
    pid_t p = fork();
    if (p == 0) { close(fds[0]); write(fds[1], "through the pipe", 16); _exit(3); }
    close(fds[1]);
    char buf[32] = {0};
    read(fds[0], buf, sizeof buf - 1);
    printf("parent read '%s', child exit %d\n", buf, status_of(p));

    p = fork();
    if (p == 0) { execl("/bin/true", "true", (char *)0); _exit(127); }
    printf("true: %d\n", status_of(p));
    p = vfork();
    if (p == 0) { execl("/bin/echo", "echo", "hello from echo", (char *)0); _exit(127); }
    printf("echo: %d\n", status_of(p));
    p = fork();
    if (p == 0) {
        pid_t g = fork();
        if (g == 0) { printf("grandchild\n"); exit(5); }
        printf("grandchild exit %d\n", status_of(g));
        pthread_t t;
        pthread_create(&t, 0, worker, (void *)1L);
        pthread_join(t, 0);
        exit(4);
    }
    printf("child: %d\n", status_of(p));
    p = fork();
    if (p == 0) { pause(); _exit(0); }
    kill(p, SIGTERM);
    printf("killed: %d\n", status_of(p));
    p = fork();
    if (p == 0) { execl("/proc/self/exe", argv[0], "again", (char *)0); _exit(127); }
    printf("self: %d\n", status_of(p));
    printf("SIGCHLD handled: %s\n", chld > 0 ? "yes" : "no");
    return 0;
}
