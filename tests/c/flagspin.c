/* flagspin.c: a thread spins calling sched_yield() until a word of a
 * shared file mapping (argv[1], holding 0) becomes 1, which another
 * process writes; then it writes 0 back and prints "seen". The replay
 * maps the file as it was when the recording mapped it, so nobody sets
 * the word there: the spinner can never get on, and the replay must end
 * with a livelock diagnosis, not hang. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile int *word;

static void *spinner(void *arg) {
    (void)arg;
    while (*word != 1)
        sched_yield();
    *word = 0;
    printf("seen\n");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDWR);
    word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || word == MAP_FAILED) return 1;
    pthread_t a;
    pthread_create(&a, NULL, spinner, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    pthread_join(a, NULL);
    return 0;
}
