/* vforkstack.c: a vfork child that writes to its parent's stack, as
 * dash's command children do. Three rounds: vfork; the child fills a
 * 256-byte array in a frame below the parent's, then execs /bin/true; the
 * parent waits for it in a frame whose slots it does not initialize,
 * with a SIGCHLD handler. A SIGCHLD that comes after the wait returned
 * hits the parent in user code, where a replay finds it again by its
 * registers and the stack the child wrote; the handler's count decides
 * whether the parent makes one more wait (a logged call). Prints "rounds
 * 3, SIGCHLD after the wait N". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_child(int signo) {
    (void)signo;
    got++;
}

__attribute__((noinline)) static void child(void) {
    volatile char deep[256];
    for (int i = 0; i < 256; i++)
        deep[i] = (char)(i + 1);
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
}

/* The parent returns from here to call wait_child, whose frame takes the
 * place of the child's. */
__attribute__((noinline)) static pid_t spawn(void) {
    pid_t pid = vfork();
    if (pid == 0)
        child();
    return pid;
}

__attribute__((noinline)) static int wait_child(void) {
    char slots[160];
    __asm__ volatile("" : : "r"(slots) : "memory");
    int status;
    got = 0;
    while (waitpid(-1, &status, 0) < 0) {
    }
    __asm__ volatile("" : : "r"(slots) : "memory");
    return got;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, NULL);
    int handled = 0;
    for (int i = 0; i < 3; i++) {
        spawn();
        if (wait_child()) {
            /* The handler ran after the wait: collect any other child. */
            int status;
            while (waitpid(-1, &status, WNOHANG) > 0) {
            }
            handled++;
        }
    }
    printf("rounds 3, SIGCHLD after the wait %d\n", handled);
    return 0;
}
