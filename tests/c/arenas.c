/* arenas.c: N threads (default 12) malloc and free in a loop as soon as
 * they start, with no synchronization between them. Past 8 arenas
 * (glibc's arena_test on x86-64), the thread that needs the next one
 * computes glibc's limit on arenas, without a lock, by reading
 * /sys/devices/system/cpu/online: which threads do so depends on how
 * many held an arena at that moment. Prints how many threads ran.
 * Usage: arenas [THREADS [ROUNDS]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rounds = 20000;

static void *churn(void *arg) {
    (void)arg;
    void *kept[64] = {0};
    for (int r = 0; r < rounds; r++) {
        int k = r % 64;
        free(kept[k]);
        kept[k] = malloc(16 + r % 2000);
        memset(kept[k], 1, 16);
    }
    for (int k = 0; k < 64; k++)
        free(kept[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 12;
    if (argc > 2)
        rounds = atoi(argv[2]);
    if (n < 1 || n > 64)
        return 2;
    pthread_t t[64];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("%d threads done\n", n);
    return 0;
}
