// lazyinit.cpp: one-time initializations that 4 threads reach at once,
// ROUNDS times (a barrier starts each round): a function-local static
// whose constructor reads a file and sleeps, so that the others wait for
// it; a pthread_once routine and a std::call_once callable that read a
// file. Which thread runs each is a race, and the calls it makes are
// logged in that thread: the program prints, per round, which thread ran
// each. Usage: lazyinit [ROUNDS] (at most 8)
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

constexpr int THREADS = 4;
constexpr int MAX_ROUNDS = 8;

static thread_local int me, my_round;

static long read_size(const char *path) {
    int fd = open(path, O_RDONLY);
    char buf[128];
    long n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    if (fd >= 0) close(fd);
    return n;
}

struct Built {
    int by;
    long size;
    Built() : by(me), size(read_size("/proc/self/stat")) { usleep(2000); }
};

// One function-local static per round.
template <int Round>
static const Built &built() {
    static Built b;
    return b;
}
static const Built &(*const builders[MAX_ROUNDS])() = {built<0>, built<1>, built<2>, built<3>,
                                                       built<4>, built<5>, built<6>, built<7>};

static pthread_once_t onces[MAX_ROUNDS];
static std::once_flag flags[MAX_ROUNDS];
static int once_by[MAX_ROUNDS], call_once_by[MAX_ROUNDS], seen[THREADS][MAX_ROUNDS];

static void once_routine() {
    read_size("/proc/self/statm");
    once_by[my_round] = me;
}

int main(int argc, char **argv) {
    int rounds = std::clamp(argc > 1 ? atoi(argv[1]) : MAX_ROUNDS, 1, MAX_ROUNDS);
    for (auto &o : onces) o = PTHREAD_ONCE_INIT;
    pthread_barrier_t start;
    pthread_barrier_init(&start, nullptr, THREADS);
    std::vector<std::thread> ts;
    for (int t = 0; t < THREADS; t++)
        ts.emplace_back([t, rounds, &start] {
            me = t;
            for (int r = 0; r < rounds; r++) {
                pthread_barrier_wait(&start);
                my_round = r;
                seen[t][r] = builders[r]().by;
                pthread_once(&onces[r], once_routine);
                std::call_once(flags[r], [r] {
                    read_size("/proc/self/status");
                    call_once_by[r] = me;
                });
            }
        });
    for (auto &t : ts) t.join();
    for (int r = 0; r < rounds; r++)
        printf("round %d: static built by %d %d %d %d, pthread_once by %d, call_once by %d\n", r, seen[0][r],
               seen[1][r], seen[2][r], seen[3][r], once_by[r], call_once_by[r]);
}
