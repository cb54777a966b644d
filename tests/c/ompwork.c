/* ompwork.c: OpenMP work sharing among 4 threads: a dynamic loop, a
 * guided one, a runtime-scheduled one (libgomp's default run schedule is
 * dynamic), a dynamic loop with chunks of 3 over unsigned long long
 * bounds, and 4 sections, ROUNDS times each. Iterations
 * take uneven time, so which thread takes which chunk is a race; the
 * program prints, per loop, the thread that ran each iteration.
 * Usage: ompwork [ROUNDS] */
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N 48

static unsigned long work(int i) {
    unsigned long x = (unsigned long)i;
    for (long k = 0; k < 20000L * (1 + i % 7); k++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static void show(const char *name, const char *owners) {
    printf("%s: %.*s\n", name, N, owners);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    char dyn[N], gui[N], run[N], ull[N], sec[4];
    unsigned long sink = 0;
    omp_set_num_threads(4);
    for (int r = 0; r < rounds; r++) {
#pragma omp parallel reduction(^ : sink)
        {
            char me = (char)('0' + omp_get_thread_num());
#pragma omp for schedule(dynamic)
            for (int i = 0; i < N; i++) {
                sink ^= work(i);
                dyn[i] = me;
            }
#pragma omp for schedule(guided, 2)
            for (int i = 0; i < N; i++) {
                sink ^= work(N - i);
                gui[i] = me;
            }
#pragma omp for schedule(runtime)
            for (int i = 0; i < N; i++) {
                sink ^= work(i + r);
                run[i] = me;
            }
#pragma omp for schedule(dynamic, 3)
            for (unsigned long long i = ULLONG_MAX - N; i < ULLONG_MAX; i++) {
                sink ^= work((int)(i % 11));
                ull[i - (ULLONG_MAX - N)] = me;
            }
#pragma omp sections
            {
#pragma omp section
                { sink ^= work(5); sec[0] = me; }
#pragma omp section
                { sink ^= work(1); sec[1] = me; }
#pragma omp section
                { sink ^= work(6); sec[2] = me; }
#pragma omp section
                { sink ^= work(2); sec[3] = me; }
            }
        }
        printf("round %d\n", r);
        show("dynamic", dyn);
        show("guided", gui);
        show("runtime", run);
        show("ull", ull);
        printf("sections: %.4s\n", sec);
    }
    printf("sink %lx\n", sink);
    return 0;
}
