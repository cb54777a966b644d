/* printthreads.c: 4 threads print 50 lines each to stdout, with some work
 * between lines, and share nothing else: stdio's lock orders their lines
 * in the stream's buffer. Through a pipe or into a file the stream is
 * fully buffered, so the lines reach the kernel in a few writes long
 * after that order was decided. Each thread prints with another call
 * (printf, fprintf, fputs, fwrite), and one prints floats, which a
 * variadic wrapper must pass through. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void *print_lines(void *arg) {
    long id = (long)arg;
    char line[64];
    for (int i = 0; i < 50; i++) {
        for (volatile int k = 0; k < 100000; k++)
            ;
        switch (id) {
        case 0: printf("thread %ld line %d\n", id, i); break;
        case 1: fprintf(stdout, "thread %ld line %d %.2f %g\n", id, i, i / 4.0, i * 1.5); break;
        case 2: snprintf(line, sizeof line, "thread %ld line %d\n", id, i); fputs(line, stdout); break;
        default: snprintf(line, sizeof line, "thread %ld line %d\n", id, i); fwrite(line, 1, strlen(line), stdout); break;
        }
    }
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, print_lines, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return 0;
}
