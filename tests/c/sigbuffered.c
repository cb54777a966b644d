/* sigbuffered.c: SIGALRM every 1 ms (setitimer ITIMER_REAL) arriving while
 * a thread loops on buffered calls: stat, clock_gettime, and lseek + read
 * of a regular file. Phase "restart" handles SIGALRM with SA_RESTART,
 * phase "norestart" with another handler without it; each phase runs until
 * its handler has run SIGNALS times (default 20), then the norestart phase
 * ends in a read of an empty pipe that the next signal interrupts (EINTR).
 * The main thread blocks SIGALRM, so every signal hits the looping thread.
 * Prints, per phase, the handler runs, the rounds of calls made (which
 * differ from run to run) and the calls that failed with EINTR.
 * Usage: sigbuffered [FILE [SIGNALS]] (default: the program, 20) */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *file;
static long signals = 20;
static volatile sig_atomic_t restart_runs, norestart_runs;

static void on_restart(int sig) {
    (void)sig;
    restart_runs++;
}

static void on_norestart(int sig) {
    (void)sig;
    norestart_runs++;
}

struct phase {
    const char *name;
    long rounds, eintr;
};

/* Counts a failed call; only EINTR is expected. */
static void failed(struct phase *p, const char *call) {
    if (errno == EINTR)
        p->eintr++;
    else
        fprintf(stderr, "%s: %s\n", call, strerror(errno));
}

/* Buffered calls until *runs reaches `signals`. */
static void loop(struct phase *p, volatile sig_atomic_t *runs, int fd) {
    char buf[256];
    while (*runs < signals) {
        struct stat st;
        if (stat(file, &st) != 0)
            failed(p, "stat");
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
            failed(p, "clock_gettime");
        if (lseek(fd, 0, SEEK_SET) != 0 || read(fd, buf, sizeof buf) < 0)
            failed(p, "read");
        p->rounds++;
    }
}

static void handle(int sig, void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

static struct phase phases[2] = {{"restart", 0, 0}, {"norestart", 0, 0}};

static sigset_t alrm;

static void *worker(void *arg) {
    (void)arg;
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    int fd = open(file, O_RDONLY | O_CLOEXEC), pipefd[2];
    if (fd < 0 || pipe(pipefd) != 0) {
        perror("open");
        exit(1);
    }
    handle(SIGALRM, on_restart, SA_RESTART);
    struct itimerval every_ms = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every_ms, NULL);
    loop(&phases[0], &restart_runs, fd);
    handle(SIGALRM, on_norestart, 0);
    loop(&phases[1], &norestart_runs, fd);
    char c;
    if (read(pipefd[0], &c, 1) < 0)
        failed(&phases[1], "read of the pipe");
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    file = argc > 1 ? argv[1] : argv[0];
    if (argc > 2)
        signals = atol(argv[2]);
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("restart: %ld runs, %ld rounds, %ld EINTR\n", (long)restart_runs, phases[0].rounds, phases[0].eintr);
    printf("norestart: %ld runs, %ld rounds, %ld EINTR\n", (long)norestart_runs, phases[1].rounds, phases[1].eintr);
    return 0;
}
