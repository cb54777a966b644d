/* killread.c: two threads block in reads of empty pipes; main wakes them
 * with pthread_kill, 5 times each: SIGUSR1's handler has SA_RESTART (the
 * read goes on), SIGUSR2's has not (the read fails with EINTR and the
 * thread reads again). Then main writes a byte to each pipe and closes
 * them. Prints each thread's EINTR count and bytes read, and the handlers'
 * counts: a replay that delivered a signal before the read (where the
 * receiver stood when the kill was sent) printed other counts. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int handled[2];
static int pipes[2][2];

static void on_usr1(int sig) { (void)sig; handled[0]++; }
static void on_usr2(int sig) { (void)sig; handled[1]++; }

static void *reader(void *arg) {
    int *fds = arg;
    long eintr = 0, got = 0;
    char c;
    for (;;) {
        ssize_t n = read(fds[0], &c, 1);
        if (n < 0 && errno == EINTR) {
            eintr++;
            continue;
        }
        if (n <= 0)
            break;
        got++;
    }
    return (void *)(eintr * 1000 + got);
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sa.sa_flags = 0;
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t[2];
    for (int k = 0; k < 2; k++) {
        if (pipe(pipes[k]) != 0)
            return 1;
        pthread_create(&t[k], NULL, reader, pipes[k]);
    }
    for (int i = 0; i < 5; i++) {
        usleep(3000);
        pthread_kill(t[0], SIGUSR1);
        pthread_kill(t[1], SIGUSR2);
    }
    usleep(3000);
    for (int k = 0; k < 2; k++) {
        if (write(pipes[k][1], "x", 1) != 1)
            return 1;
        close(pipes[k][1]);
    }
    for (int k = 0; k < 2; k++) {
        void *r;
        pthread_join(t[k], &r);
        printf("%s: eintr=%ld got=%ld\n", k ? "no SA_RESTART" : "SA_RESTART", (long)r / 1000, (long)r % 1000);
    }
    printf("handlers %d %d\n", handled[0], handled[1]);
    return 0;
}
