/* sighandlercall.c: SIGALRM every millisecond (setitimer ITIMER_REAL) at a
 * thread that loops on clock_gettime for 100 ms, with a handler that calls
 * clock_gettime itself (a buffered call, unless the signal hit inside the
 * runtime). Signals hit the runtime's entry and return stubs too, where the
 * thread is outside a runtime function; the handler's call then goes the
 * way it goes in the replay only if weft delivers the signal where the
 * thread is back in the program or inside the function. Prints whether the
 * handler ran and how many times its call saw the clock move. */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static volatile long runs, moved;
static struct timespec last;

static void on_alarm(int sig) {
    (void)sig;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    moved += ts.tv_sec != last.tv_sec || ts.tv_nsec != last.tv_nsec;
    last = ts;
    runs++;
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every_ms = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every_ms, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000000L);
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("handler ran: %s, clock moved in %s of its calls\n", runs > 0 ? "yes" : "no", moved == runs ? "all" : "some");
    return 0;
}
