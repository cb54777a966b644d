/* shmfork.c: a process-shared semaphore and counter in a file mapped
 * MAP_SHARED (shm_open, as POSIX named semaphores are), inherited by two
 * fork children that each add to the counter 1000 times under the
 * semaphore, reading its value with sem_getvalue (which makes no call);
 * the parent waits for them and prints what the children wrote through
 * the shared pages. */
#include <fcntl.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    sem_t lock;
    long counter;
    long seen_taken;
};

int main(void) {
    char name[64];
    snprintf(name, sizeof name, "/weft-shmfork-%d", (int)getpid());
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct shared)) != 0)
        return 1;
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    shm_unlink(name);
    close(fd);
    if (s == MAP_FAILED)
        return 1;
    sem_init(&s->lock, 1, 1);
    for (int k = 0; k < 2; k++) {
        if (fork() == 0) {
            for (int i = 0; i < 1000; i++) {
                sem_wait(&s->lock);
                int v;
                sem_getvalue(&s->lock, &v);
                s->seen_taken += v == 0;
                s->counter++;
                sem_post(&s->lock);
            }
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {
    }
    int v;
    sem_getvalue(&s->lock, &v);
    printf("counter %ld seen taken %ld value %d\n", s->counter, s->seen_taken, v);
    return 0;
}
