/* spin.c: livelock diagnostic. Thread A busy-waits on a volatile flag with no
 * syscalls; thread B does write(1, "b\n", 2) and then sets the flag. On a real
 * multicore run it finishes and prints "done". A replayer that never
 * schedules B while A spins will hang here. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile int flag;

static void *spinner(void *arg) {
    (void)arg;
    while (!flag)
        ;
    return NULL;
}

static void *setter(void *arg) {
    (void)arg;
    if (write(1, "b\n", 2) != 2) return NULL;
    flag = 1;
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, spinner, NULL);
    pthread_create(&b, NULL, setter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
