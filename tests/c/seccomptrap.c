/* seccomptrap.c: installs a seccomp filter that traps getppid
 * (SECCOMP_RET_TRAP, data 7) and a SIGSYS handler, then calls getppid
 * three times. Each call is not made: the kernel rolls it back (it
 * returns its own number) and the handler records the siginfo the kernel
 * filled in. A recorder never sees the call (the program's filter wins
 * over weft's), so a replay must run the filter itself. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int trapped, nr_seen, data_seen;

static void on_sigsys(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    trapped++;
    nr_seen = si->si_syscall;
    data_seen = si->si_errno;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | 7),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    printf("install %ld\n", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
    for (int i = 0; i < 3; i++) {
        long r = syscall(SYS_getppid);
        printf("getppid %ld trapped %d nr %d data %d\n", r, trapped, nr_seen, data_seen);
    }
    return 0;
}
