/* Leaves a daemon behind: a grandchild in its own session that sleeps
 * for good once it has told the first process it runs. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fds[2];
    pipe(fds);
    if (fork() == 0) {
        if (fork() == 0) {
            setsid();
            write(fds[1], "x", 1);
            sleep(1000000);
        }
        return 0;
    }
    char c;
    read(fds[0], &c, 1);
    printf("daemon started\n");
    return 0;
}
