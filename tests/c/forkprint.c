/* forkprint.c: a thread prints 40,000 lines without pause while the main thread
 * forks children that print a line of their own and exit(), flushing the
 * stdout buffer they inherited (the thread's lines not yet written out). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *printer(void *arg) {
    (void)arg;
    for (long i = 0; i < 40000; i++)
        printf("printer line %ld\n", i);
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, printer, NULL);
    for (int k = 0; k < 5; k++) {
        usleep(2000);
        pid_t child = fork();
        if (child == 0) {
            printf("child %d\n", k);
            exit(0);
        }
        int status;
        waitpid(child, &status, 0);
    }
    pthread_join(t, NULL);
    printf("parent done\n");
    return 0;
}
