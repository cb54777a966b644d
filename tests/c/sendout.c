/* sendout.c: sends the file argv[1] to stdout three times through the
 * kernel, the bytes never passing through the program's memory: with
 * sendfile at the file position (in two calls), with sendfile at an offset
 * of its own, and with copy_file_range (which needs stdout to be a regular
 * file). With argv[2] "splice", then splices "spliced\n" from a pipe to
 * stdout. Prints each call's result on stderr. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static void sent_all(const char *what, ssize_t n, off_t size) {
    fprintf(stderr, "%s: %zd of %lld\n", what, n, (long long)size);
}

int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 2000)
        return 2;
    ssize_t head = sendfile(1, fd, NULL, 1000);
    ssize_t rest = sendfile(1, fd, NULL, st.st_size - 1000);
    sent_all("sendfile at the position", head + rest, st.st_size);
    off_t off = 0;
    sent_all("sendfile at an offset", sendfile(1, fd, &off, st.st_size), st.st_size);
    loff_t from = 0;
    sent_all("copy_file_range", copy_file_range(fd, &from, 1, NULL, st.st_size, 0), st.st_size);
    if (argc > 2 && strcmp(argv[2], "splice") == 0) {
        int p[2];
        if (pipe(p) != 0 || write(p[1], "spliced\n", 8) != 8)
            return 3;
        fprintf(stderr, "splice: %zd\n", splice(p[0], NULL, 1, NULL, 8, 0));
    }
    return 0;
}
