/* Writes through duplicates of stdout and stderr (dup, dup2, fcntl
 * F_DUPFD, from another thread, from a forked child), then closes stdout and reopens it onto
 * /dev/null: a replay must show the same output as the recorded run. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(int fd, const char *s) { write(fd, s, strlen(s)); }

static void *worker(void *arg) {
    say(*(int *)arg, "four (a thread, through F_DUPFD_CLOEXEC)\n");
    return NULL;
}

int main(void) {
    say(1, "one\n");
    int a = dup(1);
    say(a, "two (dup)\n");
    dup2(1, 7);
    say(7, "three (dup2)\n");
    int b = fcntl(1, F_DUPFD_CLOEXEC, 10);
    pthread_t t;
    pthread_create(&t, NULL, worker, &b);
    pthread_join(t, NULL);
    if (fork() == 0) {
        say(a, "from a child (the dup it inherited)\n");
        _exit(0);
    }
    wait(NULL);
    int e = dup(2);
    say(e, "to stderr (dup of 2)\n");
    close(1);
    int null = open("/dev/null", O_WRONLY);
    say(null, "hidden: stdout is /dev/null now\n");
    dup2(null, 7);
    say(7, "hidden too\n");
    say(a, "five (the dup still is stdout)\n");
    return null == 1 ? 0 : 3;
}
