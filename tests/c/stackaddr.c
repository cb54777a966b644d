/* Prints where its first local, argv[0] and its environment lie on the
 * initial stack, and calls stat(2) on a path copied there: a replay of a
 * rebuilt or deleted executable must find the stack as it was recorded. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

extern char **environ;

int main(int argc, char **argv) {
    char path[16];
    strcpy(path, "/");
    struct stat st;
    int r = stat(path, &st);
    printf("local %p argv[0] %p environ[0] %p argc %d stat %d\n", (void *)path, (void *)argv[0], (void *)environ[0], argc, r);
    return 0;
}
