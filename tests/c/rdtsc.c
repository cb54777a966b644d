/* rdtsc.c: __rdtsc() and __rdtscp(&aux) in main and in a worker thread;
 * prints the values and differences. NOT deterministic (intended). */
#include <pthread.h>
#include <stdio.h>
#include <x86intrin.h>

static unsigned long long w_tsc, w_tscp;
static unsigned w_aux;

static void *worker(void *arg) {
    (void)arg;
    w_tsc = __rdtsc();
    w_tscp = __rdtscp(&w_aux);
    return NULL;
}

int main(void) {
    pthread_t t;
    unsigned m_aux;
    unsigned long long m_tsc = __rdtsc();
    pthread_create(&t, NULL, worker, NULL);
    unsigned long long m_tscp = __rdtscp(&m_aux);
    pthread_join(t, NULL);
    printf("main rdtsc=%llu rdtscp=%llu aux=%u diff=%lld\n",
           m_tsc, m_tscp, m_aux, (long long)(m_tscp - m_tsc));
    printf("worker rdtsc=%llu rdtscp=%llu aux=%u diff=%lld\n",
           w_tsc, w_tscp, w_aux, (long long)(w_tscp - w_tsc));
    printf("worker-main=%lld\n", (long long)(w_tsc - m_tsc));
    return 0;
}
