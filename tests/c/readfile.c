/* readfile.c: open/read (4096-byte chunks)/fstat a file given as argv[1];
 * a second thread pread64s the first 16 bytes. Prints byte count, size,
 * byte sum mod 65536, and the first 16 bytes in hex (all from main). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int fd;
static unsigned char head[16];
static ssize_t head_n;

static void *preader(void *arg) {
    (void)arg;
    head_n = pread64(fd, head, sizeof head, 0);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s PATH\n", argv[0]); return 2; }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    pthread_t t;
    pthread_create(&t, NULL, preader, NULL);
    unsigned char buf[4096];
    long long total = 0;
    unsigned sum = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        total += n;
        for (ssize_t i = 0; i < n; i++) sum = (sum + buf[i]) % 65536;
    }
    struct stat st;
    fstat(fd, &st);
    pthread_join(t, NULL);
    printf("bytes=%lld size=%lld sum=%u\n", total, (long long)st.st_size, sum);
    printf("head=");
    for (ssize_t i = 0; i < head_n; i++) printf("%02x", head[i]);
    printf("\n");
    close(fd);
    return 0;
}
