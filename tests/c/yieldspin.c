/* yieldspin.c: a thread spins calling sched_yield() until another thread
 * sets a flag, as the barriers of some parallel benchmark suites do. The
 * setter first sleeps (a logged call the log puts after the spinner's
 * first write), so on one core the spinner runs first and only a yield
 * point lets the setter run. Prints "spinning", then "done". */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile int flag;

static void *spinner(void *arg) {
    (void)arg;
    if (write(1, "spinning\n", 9) != 9) return NULL;
    while (!flag)
        sched_yield();
    return NULL;
}

static void *setter(void *arg) {
    (void)arg;
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
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
