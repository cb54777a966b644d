/* racyflag.c: a data race that only fine-grained exploration replays
 * (seed 000 §4.3, the kind of Fig. 2): no synchronization lies between
 * the racing accesses. main sets x, computes, then reads y; the checker
 * thread, started first but slow, sets y only if it saw x set. On two
 * cores the checker reads x after main set it, so main prints "main saw
 * y". On one core, whole stretches between syscalls run one after the
 * other, and no order of them makes main see y: the checker must run
 * between main's store to x and its load of y, where main makes no call.
 * Busy loops stand for the work: no syscall, no lock, no event. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static volatile int x, y;

/* About `n` million iterations of work (tens of milliseconds). */
static void work(long n) {
    for (volatile long i = 0; i < n * 1000000; i++) {
    }
}

static void *checker(void *arg) {
    (void)arg;
    work(60);
    if (x == 1)
        y = 1;
    if (write(1, "checker done\n", 13) != 13)
        return NULL;
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, checker, NULL);
    work(20);
    x = 1;
    work(120);
    const char *m = y ? "main saw y\n" : "main missed y\n";
    if (write(1, m, strlen(m)) < 0)
        return 1;
    pthread_join(t, NULL);
    return 0;
}
