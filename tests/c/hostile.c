/* A program that does what an in-process recorder must survive (weft
 * issue 12, "Bad input"): argv[1] picks one hostile act, done by the main
 * thread while a second thread keeps making calls the runtime buffers
 * (clock_gettime, stat, read of a file). Each mode prints what it saw, so
 * that the replay must reproduce it.
 *   closefds  close every descriptor from 3 up, then dup2 a pipe over 3..63
 *   unmap     munmap a slot of the runtime's shared buffers (where weft
 *             puts them; nothing is mapped there natively)
 *   seccomp   install a seccomp filter that fails getppid, and mprotect to
 *             PROT_READ|PROT_EXEC, with EPERM (and lets every other call
 *             through), then make both calls: neither reaches weft
 *   clone     clone threads with unusual flags: no CLONE_SETTLS (the
 *             parent's TLS), and CLONE_VM without CLONE_THREAD (a process
 *             sharing memory)
 *   vmprocess a CLONE_VM process (no CLONE_THREAD, no TLS of its own) that
 *             makes buffered calls through libc while the busy thread does
 *   unmapbelow  munmap a range that starts below the runtime's code page
 *             and covers it (nothing is mapped there natively), once the
 *             busy thread is done (it would fault in a call under way,
 *             README's known limits) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

static const char *self;

/* Posted once the busy thread has made its first round of calls. */
static sem_t started;

/* 4000 rounds of buffered calls; prints a checksum of what they saw. */
static void *busy(void *arg) {
    (void)arg;
    unsigned long sum = 0, rounds = 0;
    char buf[64];
    while (rounds < 4000) {
        struct timespec ts;
        struct stat st;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sum += (unsigned long)ts.tv_nsec;
        if (stat(self, &st) == 0)
            sum += (unsigned long)st.st_size;
        if (rounds % 64 == 0) {
            int fd = open(self, O_RDONLY);
            if (fd >= 0) {
                sum += (unsigned long)read(fd, buf, sizeof buf);
                close(fd);
            }
        }
        if (rounds++ == 0)
            sem_post(&started);
    }
    printf("busy: %lu rounds, sum %lu\n", rounds, sum);
    return NULL;
}

static void closefds(void) {
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int p[2];
    if (pipe(p) != 0)
        return;
    for (int fd = 3; fd < 64; fd++)
        if (fd != p[0] && fd != p[1])
            dup2(p[1], fd);
    printf("closed and replaced descriptors: %d\n", (int)write(40, "x", 1));
}

#define WEFT_SHARED 0x6fff00010000UL

/* The last of the 512 slots of 256 KiB after the 4 KiB header, which no
 * thread of this program writes: unmapping a page another thread is
 * writing would fault it (README, known limits). */
static void unmap(void) {
    int r = munmap((void *)(WEFT_SHARED + 4096 + 511 * (256UL << 10)), 256UL << 10);
    printf("munmap of a shared buffer: %d\n", r);
}

static char page[4096] __attribute__((aligned(4096)));

static void seccomp(void) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_READ | PROT_EXEC, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    printf("seccomp: %ld\n", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
    long ppid = syscall(SYS_getppid);
    printf("getppid: %ld (%s)\n", ppid, ppid < 0 ? strerror(errno) : "allowed");
    int r = mprotect(page, sizeof page, PROT_READ | PROT_EXEC);
    printf("mprotect: %d (%s)\n", r, r ? strerror(errno) : "allowed");
    page[0] = 1; /* still writable: the refused mprotect did nothing */
    printf("page written\n");
}

static char stacks[2][65536] __attribute__((aligned(16)));
static volatile int child_done[2];

static int raw_child(void *arg) {
    int which = (int)(intptr_t)arg;
    struct timespec ts;
    struct stat st;
    /* Raw syscalls: the child shares its parent's TLS or has none. */
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    syscall(SYS_newfstatat, AT_FDCWD, self, &st, 0);
    child_done[which] = 1 + (st.st_size > 0);
    return 0;
}

static void clones(void) {
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    int t = clone(raw_child, stacks[0] + sizeof stacks[0], flags, (void *)0);
    int p = clone(raw_child, stacks[1] + sizeof stacks[1], CLONE_VM | SIGCHLD, (void *)1);
    int status = -1;
    if (p > 0)
        waitpid(p, &status, 0);
    while (t > 0 && !child_done[0])
        sched_yield();
    printf("clone without TLS: %d, CLONE_VM process: %d, exit %d\n", child_done[0], child_done[1], WEXITSTATUS(status));
}

/* 500 rounds of buffered calls, in the parent's memory and TLS. */
static int vm_child(void *arg) {
    (void)arg;
    unsigned long sum = 0;
    for (int i = 0; i < 500; i++) {
        struct timespec ts;
        struct stat st;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (stat(self, &st) == 0)
            sum += (unsigned long)st.st_size;
    }
    return sum > 0 ? 0 : 1;
}

static void vmprocess(void) {
    int p = clone(vm_child, stacks[1] + sizeof stacks[1], CLONE_VM | SIGCHLD, NULL);
    int status = -1;
    if (p > 0)
        waitpid(p, &status, 0);
    printf("CLONE_VM process: exit %d\n", WEXITSTATUS(status));
}

#define WEFT_PAGE 0x6fff00000000UL

static void unmapbelow(void) {
    int r = munmap((void *)(WEFT_PAGE - 65536), 65536 + 4096);
    printf("munmap of a range that ends in the runtime's page: %d\n", r);
}

int main(int argc, char **argv) {
    self = argv[0];
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t t;
    sem_init(&started, 0, 0);
    pthread_create(&t, NULL, busy, NULL);
    /* The act races with the busy thread's later calls, not its first:
     * on a loaded machine that thread may not have run at all yet. */
    sem_wait(&started);
    if (!strcmp(argv[1], "closefds"))
        closefds();
    else if (!strcmp(argv[1], "unmap"))
        unmap();
    else if (!strcmp(argv[1], "seccomp"))
        seccomp();
    else if (!strcmp(argv[1], "clone"))
        clones();
    else if (!strcmp(argv[1], "vmprocess"))
        vmprocess();
    else if (!strcmp(argv[1], "unmapbelow")) {
        pthread_join(t, NULL);
        unmapbelow();
    }
    else
        return 2;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (strcmp(argv[1], "unmapbelow"))
        pthread_join(t, NULL);
    printf("main: done\n");
    return 0;
}
