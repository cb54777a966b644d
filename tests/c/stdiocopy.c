/* stdiocopy.c: copies FILE to stdout a line at a time through stdio
 * (fopen, fgets, fputs), then prints how many lines it copied. glibc's
 * stdio refills and flushes its buffers with its own read and write,
 * inside libc. Usage: stdiocopy FILE */
#include <stdio.h>

int main(int argc, char **argv) {
    FILE *in = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!in) {
        perror("stdiocopy");
        return 2;
    }
    char line[256];
    long n = 0;
    while (fgets(line, sizeof line, in)) {
        fputs(line, stdout);
        n++;
    }
    fclose(in);
    printf("copied %ld lines\n", n);
    return 0;
}
