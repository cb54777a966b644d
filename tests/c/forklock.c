/* Forks while another thread holds a mutex (the child gets the lock taken
 * and must not touch it), and a child killed while blocked in a read. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int held[2], release[2];

static void *holder(void *a) {
    (void)a;
    pthread_mutex_lock(&lock);
    write(held[1], "h", 1);
    char c;
    read(release[0], &c, 1);
    pthread_mutex_unlock(&lock);
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    pipe(held);
    pipe(release);
    pthread_t t;
    pthread_create(&t, 0, holder, 0);
    char c;
    read(held[0], &c, 1);
    pid_t p = fork();
    if (p == 0) { printf("child: lock held by the parent's thread: %s\n", pthread_mutex_trylock(&lock) ? "yes" : "no"); _exit(0); }
    waitpid(p, 0, 0);
    write(release[1], "r", 1);
    pthread_join(t, 0);
    int blocked[2];
    pipe(blocked);
    p = fork();
    if (p == 0) { read(blocked[0], &c, 1); _exit(1); }
    usleep(10000);
    kill(p, SIGKILL);
    int status;
    waitpid(p, &status, 0);
    printf("blocked child killed by signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 0;
}
