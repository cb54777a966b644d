/* syscalls.c: makes the syscalls whose out-buffers weft describes from its
 * generated table and prints what each wrote, so that a replay that did
 * not write them back prints something else. Each call is made before the
 * printf that shows its result (argument order is unspecified in C). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static void ids(void) {
    struct utsname u;
    int r = uname(&u);
    printf("uname: %d %s %s %s\n", r, u.sysname, u.release, u.machine);
    struct sysinfo si;
    r = sysinfo(&si);
    printf("sysinfo: %d uptime=%ld procs=%d ram=%lu\n", r, si.uptime, si.procs, si.totalram);
    struct rlimit rl;
    r = getrlimit(RLIMIT_NOFILE, &rl);
    printf("getrlimit: %d %lu %lu\n", r, rl.rlim_cur, rl.rlim_max);
    struct rlimit64 r64;
    long l = syscall(SYS_prlimit64, 0, RLIMIT_STACK, NULL, &r64);
    printf("prlimit64: %ld %lu\n", l, (unsigned long)r64.rlim_cur);
    cpu_set_t set;
    CPU_ZERO(&set);
    r = sched_getaffinity(0, sizeof set, &set);
    printf("sched_getaffinity: %d cpus=%d\n", r, CPU_COUNT(&set));
    struct sched_param sp = {.sched_priority = -1};
    r = sched_getparam(0, &sp);
    printf("sched_getparam: %d priority=%d\n", r, sp.sched_priority);
    unsigned cpu = 999, node = 999;
    l = syscall(SYS_getcpu, &cpu, &node, NULL);
    printf("getcpu: %ld cpu=%u node=%u\n", l, cpu, node);
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0xff, sizeof d);
    l = syscall(SYS_capget, &h, d);
    printf("capget: %ld eff=%x,%x\n", l, d[0].effective, d[1].effective);
}

static void clocks(void) {
    struct timex tx = {.modes = 0};
    /* glibc's adjtimex() calls clock_adjtime: make the syscall itself. */
    int state = syscall(SYS_adjtimex, &tx);
    printf("adjtimex: %d freq=%ld tick=%ld status=%d\n", state, tx.freq, tx.tick, tx.status);
    struct timex ct = {.modes = 0};
    state = clock_adjtime(CLOCK_REALTIME, &ct);
    printf("clock_adjtime: %d sec=%ld maxerror=%ld\n", state, (long)ct.time.tv_sec, ct.maxerror);
}

static void files(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/weft-xattr-%d", getpid());
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    char pidval[32];
    int n = snprintf(pidval, sizeof pidval, "pid %07d", getpid());
    int set = setxattr(path, "user.weft", pidval, n, 0);
    char v[64] = {0}, lv[64] = {0}, fv[64] = {0}, names[128] = {0};
    long sz = getxattr(path, "user.weft", NULL, 0);
    long g = getxattr(path, "user.weft", v, sizeof v);
    long lg = lgetxattr(path, "user.weft", lv, sizeof lv);
    long fg = fgetxattr(fd, "user.weft", fv, sizeof fv);
    long ls = listxattr(path, names, sizeof names);
    printf("xattr: set=%d size=%ld get=%ld '%s' lget=%ld '%s' fget=%ld '%s' list=%ld '%s'\n", set, sz, g, v, lg, lv,
           fg, fv, ls, names);
    char link[80];
    snprintf(link, sizeof link, "%s.link", path);
    symlink(path, link);
    char target[80] = {0};
    long rl = readlink(link, target, sizeof target);
    printf("readlink: %ld %s\n", rl, target);
    unlink(link);
    close(fd);
    unlink(path);
    /* glibc's and Rust's probe: statx with a NULL path and AT_EMPTY_PATH. */
    struct statx sx;
    long r = syscall(SYS_statx, 0, NULL, AT_EMPTY_PATH, STATX_ALL, &sx);
    printf("statx NULL: %ld\n", r < 0 ? -1 : (long)(sx.stx_mode & S_IFMT));
    r = statx(AT_FDCWD, "/proc/self/exe", 0, STATX_ALL, &sx);
    printf("statx: %ld ino=%llu size=%llu\n", r, (unsigned long long)sx.stx_ino, (unsigned long long)sx.stx_size);
}

static void ioctls(void) {
    int p[2];
    pipe(p);
    write(p[1], "hello", 5);
    int avail = -1;
    int r = ioctl(p[0], FIONREAD, &avail);
    printf("FIONREAD: %d avail=%d\n", r, avail);
    struct termios t;
    memset(&t, 0, sizeof t);
    printf("TCGETS pipe: %d\n", ioctl(p[0], TCGETS, &t));
    int pt = posix_openpt(O_RDWR | O_NOCTTY);
    if (pt >= 0 && grantpt(pt) == 0 && unlockpt(pt) == 0) {
        int ptn = -1;
        r = ioctl(pt, TIOCGPTN, &ptn);
        printf("TIOCGPTN: %d n=%d\n", r, ptn);
        int sl = open(ptsname(pt), O_RDWR | O_NOCTTY);
        struct winsize ws = {.ws_row = 33, .ws_col = 77};
        ioctl(sl, TIOCSWINSZ, &ws);
        struct winsize got = {0};
        r = ioctl(sl, TIOCGWINSZ, &got);
        printf("TIOCGWINSZ: %d %dx%d\n", r, got.ws_row, got.ws_col);
        r = ioctl(sl, TCGETS, &t);
        printf("TCGETS pty: %d lflag=%x\n", r, t.c_lflag);
        close(sl);
        close(pt);
    }
    close(p[0]);
    close(p[1]);
}

/* rseq is refused (ENOSYS) under weft, as glibc's own registration is:
 * the recording filter fails it in the kernel. */
static void refused(void) {
    long r = syscall(SYS_rseq, 0, 0, 0, 0);
    printf("rseq: %ld errno=%d\n", r, r < 0 ? errno : 0);
}

int main(void) {
    refused();
    ids();
    clocks();
    files();
    ioctls();
    return 0;
}
