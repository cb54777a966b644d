/* What the in-process runtime leaves on the stack below its caller: after
 * each kind of interposed call, hashes the 2 KiB a later frame would find
 * there uninitialized and prints the hash. The runtime runs other code in
 * a replay than in the recording (markers instead of records), so the
 * replay prints the recorded hashes only if the runtime wipes what its
 * frames left. A signal's hit state is compared on such stack (exact
 * signal delivery), which is why it matters. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* FNV-1a over the uninitialized words of its own frame. */
__attribute__((noinline)) static uint64_t hash_below(void) {
    volatile uint64_t words[256];
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 256; i++)
        h = (h ^ words[i]) * 1099511628211ull;
    return h;
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv) {
    (void)argc;
    int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    static const char *names[] = {"stat", "clock_gettime", "read", "mutex", "poll", "getrandom"};
    for (int k = 0; k < 6; k++) {
        struct stat st;
        struct timespec ts;
        char buf[64];
        struct pollfd p = {fd, POLLIN, 0};
        int ok = 1;
        switch (k) {
        case 0: ok = stat(argv[0], &st) == 0; break;
        case 1: ok = clock_gettime(CLOCK_REALTIME, &ts) == 0; break;
        case 2: ok = read(fd, buf, sizeof buf) == sizeof buf; break;
        case 3: ok = pthread_mutex_lock(&m) == 0 && pthread_mutex_unlock(&m) == 0; break;
        case 4: ok = poll(&p, 1, 0) == 1; break;
        case 5: ok = getrandom(buf, 16, 0) == 16; break;
        }
        printf("after %s (%s): %016llx\n", names[k], ok ? "ok" : "failed", (unsigned long long)hash_below());
    }
    return 0;
}
