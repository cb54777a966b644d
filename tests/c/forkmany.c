/* Forks N children (argv[1], default 1000), each exiting with its index
 * modulo 256; the parent sums their statuses. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long sum = 0;
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) _exit(i % 256);
        int status;
        waitpid(p, &status, 0);
        sum += WEXITSTATUS(status);
    }
    printf("%d children, statuses sum to %ld\n", n, sum);
    return 0;
}
