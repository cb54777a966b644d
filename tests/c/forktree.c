/* A bounded fork bomb: every process forks two children down to depth
 * argv[1] (default 6: 127 processes), and exits with the number of
 * processes below it, plus one, modulo 256. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int grow(int depth) {
    if (depth == 0) return 1;
    int total = 1;
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) _exit(grow(depth - 1));
        if (kids[k] < 0) return total;
    }
    for (int k = 0; k < 2; k++) {
        int status;
        waitpid(kids[k], &status, 0);
        total += WEXITSTATUS(status);
    }
    return total;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 6;
    printf("%d processes\n", grow(depth));
    return 0;
}
