/* exitcode.c: prints "hello", joins a trivial thread, returns exit status 3. */
#include <pthread.h>
#include <stdio.h>

static void *worker(void *arg) { return arg; }

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("hello\n");
    return 3;
}
