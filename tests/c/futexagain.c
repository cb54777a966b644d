/* A timed futex wait that finds the word already changed: the recording
 * logs EAGAIN. The waiter checks the word only after its first wait, as
 * glibc's condition variables do, so a replay that returned EAGAIN before
 * the other thread's store would see no change and wait again. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int word;
static int fds[2], done[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long futex(int *uaddr, int op, int val, const struct timespec *deadline) {
    return syscall(SYS_futex, uaddr, op, val, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void *changer(void *arg) {
    char c;
    (void)arg;
    if (write(fds[1], "x", 1) != 1)
        return NULL;
    /* A synchronization point between the logged write and the store. */
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL);
    /* Stay alive, with no logged event, until the waiter is past its
     * wait: in log order, the store comes after the wait. */
    ssize_t n = read(done[0], &c, 1);
    (void)n;
    return NULL;
}

int main(void) {
    pthread_t t;
    char c;
    if (pipe(fds) != 0 || pipe(done) != 0 || pthread_create(&t, NULL, changer, NULL) != 0)
        return 1;
    if (read(fds[0], &c, 1) != 1)
        return 1;
    usleep(200000); /* the changer stores meanwhile */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 10;
    long r = futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 0, &deadline);
    int saw_change = r == -1 && errno == EAGAIN;
    int waits = 1;
    while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0) {
        futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 0, &deadline);
        waits++;
    }
    if (write(done[1], "y", 1) != 1)
        return 1;
    pthread_join(t, NULL);
    printf("first wait: %s; waits: %d\n", saw_change ? "word already changed" : "woken", waits);
    return 0;
}
