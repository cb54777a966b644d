/* nanospin.c: a thread spins calling nanosleep with a zero time until
 * another thread, which writes a line first, sets a flag. Every
 * nanosleep is a logged event, so the replay makes progress or meets an
 * unmatched event at each call: it cannot hang. Prints "b", then "done". */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile int flag;

static void *spinner(void *arg) {
    (void)arg;
    struct timespec zero = {0, 0};
    while (!flag)
        nanosleep(&zero, NULL);
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
