/* longloop.c: a worker counts to 20,000,000 in a loop that makes no
 * syscall, so that one segment of a replay holds all of it, then stores
 * 42 into `result` (line 14) and calls getppid (a logged syscall). main
 * joins it and prints both. Going back over the store (a watchpoint,
 * reverse-continue) or over the syscall (reverse-stepi from right after
 * it) must not single-step the loop. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static volatile long counter;
long result;
static void *worker(void *arg) {
    for (long i = 0; i < (long)arg; i++) counter++;
    result = 42;
    return (void *)(long)getppid();
}
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)20000000L);
    pthread_join(t, NULL);
    printf("result %ld counter %ld\n", result, counter);
    return 0;
}
