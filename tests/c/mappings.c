/* File mappings a replay must re-create: a file deleted before it is
 * mapped, a memfd, /dev/zero (private and shared), and a file mapped
 * shared, changed through the mapping, then mapped again, a file mapping
 * grown with mremap, and a large realloc (an anonymous mremap); and the
 * argument registers of a file mmap, which the kernel preserves. argv[1] is
 * a directory to make the files in. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int file_with(const char *path, const char *text) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    write(fd, text, strlen(text));
    return fd;
}

/* A raw mmap of fd: the kernel leaves every argument register as it was
 * (only rax, rcx and r11 change), and code after a syscall may rely on it. */
static void mmap_keeps_argument_registers(int fd) {
    register long rax asm("rax") = SYS_mmap;
    register long rdi asm("rdi") = 0;
    register long r10 asm("r10") = MAP_PRIVATE;
    register long r8 asm("r8") = fd;
    register long r9 asm("r9") = 0;
    asm volatile("syscall" : "+r"(rax), "+r"(rdi), "+r"(r10), "+r"(r8), "+r"(r9) : "S"(4096L), "d"((long)PROT_READ) : "rcx", "r11", "memory");
    int kept = rdi == 0 && r10 == MAP_PRIVATE && r8 == fd && r9 == 0;
    printf("after a raw mmap: %s\n", rax < 0 ? "failed" : kept ? "argument registers kept" : "argument registers changed");
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/deleted-before-mmap", argv[1]);
    int fd = file_with(path, "gone from the directory");
    unlink(path);
    char *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    printf("deleted file: %.23s\n", p);
    mmap_keeps_argument_registers(fd);
    close(fd);

    fd = memfd_create("weft-test", 0);
    write(fd, "in a memfd", 10);
    p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    printf("memfd: %.10s\n", p);
    close(fd);

    fd = open("/dev/zero", O_RDWR);
    char *z = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    char *zs = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    strcpy(z + 4096, "private zero page");
    strcpy(zs + 100, "shared zero page");
    printf("/dev/zero: %d %d %s, %s\n", z[0], zs[8191], z + 4096, zs + 100);
    close(fd);

    snprintf(path, sizeof path, "%s/shared", argv[1]);
    fd = file_with(path, "AAAA written by write(2)");
    char *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    printf("shared before: %.24s\n", s);
    memcpy(s, "BBBB", 4);
    munmap(s, 4096);
    char back[25] = {0};
    pread(fd, back, 24, 0);
    printf("read back: %s\n", back);
    p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    printf("mapped again: %.24s\n", p);
    close(fd);
    unlink(path);

    snprintf(path, sizeof path, "%s/three-pages", argv[1]);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    for (int k = 0; k < 3; k++) {
        char page[4096] = {0};
        snprintf(page, sizeof page, "page %d of the file", k);
        write(fd, page, sizeof page);
    }
    p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    p = mremap(p, 4096, 3 * 4096, MREMAP_MAYMOVE);
    printf("grown: %s, %s\n", p + 4096, p + 2 * 4096);
    close(fd);
    unlink(path);

    char *big = malloc(1 << 20);
    strcpy(big, "kept by realloc");
    big = realloc(big, 4 << 20);
    big[(4 << 20) - 1] = 0;
    printf("realloc: %s\n", big);
    return 0;
}
