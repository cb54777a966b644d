/* sharedmap.c [file] [fork]: two threads count into a MAP_SHARED page
 * under a mutex: an anonymous page, or with "file" one of a temporary
 * file (as the JVM's perf data file). With "fork", a child forked after
 * the count adds 1000 through the same page, which the parent then
 * reads. Prints the total. A fork shares such a page instead of copying
 * it: the replay keeps the page shared, and takes no checkpoint of the
 * process, only when a fork is to come. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long *shared;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        (*shared)++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static int has(int argc, char **argv, const char *word) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], word) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int fd = -1, flags = MAP_SHARED | MAP_ANONYMOUS;
    if (has(argc, argv, "file")) {
        FILE *f = tmpfile();
        if (!f || ftruncate(fileno(f), 4096) != 0) return 1;
        fd = fileno(f);
        flags = MAP_SHARED;
    }
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (shared == MAP_FAILED) return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    if (has(argc, argv, "fork")) {
        pid_t child = fork();
        if (child == 0) {
            *shared += 1000;
            _exit(0);
        }
        waitpid(child, NULL, 0);
    }
    printf("total=%ld\n", *shared);
    return 0;
}
