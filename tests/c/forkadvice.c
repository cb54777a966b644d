/* forkadvice.c: two threads count under a mutex into a private anonymous
 * page that madvise keeps out of forks, as V8 does with its heap
 * (MADV_DONTFORK, argument "dontfork") or as fork-safe random generators
 * do with their state (MADV_WIPEONFORK, "wipeonfork"). A replay's
 * checkpoints are forks: resumed from one, the replay must count on as
 * the recording did. At the end a forked child reports what it sees of
 * a wipe-on-fork page (zeros, as the recording saw). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long *page;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        (*page)++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int wipe = argc > 1 && strcmp(argv[1], "wipeonfork") == 0;
    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || madvise(page, 4096, wipe ? MADV_WIPEONFORK : MADV_DONTFORK) != 0)
        return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("total=%ld\n", *page);
    fflush(stdout);
    if (wipe) {
        pid_t child = fork();
        if (child == 0) {
            printf("child sees %ld\n", *page);
            fflush(stdout);
            _exit(0);
        }
        waitpid(child, NULL, 0);
    }
    return 0;
}
