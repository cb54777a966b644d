/* weft's in-process recording runtime (seed 003, iReplayer): the preload
 * library `weft record` injects with LD_PRELOAD.
 *
 * It logs, inside the program and without a ptrace stop, the syscalls a
 * program makes most (the time calls, the stat family, open and close,
 * reads that cannot block, getdents64, getrandom, gettid and getpid,
 * zero-timeout polls) and the order in which threads acquire each
 * synchronization variable (seed 003 §3.2: pthread mutexes, rwlocks, condition variables,
 * semaphores, barriers, spinlocks, and futex calls made through syscall(3),
 * as Rust's std makes them). Each record takes its place in the trace from
 * one shared atomic counter, which the recorder also draws from for the
 * events it logs at ptrace stops: the two paths merge into one global
 * order. The recorder drains the per-thread buffers (weft_runtime.h).
 *
 * In a replay the same code runs: buffered syscalls are made at the
 * BUFFERED site, where the replayer stops and answers them from the log,
 * and each synchronization operation makes a WEFT_NR_SYNC marker call at
 * its logged place, which the replayer matches in the log's order.
 *
 * Anything the runtime cannot describe, or that may block, goes to the
 * real libc function, whose syscall the recorder traps as before; so does
 * every call while the runtime is off (no weft, a disabled process, a
 * thread without a slot, a call nested in a signal handler).
 */
#define _GNU_SOURCE
#include "weft_runtime.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define EXPORT __attribute__((visibility("default")))
#define ALIGN8(n) (((n) + 7UL) & ~7UL)

/* ------------------------------------------------------------- returns */

/* Every interposed function returns through a stub that clears the
 * caller-saved registers (and the top half of an int result): the runtime
 * runs other code in a replay than in the recording (markers instead of
 * records), and a signal that hits the program right after a call is
 * found again by matching its registers (weft's exact signal delivery). */
/* Each stub then zeroes the SCRUB_BYTES of stack below the caller's frame,
 * where the runtime's frames were: a recording's buffered call runs deeper
 * code there (it logs) than its replay, and what it leaves in the slots a
 * later frame of the program does not initialize would differ from the
 * replay's at a signal's hit (weft compares 512 bytes of stack too). The
 * runtime's deepest own path (a buffered call and its log) takes about
 * 400 bytes (gcc -fstack-usage); wiping much more than the recording used
 * could write past a small stack (a signal handler's alternate one). */
#define SCRUB_BYTES "512"
#define SCRUB_WORDS "64"
/* Each stub also sets the thread's phase (struct thread, at offset 12 of
 * weft_thread_self, initial-exec TLS) to BEFORE as it enters and to AFTER
 * once the function returned; r11 is free at a call and at a return. */
#define STRINGIFY(x) #x
#define SET_PHASE(value) SET_PHASE_(value)
#define SET_PHASE_(value)                                                         \
    "movq weft_thread_self@gottpoff(%rip), %r11\nmovl $" STRINGIFY(value) ", %fs:12(%r11)\n"
#define SCRUB_STUB(name, widen)                                                   \
    __asm__(".text\n.globl " #name "\n.type " #name ",@function\n" #name ":\n"      \
            ".cfi_startproc\n" SET_PHASE(WEFT_PHASE_BEFORE) "sub $8, %rsp\n.cfi_adjust_cfa_offset 8\n" \
            "call impl_" #name "\nadd $8, %rsp\n.cfi_adjust_cfa_offset -8\n"          \
            "mov %rax, %rdx\nlea -" SCRUB_BYTES "(%rsp), %rdi\nmov $" SCRUB_WORDS ", %ecx\n" \
            "xor %eax, %eax\nrep stosq\nmov %rdx, %rax\n"                           \
            SET_PHASE(WEFT_PHASE_AFTER) widen                                                         \
            "xor %ecx, %ecx\nxor %edx, %edx\nxor %esi, %esi\nxor %edi, %edi\n"        \
            "xor %r8d, %r8d\nxor %r9d, %r9d\nxor %r10d, %r10d\nxor %r11d, %r11d\n"    \
            "ret\n.cfi_endproc\n.size " #name ", .-" #name "\n");
/* For a function returning int: its result zero-extended. */
#define SCRUB32(name) SCRUB_STUB(name, "mov %eax, %eax\n")
/* For a function returning a 64-bit value. */
#define SCRUB64(name) SCRUB_STUB(name, "")
#define IMPL __attribute__((used)) static
/* A macro argument that holds commas. */
#define P(...) __VA_ARGS__

/* ---------------------------------------------------------------- state */

static int mode;          /* 0 off, WEFT_MODE_RECORD, WEFT_MODE_REPLAY */
static struct weft_control control;
/* WEFT_SHARED once mapped: the shared buffers in a recording, a private
 * page for the header's write locks in a replay. */
static unsigned char *shared;

/* One thread's state. Zero in a new thread: registered on first use. */
struct thread {
    unsigned int generation; /* control.generation when registered, plus 1 */
    int slot;                /* -1: none could be had */
    int depth;               /* >0 inside the runtime (a handler's calls pass) */
    /* WEFT_PHASE_BEFORE from a runtime function's entry (its stub) until
     * its first call (a syscall at a site, or the real function), then
     * WEFT_PHASE_AFTER: a signal that hits the runtime before the call
     * came before it, and a replay delivers it where the call starts,
     * not where the thread's previous call ended. The stubs write it. */
    volatile unsigned int phase;
    /* The depth a stream call (stdio_lock) runs the real call at, or 0:
     * its refills are buffered there too (weft_stdio_read). */
    int stdio;
    /* The write lock a traced write took, until it returns (write_traced). */
    volatile unsigned int *write_held;
    /* The pthread_once call whose routine the thread is about to run, if
     * any (once_routine). */
    struct once_call *once;
};
_Static_assert(__builtin_offsetof(struct thread, phase) == 12, "SET_PHASE's offset");
_Static_assert(__builtin_offsetof(struct thread, depth) == 8, "DEPTH_BEFORE_PHASE (runtime.rs)");
/* Initial-exec: a preloaded library's TLS is in the static block, so an
 * access is one %fs-relative load (and the stubs can reach it). */
static __thread struct thread self __asm__("weft_thread_self") __attribute__((tls_model("initial-exec"), used));

/* ----------------------------------------------------------- the sites */

typedef long (*site_fn)(long, long, long, long, long, long, long);

/* Calls syscall `nr` at `site` (a `syscall; ret` in the code page). A
 * request (the CTL site) is no function's call: the phase stays. */
static long site_call(unsigned long site, long nr, long a, long b, long c, long d, long e, long f) {
    if (site != WEFT_SITE_CTL) {
        self.phase = WEFT_PHASE_AFTER;
    }
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("call *%[site]"
                     : "=a"(ret)
                     : [site] "r"(site), "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#define PRIVATE(nr, a, b, c, d, e, f) site_call(WEFT_SITE_PRIVATE, nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define BUFFERED(nr, a, b, c, d, e, f) site_call(WEFT_SITE_BUFFERED, nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define CTL(a, b, c, d) site_call(WEFT_SITE_CTL, WEFT_NR_CTL, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

/* Maps the code page and writes the three sites. Uses libc's own calls:
 * they run before any site exists, and are the same in record and replay. */
static int map_code_page(void) {
    void *p = mmap((void *)WEFT_PAGE, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != (void *)WEFT_PAGE) {
        return -1;
    }
    static const unsigned char site[] = {0x0f, 0x05, 0xc3}; /* syscall; ret */
    for (int i = 0; i < 3; i++) {
        memcpy((unsigned char *)p + 16 * i, site, sizeof site);
    }
    return mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

/* ------------------------------------------------------------ start-up */

/* Asks weft which side it is on, and in a recording maps the shared
 * buffers (the descriptor is closed at once: none is left for the program
 * to close or dup2 over). Without weft the CTL call fails with ENOSYS and
 * the runtime stays off. */
static void patch_stdio(void);

__attribute__((constructor)) static void weft_start(void) {
    if (map_code_page() != 0) {
        return;
    }
    static struct weft_hello_reply reply;
    long m = CTL(WEFT_CTL_HELLO, WEFT_RT_VERSION, &reply, &control);
    if (m == WEFT_MODE_RECORD || m == WEFT_MODE_REPLAY) {
        /* glibc raises its mmap threshold when any thread frees a mapped
         * chunk: where the next large block comes from (and when a heap
         * shrinks) then depends on the timing of other threads' frees, a
         * race no synchronization orders. Setting the thresholds turns
         * that off, in the recording and the replay alike; seed 003
         * §2.2.4 makes the heap deterministic for the same reason. They
         * are set where glibc's own adjustment takes a program that frees
         * blocks of a few MB (mallopt(3): the trim threshold twice the
         * mmap threshold), not at the 128 KiB default: there each of
         * pbzip2's 3.6 MB compressor arrays was a fresh mapping, zeroed
         * page by page (142,000 page faults against 120,000 natively;
         * 5,500 at 8 MiB). At 32 MiB, the ceiling, xz -T2's 24 MiB block
         * buffers came from the heap too, and xz ran 10% slower. */
        mallopt(M_MMAP_THRESHOLD, 8 << 20);
        mallopt(M_TRIM_THRESHOLD, 16 << 20);
        /* glibc computes its limit on arenas when a thread needs a ninth,
         * without a lock, and reads /sys/devices/system/cpu/online to do
         * it: which threads read it depends on how many held an arena at
         * that moment (12 threads that malloc at once: 1 recording in 6
         * failed in log order, and no search helped). The same limit,
         * set here (8 arenas a core on x86-64, malloc/arena.c), spares
         * the race. */
        int cores = get_nprocs();
        mallopt(M_ARENA_MAX, 8 * (cores >= 1 ? cores : 2));
    }
    if (m == WEFT_MODE_REPLAY) {
        /* The header alone, private: a write takes its lock at the address
         * the recording's took, through the same code, so that a signal
         * that hit the write finds the same stack above it (the lock's
         * address and the runtime's frames: sig2.c's handlers print). The
         * replay never waits for a lock (the log orders the writes), so
         * what a fork or a checkpoint leaves in it does not matter. */
        long p = PRIVATE(SYS_mmap, WEFT_SHARED, WEFT_HEADER_SIZE, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == (long)WEFT_SHARED) {
            shared = (unsigned char *)p;
        }
        mode = m;
        patch_stdio();
        return;
    }
    if (m != WEFT_MODE_RECORD) {
        return;
    }
    long fd = PRIVATE(SYS_openat, AT_FDCWD, reply.shm_path, O_RDWR | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) {
        return;
    }
    long p = PRIVATE(SYS_mmap, WEFT_SHARED, WEFT_SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    PRIVATE(SYS_close, fd, 0, 0, 0, 0, 0);
    if (p != (long)WEFT_SHARED) {
        return;
    }
    shared = (unsigned char *)p;
    mode = m;
    patch_stdio();
}

/* ----------------------------------------------------------- the slots */

struct slot {
    int tid;
    int pad;
    volatile unsigned long head;
    volatile unsigned long tail;
    volatile unsigned int quiet;
    volatile unsigned int logging;
    volatile unsigned long phase_at;
    /* The place plus one of the record of the buffered call that just
     * returned, when the recorder took it at a signal's stop before the
     * thread did (0: none): the call came before the handler's calls. */
    volatile unsigned long reserved;
};
_Static_assert(__builtin_offsetof(struct slot, quiet) == 24, "SLOT_QUIET (runtime.rs)");
_Static_assert(__builtin_offsetof(struct slot, logging) == 28, "SLOT_LOGGING (runtime.rs)");
_Static_assert(__builtin_offsetof(struct slot, phase_at) == 32, "SLOT_PHASE_AT (runtime.rs)");
_Static_assert(__builtin_offsetof(struct slot, reserved) == 40, "SLOT_RESERVED (runtime.rs)");
_Static_assert(sizeof(struct slot) <= WEFT_SLOT_DATA, "the records start at WEFT_SLOT_DATA");

static struct slot *slot_of(int k) {
    return (struct slot *)(shared + WEFT_HEADER_SIZE + (unsigned long)k * WEFT_SLOT_SIZE);
}

static volatile unsigned long *sequence(void) {
    return (volatile unsigned long *)shared;
}

/* Enters the runtime for one call: 1 when the call is to be buffered (or,
 * in a replay, answered at the BUFFERED site), 0 when it takes the real
 * function. */
static int enter(void) {
    if (!mode || control.disabled || self.depth) {
        return 0;
    }
    /* Inside the function from before a thread's first request: a signal
     * that stops the thread there runs its handler at depth 1, as in a
     * replay, which makes no request and delivers it at the function's
     * call (its handler's calls were buffered in the recording, and went
     * through ptrace in the replay: raisekill.c's SIGUSR2 at the first
     * call of SIGUSR1's handler). The recorder learns where the phase is
     * with the request. */
    self.depth++;
    if (mode == WEFT_MODE_RECORD && self.generation != control.generation + 1) {
        self.slot = (int)CTL(WEFT_CTL_REGISTER, &self.phase, 0, 0);
        self.generation = control.generation + 1;
    }
    if (mode == WEFT_MODE_RECORD && self.slot < 0) {
        self.depth--;
        return 0;
    }
    return 1;
}

static void leave(void) {
    self.depth--;
}

/* A chunk of memory the call wrote, copied into its record. */
struct chunk {
    const void *addr;
    unsigned long len;
};

/* Room for a record of `size` bytes in this thread's slot, flushing it
 * first when full (a full buffer is drained, never dropped). */
static unsigned char *reserve(unsigned long size) {
    struct slot *s = slot_of(self.slot);
    if (s->head + size > WEFT_SLOT_SIZE - WEFT_SLOT_DATA) {
        CTL(WEFT_CTL_FLUSH, self.slot, 0, 0);
    }
    return (unsigned char *)s + WEFT_SLOT_DATA + s->head;
}

static void commit(unsigned long size) {
    struct slot *s = slot_of(self.slot);
    __atomic_store_n(&s->head, s->head + size, __ATOMIC_RELEASE);
}

/* Set once a call's place in the order is taken (right after the call)
 * until its record is written: a signal that arrives in between is placed
 * by the recorder right after that record, as it came after the call (and
 * before whatever its handler logs). */
static void logging(int on) {
    slot_of(self.slot)->logging = on;
}

/* Takes the next place in the order: from here on the function has a
 * record in the log (or will have, at this place), so a signal is no
 * longer before its call. */
static unsigned long next_seq(void) {
    self.phase = WEFT_PHASE_AFTER;
    return __atomic_fetch_add(sequence(), 1, __ATOMIC_SEQ_CST);
}

/* The place of a buffered call that returned: the one the recorder took
 * when a signal stopped the thread right after the call (its handler ran
 * before this), or the next one. */
static unsigned long call_seq(void) {
    struct slot *s = slot_of(self.slot);
    unsigned long reserved = s->reserved;
    if (!reserved) {
        return next_seq();
    }
    s->reserved = 0;
    self.phase = WEFT_PHASE_AFTER;
    return reserved - 1;
}

/* Byte copies and fills for the records. The runtime is built with
 * -mgeneral-regs-only and calls no libc string function on the logging
 * path: only a recording logs, and what libc's vector code left in the
 * xmm/ymm registers would outlive the call (a later lazy binding or
 * signal frame saves them on the stack), unlike in the replay. */
static void copy_bytes(void *to, const void *from, unsigned long n) {
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

static void zero_bytes(void *to, unsigned long n) {
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(n) : "a"(0) : "memory");
}

static unsigned long length(const char *s) {
    unsigned long n = 0;
    while (s[n]) {
        n++;
    }
    return n;
}

/* Logs a buffered syscall with its path (NULL: none, or a NULL pointer) and the chunks it
 * wrote. Calls too large for a slot are not made here (callers check). */
static void log_syscall(unsigned long seq, long nr, const long a[6], long result, const char *path,
                        const struct chunk *chunks, int n) {
    unsigned long plen = path ? length(path) : 0;
    unsigned long size = sizeof(struct weft_record) + ALIGN8(plen);
    for (int i = 0; i < n; i++) {
        size += 16 + ALIGN8(chunks[i].len);
    }
    unsigned char *p = reserve(size);
    struct weft_record *r = (struct weft_record *)p;
    r->size = (unsigned int)size;
    r->kind = WEFT_REC_SYSCALL;
    r->nchunks = (unsigned short)n;
    r->seq = seq;
    r->nr = nr;
    for (int i = 0; i < 6; i++) r->args[i] = (unsigned long)a[i];
    r->result = result;
    r->path_len = path ? (unsigned int)plen : WEFT_NO_PATH;
    p += sizeof *r;
    copy_bytes(p, path, plen);
    p += ALIGN8(plen);
    for (int i = 0; i < n; i++) {
        unsigned long head[2] = {(unsigned long)chunks[i].addr, chunks[i].len};
        copy_bytes(p, head, 16);
        copy_bytes(p + 16, chunks[i].addr, chunks[i].len);
        p += 16 + ALIGN8(chunks[i].len);
    }
    commit(size);
}

/* Makes syscall `nr` at the BUFFERED site and, in a recording, logs it
 * with the chunks `out` describes once the result is known. */
typedef int (*describe_fn)(long result, const long a[6], struct chunk *out);

static long buffered(long nr, const long a[6], const char *path, describe_fn describe) {
    long r = BUFFERED(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    /* A call a signal interrupted (no SA_RESTART) is the signal's event
     * alone, as at a ptrace stop: a replay delivers the signal in the call,
     * and the kernel makes it fail with EINTR there too. */
    if (mode == WEFT_MODE_RECORD && r != -EINTR) {
        unsigned long seq = call_seq();
        logging(1);
        struct chunk c[2];
        int n = r >= 0 ? describe(r, a, c) : 0;
        log_syscall(seq, nr, a, r, path, c, n);
        logging(0);
    }
    return r;
}

static long with_errno(long r) {
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* ------------------------------------------------ synchronization order */

/* Logs a synchronization record (seed 003 §3.2) at place `seq` in the
 * order: taken before a release, after an acquire. */
static void sync_record_at(unsigned long seq, int op, const void *var, long result) {
    unsigned long size = sizeof(struct weft_record);
    struct weft_record *r = (struct weft_record *)reserve(size);
    zero_bytes(r, size);
    r->size = (unsigned int)size;
    r->kind = WEFT_REC_SYNC;
    r->seq = seq;
    r->nr = op;
    r->args[0] = (unsigned long)var;
    r->result = result;
    r->path_len = WEFT_NO_PATH;
    commit(size);
}

static void sync_record(int op, const void *var, long result) {
    sync_record_at(next_seq(), op, var, result);
}

/* In a replay: waits for the operation's place in the log and returns the
 * recorded result, which the replayer answers with. */
static long sync_marker(int op, const void *var, long result) {
    long r;
    /* A signal the recording saw interrupt the real wait is delivered in
     * the marker: without SA_RESTART the marker fails with EINTR, and is
     * made again (as libc's waits retry). */
    do {
        r = BUFFERED(WEFT_NR_SYNC, op, var, result, 0, 0, 0);
    } while (r == -EINTR);
    return r;
}

/* While set, the thread is in a synchronization call's real wait, which a
 * replay, granting the call its recorded outcome in order, does not make:
 * the recorder does not log its futex waits (those a timed call makes
 * inside libc), and a signal that interrupts one is placed at the call's
 * replay marker instead (see sync_marker). */
static void quiet(int on) {
    slot_of(self.slot)->quiet = on;
}

/* The result of a synchronization call as logged: pthread calls return an
 * error number, semaphore calls -1 and errno. */
static long outcome(int r) {
    return r == -1 ? errno : r;
}

/* Returns logged outcome `logged` of a call that returns like `like`
 * (an error number, or -1 and errno for a semaphore call). */
static int as_returned(long logged, int like_sem) {
    if (like_sem && logged) {
        errno = (int)logged;
        return -1;
    }
    return (int)logged;
}

/* --------------------------------------------------- the real functions */

#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...)                                                 \
    static ret (*real_##name)(__VA_ARGS__);                                          \
    static ret (*get_##name(void))(__VA_ARGS__) {                                    \
        self.phase = WEFT_PHASE_AFTER;                                               \
        if (!real_##name) real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name); \
        return real_##name;                                                          \
    }

/* ------------------------------------------------------------ the time */

/* The time calls are real syscalls at the BUFFERED site, not vDSO calls:
 * the vDSO reads the TSC, and the recorder traps rdtsc (PR_SET_TSC) so
 * that a program's own reads are logged; a vDSO call would cost a ptrace
 * stop per call (×90 on the bench/ syscall-heavy program). */

static int out_timespec(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[1], sizeof(struct timespec)};
    return a[1] ? 1 : 0;
}

DECLARE_REAL(int, clock_gettime, clockid_t, struct timespec *)
SCRUB32(clock_gettime)
IMPL int impl_clock_gettime(clockid_t clk, struct timespec *tp) {
    if (!enter()) {
        return get_clock_gettime()(clk, tp);
    }
    long a[6] = {clk, (long)tp, 0, 0, 0, 0};
    long r = buffered(SYS_clock_gettime, a, NULL, out_timespec);
    leave();
    return (int)with_errno(r);
}

static int out_timeofday(long r, const long a[6], struct chunk *out) {
    (void)r;
    int n = 0;
    if (a[0]) out[n++] = (struct chunk){(void *)a[0], sizeof(struct timeval)};
    if (a[1]) out[n++] = (struct chunk){(void *)a[1], sizeof(struct timezone)};
    return n;
}

DECLARE_REAL(int, gettimeofday, struct timeval *, void *)
SCRUB32(gettimeofday)
IMPL int impl_gettimeofday(struct timeval *tv, void *tz) {
    if (!enter()) {
        return get_gettimeofday()(tv, tz);
    }
    long a[6] = {(long)tv, (long)tz, 0, 0, 0, 0};
    long r = buffered(SYS_gettimeofday, a, NULL, out_timeofday);
    leave();
    return (int)with_errno(r);
}

static int out_time(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[0], sizeof(time_t)};
    return a[0] ? 1 : 0;
}

DECLARE_REAL(time_t, time, time_t *)
SCRUB64(time)
IMPL time_t impl_time(time_t *t) {
    if (!enter()) {
        return get_time()(t);
    }
    long a[6] = {(long)t, 0, 0, 0, 0, 0};
    long r = buffered(SYS_time, a, NULL, out_time);
    leave();
    return (time_t)r;
}

/* ------------------------------------------------------- the stat family */

static int out_stat(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[2], sizeof(struct stat)};
    return 1;
}

static int out_fstat(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[1], sizeof(struct stat)};
    return 1;
}

static int out_statx(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[4], sizeof(struct statx)};
    return 1;
}

static long fstatat_call(int dirfd, const char *path, struct stat *buf, int flags) {
    long a[6] = {dirfd, (long)path, (long)buf, flags, 0, 0};
    return buffered(SYS_newfstatat, a, path, out_stat);
}

DECLARE_REAL(int, fstatat, int, const char *, struct stat *, int)
SCRUB32(fstatat)
IMPL int impl_fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
    if (!enter()) {
        return get_fstatat()(dirfd, path, buf, flags);
    }
    long r = fstatat_call(dirfd, path, buf, flags);
    leave();
    return (int)with_errno(r);
}
SCRUB32(fstatat64)
IMPL int impl_fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags) {
    return impl_fstatat(dirfd, path, (struct stat *)buf, flags);
}
SCRUB32(stat)
IMPL int impl_stat(const char *path, struct stat *buf) {
    return impl_fstatat(AT_FDCWD, path, buf, 0);
}
SCRUB32(stat64)
IMPL int impl_stat64(const char *path, struct stat64 *buf) {
    return impl_fstatat(AT_FDCWD, path, (struct stat *)buf, 0);
}
SCRUB32(lstat)
IMPL int impl_lstat(const char *path, struct stat *buf) {
    return impl_fstatat(AT_FDCWD, path, buf, AT_SYMLINK_NOFOLLOW);
}
SCRUB32(lstat64)
IMPL int impl_lstat64(const char *path, struct stat64 *buf) {
    return impl_fstatat(AT_FDCWD, path, (struct stat *)buf, AT_SYMLINK_NOFOLLOW);
}

DECLARE_REAL(int, fstat, int, struct stat *)
SCRUB32(fstat)
IMPL int impl_fstat(int fd, struct stat *buf) {
    if (!enter()) {
        return get_fstat()(fd, buf);
    }
    long a[6] = {fd, (long)buf, 0, 0, 0, 0};
    long r = buffered(SYS_fstat, a, NULL, out_fstat);
    leave();
    return (int)with_errno(r);
}
SCRUB32(fstat64)
IMPL int impl_fstat64(int fd, struct stat64 *buf) {
    return impl_fstat(fd, (struct stat *)buf);
}

DECLARE_REAL(int, statx, int, const char *, int, unsigned int, struct statx *)
SCRUB32(statx)
IMPL int impl_statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
    if (!enter()) {
        return get_statx()(dirfd, path, flags, mask, buf);
    }
    long a[6] = {dirfd, (long)path, flags, mask, (long)buf, 0};
    long r = buffered(SYS_statx, a, path, out_statx);
    leave();
    return (int)with_errno(r);
}

/* --------------------------------------------------------------- reads */

static int out_result_bytes(long r, const long a[6], struct chunk *out) {
    out[0] = (struct chunk){(void *)a[1], (unsigned long)r};
    return r > 0 ? 1 : 0;
}

static int out_getrandom(long r, const long a[6], struct chunk *out) {
    out[0] = (struct chunk){(void *)a[0], (unsigned long)r};
    return r > 0 ? 1 : 0;
}

static int out_pollfds(long r, const long a[6], struct chunk *out) {
    (void)r;
    out[0] = (struct chunk){(void *)a[0], (unsigned long)a[1] * sizeof(struct pollfd)};
    return a[1] ? 1 : 0;
}

/* Whether a read of `fd` returns at once: a zero-timeout poll, itself
 * buffered and logged, so a replay takes the same branch. A regular file
 * is always ready; a pipe or socket only with data or at its end. */
static int ready(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    long a[6] = {(long)&p, 1, 0, 0, 0, 0};
    long r = buffered(SYS_poll, a, NULL, out_pollfds);
    return r == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL));
}

DECLARE_REAL(ssize_t, read, int, void *, size_t)

/* A read, buffered when it returns at once; the runtime is entered. */
static ssize_t read_entered(int fd, void *buf, size_t n) {
    if (!ready(fd)) {
        leave();
        return get_read()(fd, buf, n);
    }
    long a[6] = {fd, (long)buf, (long)n, 0, 0, 0};
    long r = buffered(SYS_read, a, NULL, out_result_bytes);
    leave();
    return with_errno(r);
}

SCRUB64(read)
IMPL ssize_t impl_read(int fd, void *buf, size_t n) {
    if (n > WEFT_MAX_BUFFERED_READ || !enter()) {
        return get_read()(fd, buf, n);
    }
    return read_entered(fd, buf, n);
}

/* enter(), or the runtime entered once more from inside a stream call
 * the runtime took the lock for (at the depth it noted): that call's
 * refills and flushes are buffered too. A signal handler's call made in
 * between runs at that depth as well, in the recording and the replay
 * alike. */
static int enter_stream_call(void) {
    if (self.depth && self.depth == self.stdio && mode && !control.disabled) {
        self.depth++;
        return 1;
    }
    return enter();
}

/* Where stdio's reads go (patch_stdio). */
SCRUB64(weft_stdio_read)
IMPL ssize_t impl_weft_stdio_read(int fd, void *buf, size_t n) {
    if (n > WEFT_MAX_BUFFERED_READ || !enter_stream_call()) {
        return get_read()(fd, buf, n);
    }
    return read_entered(fd, buf, n);
}
ssize_t weft_stdio_read(int fd, void *buf, size_t n);

/* Output. In a process with one thread (glibc's __libc_single_threaded,
 * the same in the replay), a write that returns at once is made at the
 * BUFFERED site and logged with the bytes it wrote (the trace keeps them;
 * a replay checks the bytes its program writes against them, as for a
 * write logged at a ptrace stop, and prints them): at most PIPE_BUF
 * bytes, to a descriptor a zero-timeout poll finds writable (a pipe then
 * takes them whole; a regular file always does). Such a write takes its
 * place in the order under one of the write locks every recorded process
 * shares (by descriptor number), so that the log holds the writes of
 * several processes to one file in the order they reached it (a child
 * that flushes the stdout buffer it inherited while its parent prints).
 * A lock held too long (its holder stopped, or killed) is passed by: the
 * write is made all the same, and the replay makes it at the same place;
 * only the order of the bytes in the file may then differ from the log's.
 * A replay takes the locks too, in a page of its own (weft_start), as
 * free: the same code runs, and the replayer's order is the log's.
 * A process with threads writes through the ptrace path, where the
 * recorder holds a second write to a descriptor until the first one
 * returned: spinning on a lock whose holder the scheduler took off its
 * core let writes pass each other under load (2 threads printing to a
 * pipe beside the test suite: the replay printed their lines in another
 * order, 1 recording in 30). It takes the write lock only when it is
 * free, for the single-threaded processes' writes to wait for. */
#define WRITE_LOCK_SPINS 100000

static volatile unsigned int *write_lock(int fd) {
    return (volatile unsigned int *)(shared + WEFT_WRITE_LOCKS_AT) + (unsigned)fd % WEFT_WRITE_LOCKS;
}

static int take_write_lock(volatile unsigned int *lock) {
    if (mode == WEFT_MODE_REPLAY) {
        *lock = 1;
        return 1;
    }
    for (int i = 0; i < WRITE_LOCK_SPINS; i++) {
        if (!__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE)) {
            return 1;
        }
        __builtin_ia32_pause();
    }
    return 0;
}

static int writable(int fd, size_t n) {
    if (n > PIPE_BUF) {
        return 0;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    long a[6] = {(long)&p, 1, 0, 0, 0, 0};
    long r = buffered(SYS_poll, a, NULL, out_pollfds);
    return r == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) == POLLOUT;
}

DECLARE_REAL(ssize_t, write, int, const void *, size_t)

static void release_write_lock(void *lock) {
    __atomic_store_n((volatile unsigned int *)lock, 0, __ATOMIC_RELEASE);
}

static void release_held_write_lock(void *unused) {
    (void)unused;
    if (self.write_held) {
        release_write_lock((void *)self.write_held);
        self.write_held = NULL;
    }
}

/* A write through the ptrace path, under write lock `lock` (or none) when
 * it is free: the recorder logs the call when it returns, in the lock's
 * order. The lock goes with a cancellation in the call. Whether it was
 * free is a race in the recording: kept in the thread's state, not on the
 * stack, so that the stack above the write is the same in the replay (a
 * signal that hit the write compares it). */
static ssize_t write_traced(volatile unsigned int *lock, int fd, const void *buf, size_t n) {
    volatile unsigned int *outer = self.write_held; /* a handler's write inside a write */
    self.write_held = lock && (!__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE) || mode == WEFT_MODE_REPLAY) ? lock : NULL;
    ssize_t r;
    pthread_cleanup_push(release_held_write_lock, NULL);
    r = get_write()(fd, buf, n);
    pthread_cleanup_pop(1);
    self.write_held = outer;
    return r;
}

/* A write, buffered when it returns at once; the runtime is entered. */
static ssize_t write_entered(int fd, const void *buf, size_t n) {
    volatile unsigned int *lock = shared ? write_lock(fd) : NULL;
    if (!__libc_single_threaded || !writable(fd, n)) {
        leave();
        return write_traced(lock, fd, buf, n);
    }
    int locked = lock && take_write_lock(lock);
    long a[6] = {fd, (long)buf, (long)n, 0, 0, 0};
    long r = buffered(SYS_write, a, NULL, out_result_bytes);
    if (locked) {
        release_write_lock((void *)lock);
    }
    leave();
    return with_errno(r);
}

SCRUB64(write)
IMPL ssize_t impl_write(int fd, const void *buf, size_t n) {
    if (!enter()) {
        return get_write()(fd, buf, n);
    }
    return write_entered(fd, buf, n);
}

/* Where stdio's writes go (patch_stdio), as weft_stdio_read. */
SCRUB64(weft_stdio_write)
IMPL ssize_t impl_weft_stdio_write(int fd, const void *buf, size_t n) {
    if (!enter_stream_call()) {
        return get_write()(fd, buf, n);
    }
    return write_entered(fd, buf, n);
}

/* Moves the target of the `jmp` or `call` (opcode `op`, rel32) to `from`
 * among the first 160 bytes of libc function `name` to `to`, when it is
 * found there (the five bytes, the opcode and that exact target) and `to`
 * is within its reach. */
static void redirect(const char *name, unsigned char op, unsigned long from, void *to) {
    unsigned char *f = dlsym(RTLD_NEXT, name);
    if (!f || !from) {
        return;
    }
    for (int i = 0; i < 160; i++) {
        unsigned char *next = f + i + 5;
        int rel;
        copy_bytes(&rel, f + i + 1, 4);
        if (f[i] != op || (unsigned long)next + (long)rel != from) {
            continue;
        }
        long moved = (long)to - (long)next;
        if (moved != (int)moved) {
            return;
        }
        unsigned long page = (unsigned long)(f + i) & ~4095UL;
        unsigned long len = (unsigned long)next - page > 4096 ? 8192 : 4096;
        if (PRIVATE(SYS_mprotect, page, len, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) != 0) {
            return;
        }
        rel = (int)moved;
        copy_bytes(f + i + 1, &rel, 4);
        PRIVATE(SYS_mprotect, page, len, PROT_READ | PROT_EXEC, 0, 0, 0);
        return;
    }
}

ssize_t weft_stdio_write(int fd, const void *buf, size_t n);
ssize_t getdents64(int fd, void *buf, size_t n);

DECLARE_REAL(ssize_t, pread64, int, void *, size_t, off_t)
SCRUB64(pread64)
IMPL ssize_t impl_pread64(int fd, void *buf, size_t n, off_t off) {
    if (n > WEFT_MAX_BUFFERED_READ || !enter()) {
        return get_pread64()(fd, buf, n, off);
    }
    long a[6] = {fd, (long)buf, (long)n, off, 0, 0};
    long r = buffered(SYS_pread64, a, NULL, out_result_bytes);
    leave();
    return with_errno(r);
}
SCRUB64(pread)
IMPL ssize_t impl_pread(int fd, void *buf, size_t n, off_t off) {
    return impl_pread64(fd, buf, n, off);
}

DECLARE_REAL(ssize_t, getdents64, int, void *, size_t)
SCRUB64(getdents64)
IMPL ssize_t impl_getdents64(int fd, void *buf, size_t n) {
    if (n > WEFT_MAX_BUFFERED_READ || !enter()) {
        return get_getdents64()(fd, buf, n);
    }
    long a[6] = {fd, (long)buf, (long)n, 0, 0, 0};
    long r = buffered(SYS_getdents64, a, NULL, out_result_bytes);
    leave();
    return with_errno(r);
}

/* glibc's stdio reads and writes a file through _IO_file_read (which ends
 * in a jump to its own read) and _IO_file_write (which calls its own
 * write), inside libc, past the interposed symbols: every refill or flush
 * of a stream's buffer was a ptrace stop (a program reading 34 MB with
 * fgets recorded twelve times slower than native). Their targets are moved
 * to the runtime's, in the recording and the replay alike (the same code
 * must run in both), where glibc 2.36 puts them: a `jmp` or `call` rel32
 * to read or write in the function's first bytes. */
static void patch_stdio(void) {
    redirect("_IO_file_read", 0xe9, (unsigned long)get_read(), (void *)weft_stdio_read);
    redirect("_IO_file_write", 0xe8, (unsigned long)get_write(), (void *)weft_stdio_write);
    /* readdir(3) reads a directory the same way, with getdents64 (every
     * 32 KiB of entries was a ptrace stop in find or ls -R). */
    redirect("readdir64", 0xe8, (unsigned long)get_getdents64(), (void *)getdents64);
    redirect("readdir64_r", 0xe8, (unsigned long)get_getdents64(), (void *)getdents64);
}

DECLARE_REAL(ssize_t, getrandom, void *, size_t, unsigned int)
SCRUB64(getrandom)
IMPL ssize_t impl_getrandom(void *buf, size_t n, unsigned int flags) {
    if (n > WEFT_MAX_BUFFERED_READ || !enter()) {
        return get_getrandom()(buf, n, flags);
    }
    long a[6] = {(long)buf, (long)n, flags, 0, 0, 0};
    long r = buffered(SYS_getrandom, a, NULL, out_getrandom);
    leave();
    return with_errno(r);
}

DECLARE_REAL(int, poll, struct pollfd *, nfds_t, int)
SCRUB32(poll)
IMPL int impl_poll(struct pollfd *fds, nfds_t n, int timeout) {
    if (timeout != 0 || n > 1024 || !enter()) {
        return get_poll()(fds, n, timeout);
    }
    long a[6] = {(long)fds, (long)n, 0, 0, 0, 0};
    long r = buffered(SYS_poll, a, NULL, out_pollfds);
    leave();
    return (int)with_errno(r);
}

/* ------------------------------------------------- opening and closing */

static int out_none(long r, const long a[6], struct chunk *out) {
    (void)r, (void)a, (void)out;
    return 0;
}

/* Thread and process ids: a logger asks for them on every line, and a
 * new thread (Rust's std, as it starts) asks for its own right before
 * taking work, so the log's order of these calls is the order in which
 * the threads went on, not the order in which the recorder took stops. */
#define ID_CALL(name, nr)                                  \
    DECLARE_REAL(pid_t, name, void)                        \
    SCRUB32(name)                                          \
    IMPL pid_t impl_##name(void) {                         \
        if (!enter()) {                                    \
            return get_##name()();                         \
        }                                                  \
        long a[6] = {0};                                   \
        long r = buffered(nr, a, NULL, out_none);          \
        leave();                                           \
        return (pid_t)r;                                   \
    }
ID_CALL(gettid, SYS_gettid)
ID_CALL(getpid, SYS_getpid)

/* openat's mode argument exists only with O_CREAT or O_TMPFILE (open(2)). */
static long open_mode(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

DECLARE_REAL(int, openat, int, const char *, int, ...)
static int openat_call(int dirfd, const char *path, int flags, long mode) {
    if (!enter()) {
        return get_openat()(dirfd, path, flags, (int)mode);
    }
    long a[6] = {dirfd, (long)path, flags, mode, 0, 0};
    long r = buffered(SYS_openat, a, path, out_none);
    leave();
    return (int)with_errno(r);
}
/* open and openat, and their 64 variants (the same on x86-64): the mode
 * is read from the variable arguments only when open(2) says it is there. */
#define OPEN(name, dirfd_param, dirfd)                                            \
    SCRUB32(name)                                                               \
    IMPL int impl_##name(dirfd_param const char *path, int flags, ...) {        \
        va_list ap;                                                             \
        va_start(ap, flags);                                                    \
        long mode = open_mode(flags, ap);                                       \
        va_end(ap);                                                             \
        return openat_call(dirfd, path, flags, mode);                           \
    }

OPEN(openat, int dirfd P(,), dirfd)
OPEN(openat64, int dirfd P(,), dirfd)
OPEN(open, , AT_FDCWD)
OPEN(open64, , AT_FDCWD)

DECLARE_REAL(int, close, int)
SCRUB32(close)
IMPL int impl_close(int fd) {
    if (!enter()) {
        return get_close()(fd);
    }
    long a[6] = {fd, 0, 0, 0, 0, 0};
    long r = buffered(SYS_close, a, NULL, out_none);
    leave();
    return (int)with_errno(r);
}

/* -------------------------------------------------------------- vfork */

/* vfork(2) becomes a fork (glibc's _Fork: no atfork handlers, as vfork):
 * a vfork child runs on its parent's memory, TLS and buffer slot until it
 * execs, so its calls would be logged as its parent's; and the replay runs
 * a vfork as a fork anyway, so the recording now does the same thing. */
SCRUB32(vfork)
IMPL pid_t impl_vfork(void) {
    static pid_t (*fork_fn)(void);
    if (!fork_fn) {
        fork_fn = (pid_t(*)(void))dlsym(RTLD_NEXT, "_Fork");
    }
    if (!fork_fn) {
        fork_fn = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
    }
    return fork_fn();
}

/* ------------------------------------------------------ pthread locks */

/* Whether a non-blocking acquire's result `r` says the variable was
 * taken: EBUSY from a pthread trylock, -1 and EAGAIN from sem_trywait. */
static int busy(int r, int like_sem) {
    return like_sem ? r == -1 && errno == EAGAIN : r == EBUSY;
}

/* Whether an acquire's logged outcome says it took the variable: 0, or
 * EOWNERDEAD (a robust mutex whose owner died holding it is taken). */
static int granted(long logged) {
    return logged == 0 || logged == EOWNERDEAD;
}

/* In a replay, marks robust mutex `m` as the kernel marked it when its
 * owner died in the recording (FUTEX_OWNER_DIED in the lock word; futex(2),
 * "Robust futexes"), so that the real call takes it and returns
 * EOWNERDEAD. The replay's kernel does not: the lock word holds the
 * owner's recorded tid (glibc writes the tid the replay gives the thread),
 * not the exiting task's, and its robust-list walk passes it by. */
static void mark_owner_died(const void *m) {
    __atomic_fetch_or((int *)m, FUTEX_OWNER_DIED, __ATOMIC_SEQ_CST);
}

/* In a recording, logs the acquire-like call that just returned, made
 * quiet (see quiet), with outcome `logged`: its place is taken before the
 * wait is no longer quiet, so a signal in between comes after it. */
static void acquired(int op, const void *var, long logged) {
    unsigned long seq = next_seq();
    logging(1);
    quiet(0);
    sync_record_at(seq, op, var, logged);
    logging(0);
}

/* An acquire-like call. Recording: the real call, then its place in the
 * order (with the call made quiet when it may wait with a timeout).
 * Replay: first the place in the order, where the variable is free, then
 * the real call, unless the recorded outcome was a failure (a busy
 * trylock, a timeout), which is returned as recorded. `first` is how the
 * recording makes the call (ACQUIRE_CALL or TRY_FIRST). */
#define ACQUIRE_WITH(ret, name, op, var, sem, params, args, resolve, first)     \
    DECLARE_REAL(ret, name, params)                                             \
    SCRUB32(name)                                                               \
    IMPL ret impl_##name(params) {                                              \
        if (!enter()) return get_##name() args;                                 \
        resolve;                                                                \
        ret r;                                                                  \
        if (mode == WEFT_MODE_RECORD) {                                         \
            quiet(1);                                                           \
            first;                                                              \
            acquired(op, (const void *)(var), outcome(r));                      \
        } else {                                                                \
            long logged = sync_marker(op, (const void *)(var), 0);              \
            if (logged == EOWNERDEAD) mark_owner_died((const void *)(var));     \
            r = granted(logged) ? get_##name() args : as_returned(logged, sem); \
        }                                                                       \
        leave();                                                                \
        return r;                                                               \
    }

#define ACQUIRE_CALL(name, args) r = get_##name() args
/* A blocking acquire tries its non-blocking form `try` first; when the
 * variable is taken, a LOCK_WAIT record (with the acquire's op) places
 * the end of the thread's code before the call, then the call waits.
 * The acquisition's own place comes when it returns, maybe much later:
 * without the LOCK_WAIT, a replay would run that code as late as the
 * acquisition. The replay's marker is unchanged (the replayer matches a
 * LOCK_WAIT at the acquire's marker, replay/src/session/emulate.rs). */
#define TRY_FIRST(name, try, op, var, sem, args)                               \
    r = get_##try() args;                                                       \
    if (busy(r, sem)) {                                                         \
        sync_record(WEFT_SYNC_LOCK_WAIT, (const void *)(var), op);              \
        r = get_##name() args;                                                  \
    }
#define ACQUIRE(ret, name, op, var, sem, params, args)                          \
    ACQUIRE_WITH(ret, name, op, var, sem, P(params), args, , ACQUIRE_CALL(name, args))
/* Both real functions are resolved first, in record and replay alike:
 * dlsym's deep frames outreach the stubs' wipe, and must leave the same
 * bytes in both (tests/c/stackgarbage.c). */
#define BLOCKING_ACQUIRE(ret, name, try, op, var, sem, params, args)            \
    ACQUIRE_WITH(ret, name, op, var, sem, P(params), args, (void)get_##try(); (void)get_##name(), \
                 TRY_FIRST(name, try, op, var, sem, args))

/* A release-like call: its place in the order, then the real call (in a
 * replay the marker follows it, so the next acquirer finds it done). */
static void releasing(int op, const void *var) {
    if (mode == WEFT_MODE_RECORD) sync_record(op, var, 0);
}

static void released(int op, const void *var) {
    if (mode == WEFT_MODE_REPLAY) sync_marker(op, var, 0);
}

#define RELEASE(ret, name, op, var, params, args)                               \
    DECLARE_REAL(ret, name, params)                                             \
    SCRUB32(name)                                                               \
    IMPL ret impl_##name(params) {                                              \
        if (!enter()) return get_##name() args;                                 \
        releasing(op, (const void *)(var));                                     \
        ret r = get_##name() args;                                              \
        released(op, (const void *)(var));                                      \
        leave();                                                                \
        return r;                                                               \
    }

/* An interposed function that returns nothing: `body` runs between
 * enter() and leave(), with `real` the real function, which runs alone
 * when the runtime is off (the stub returns 0 in rax, in both modes). */
#define VOID_WRAPPER(name, params, args, body)                                  \
    DECLARE_REAL(void, name, params)                                            \
    SCRUB64(name)                                                               \
    IMPL long impl_##name(params) {                                             \
        void (*real)(params) = get_##name();                                    \
        if (!enter()) {                                                         \
            real args;                                                          \
            return 0;                                                           \
        }                                                                       \
        body;                                                                   \
        leave();                                                                \
        return 0;                                                               \
    }

/* A release that returns nothing (libgomp's, a static's guard). */
#define VOID_RELEASE(name, op, var, params, args)                               \
    VOID_WRAPPER(name, P(params), args,                                         \
                 releasing(op, (const void *)(var)); real args; released(op, (const void *)(var)))


ACQUIRE(int, pthread_mutex_trylock, WEFT_SYNC_MUTEX_TRYLOCK, m, 0, P(pthread_mutex_t *m), (m))
BLOCKING_ACQUIRE(int, pthread_mutex_lock, pthread_mutex_trylock, WEFT_SYNC_MUTEX_LOCK, m, 0, P(pthread_mutex_t *m), (m))
ACQUIRE(int, pthread_mutex_timedlock, WEFT_SYNC_MUTEX_TRYLOCK, m, 0, P(pthread_mutex_t *m, const struct timespec *t), (m, t))
ACQUIRE(int, pthread_mutex_clocklock, WEFT_SYNC_MUTEX_TRYLOCK, m, 0, P(pthread_mutex_t *m, clockid_t c, const struct timespec *t), (m, c, t))
RELEASE(int, pthread_mutex_unlock, WEFT_SYNC_MUTEX_UNLOCK, m, P(pthread_mutex_t *m), (m))

ACQUIRE(int, pthread_rwlock_tryrdlock, WEFT_SYNC_RWLOCK_READ, l, 0, P(pthread_rwlock_t *l), (l))
BLOCKING_ACQUIRE(int, pthread_rwlock_rdlock, pthread_rwlock_tryrdlock, WEFT_SYNC_RWLOCK_READ, l, 0, P(pthread_rwlock_t *l), (l))
ACQUIRE(int, pthread_rwlock_timedrdlock, WEFT_SYNC_RWLOCK_READ, l, 0, P(pthread_rwlock_t *l, const struct timespec *t), (l, t))
ACQUIRE(int, pthread_rwlock_trywrlock, WEFT_SYNC_RWLOCK_WRITE, l, 0, P(pthread_rwlock_t *l), (l))
BLOCKING_ACQUIRE(int, pthread_rwlock_wrlock, pthread_rwlock_trywrlock, WEFT_SYNC_RWLOCK_WRITE, l, 0, P(pthread_rwlock_t *l), (l))
ACQUIRE(int, pthread_rwlock_timedwrlock, WEFT_SYNC_RWLOCK_WRITE, l, 0, P(pthread_rwlock_t *l, const struct timespec *t), (l, t))
RELEASE(int, pthread_rwlock_unlock, WEFT_SYNC_RWLOCK_UNLOCK, l, P(pthread_rwlock_t *l), (l))

ACQUIRE(int, pthread_spin_trylock, WEFT_SYNC_SPIN_LOCK, l, 0, P(pthread_spinlock_t *l), (l))
BLOCKING_ACQUIRE(int, pthread_spin_lock, pthread_spin_trylock, WEFT_SYNC_SPIN_LOCK, l, 0, P(pthread_spinlock_t *l), (l))
RELEASE(int, pthread_spin_unlock, WEFT_SYNC_SPIN_UNLOCK, l, P(pthread_spinlock_t *l), (l))

ACQUIRE(int, sem_trywait, WEFT_SYNC_SEM_WAIT, s, 1, P(sem_t *s), (s))
BLOCKING_ACQUIRE(int, sem_wait, sem_trywait, WEFT_SYNC_SEM_WAIT, s, 1, P(sem_t *s), (s))
ACQUIRE(int, sem_timedwait, WEFT_SYNC_SEM_WAIT, s, 1, P(sem_t *s, const struct timespec *t), (s, t))
ACQUIRE(int, sem_clockwait, WEFT_SYNC_SEM_WAIT, s, 1, P(sem_t *s, clockid_t c, const struct timespec *t), (s, c, t))
RELEASE(int, sem_post, WEFT_SYNC_SEM_POST, s, P(sem_t *s), (s))

RELEASE(int, pthread_cond_signal, WEFT_SYNC_COND_SIGNAL, c, P(pthread_cond_t *c), (c))
RELEASE(int, pthread_cond_broadcast, WEFT_SYNC_COND_BROADCAST, c, P(pthread_cond_t *c), (c))

/* The logged result of a condition wait that pthread_cancel ended (no
 * condition wait returns it): the thread holds the mutex again, and its
 * cancellation handlers run next. */
#define COND_CANCELED ECANCELED

/* A cancellation handler of the real condition wait, run once glibc took
 * the mutex again: the acquire takes its place, and the runtime is left
 * (the cancellation unwinds past the wrapper's own leave()), so that the
 * program's handlers, which often unlock that mutex, are logged too. */
static void cond_wait_canceled(void *m) {
    quiet(0);
    sync_record(WEFT_SYNC_COND_ACQUIRE, m, COND_CANCELED);
    leave();
}

/* In a replay, pthread_cancel ended the wait at the acquire's marker (the
 * unwinding passed it): the acquire takes its place, which the log gives
 * the canceled result, then the mutex is taken again as glibc's own
 * handler did in the recording. */
static void cond_wait_unwound(void *m) {
    sync_marker(WEFT_SYNC_COND_ACQUIRE, m, 0);
    get_pthread_mutex_lock()(m);
    leave();
}

/* In a replay, the acquire's marker stands for the real wait: a
 * cancellation point where glibc lets pthread_cancel act at once
 * (asynchronous cancellation, as around its futex waits), so that
 * pthread_cancel sends SIGCANCEL as it did in the recording, and the
 * SIGCANCEL the log delivers in the marker unwinds the thread. (The
 * unwinder finds no frame information at the marker's syscall site and
 * goes straight to the innermost cleanup, cond_wait_unwound's.) */
static long cond_acquire_marker(pthread_mutex_t *m) {
    long r;
    int type;
    pthread_cleanup_push(cond_wait_unwound, m);
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
    r = sync_marker(WEFT_SYNC_COND_ACQUIRE, m, 0);
    pthread_setcanceltype(type, NULL);
    pthread_cleanup_pop(0);
    return r;
}

/* A condition wait releases the mutex and acquires it again. Recording:
 * the release's place, the real (quiet) wait, the acquire's place with
 * its result. Replay: no wait at all. The log says when the wait returned
 * and how (a timeout or not): the thread releases the mutex, waits for
 * the acquire's place, and takes the mutex again, which is free by then
 * (POSIX allows a condition wait to return without a signal, so the
 * program cannot tell). A wait that pthread_cancel ended in the recording
 * ends so again (cond_acquire_marker). */
#define COND_WAIT(name, params, args)                                           \
    DECLARE_REAL(int, name, params)                                             \
    SCRUB32(name)                                                               \
    IMPL int impl_##name(params) {                                              \
        if (!enter()) return get_##name() args;                                 \
        int r;                                                                  \
        if (mode == WEFT_MODE_RECORD) {                                         \
            sync_record(WEFT_SYNC_COND_RELEASE, m, 0);                          \
            quiet(1);                                                           \
            pthread_cleanup_push(cond_wait_canceled, m);                        \
            r = get_##name() args;                                              \
            pthread_cleanup_pop(0);                                             \
            quiet(0);                                                           \
            sync_record(WEFT_SYNC_COND_ACQUIRE, m, r);                          \
        } else {                                                                \
            sync_marker(WEFT_SYNC_COND_RELEASE, m, 0);                          \
            get_pthread_mutex_unlock()(m);                                      \
            r = (int)cond_acquire_marker(m);                                    \
            get_pthread_mutex_lock()(m);                                        \
        }                                                                       \
        leave();                                                                \
        return r;                                                               \
    }

COND_WAIT(pthread_cond_wait, P(pthread_cond_t *c, pthread_mutex_t *m), (c, m))
COND_WAIT(pthread_cond_timedwait, P(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t), (c, m, t))
COND_WAIT(pthread_cond_clockwait, P(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t), (c, m, k, t))

/* A barrier: arriving is a release, leaving an acquire (the serial
 * thread's result is logged). In a replay the wait is real: every thread
 * arrives in the log's order and leaves at its place. */
DECLARE_REAL(int, pthread_barrier_wait, pthread_barrier_t *)
SCRUB32(pthread_barrier_wait)
IMPL int impl_pthread_barrier_wait(pthread_barrier_t *b) {
    if (!enter()) {
        return get_pthread_barrier_wait()(b);
    }
    int r;
    if (mode == WEFT_MODE_RECORD) {
        sync_record(WEFT_SYNC_BARRIER_ARRIVE, b, 0);
        r = get_pthread_barrier_wait()(b);
        sync_record(WEFT_SYNC_BARRIER_LEAVE, b, r == PTHREAD_BARRIER_SERIAL_THREAD);
    } else {
        sync_marker(WEFT_SYNC_BARRIER_ARRIVE, b, 0);
        r = get_pthread_barrier_wait()(b);
        sync_marker(WEFT_SYNC_BARRIER_LEAVE, b, r == PTHREAD_BARRIER_SERIAL_THREAD);
    }
    leave();
    return r;
}

/* ------------------------------------------------------------ stdio */

/* A stdio stream's lock (glibc's _IO_lock_t, which every stdio call on a
 * FILE takes inline) is a synchronization variable like a mutex: threads
 * that print to one stream fill its buffer in the order they took it, and
 * a stream to a pipe or a file is written out in one write much later, so
 * no logged call shows that order (4 threads printing lines to a pipe:
 * 0 recordings of 5 replayed, and no search found one). Reading is the
 * same: threads that share an input stream take the lines its buffer
 * holds in the order they took its lock, with no logged call between
 * (3 threads reading stdin with fgets: 4 recordings of 4 gave each its
 * lines in another order in the replay). The stream calls take the lock
 * themselves first (flockfile, which glibc's own locking then finds held
 * by the thread: the lock is recursive) and log it as a mutex at the
 * FILE's address, which a replay grants in order. Not while the process
 * has one thread (glibc's __libc_single_threaded, false from its first
 * pthread_create on, in a replay as in the recording): there the order
 * is the program's, and a line-printing tool would log two records a line
 * (200,000 lines replayed in 10 s instead of 0.2 s). */
DECLARE_REAL(void, flockfile, FILE *)
DECLARE_REAL(void, funlockfile, FILE *)
/* ftrylockfile(3), which a program may call too, returns 0 or EBUSY like
 * a mutex trylock. */
ACQUIRE(int, ftrylockfile, WEFT_SYNC_MUTEX_TRYLOCK, f, 0, FILE *f, (f))

static int stdio_lock(FILE *f) {
    if (!f || __libc_single_threaded || !enter()) {
        return 0;
    }
    if (mode == WEFT_MODE_RECORD) {
        quiet(1);
        if (get_ftrylockfile()(f)) {
            sync_record(WEFT_SYNC_LOCK_WAIT, f, WEFT_SYNC_MUTEX_LOCK);
            get_flockfile()(f);
        }
        quiet(0);
        sync_record(WEFT_SYNC_MUTEX_LOCK, f, 0);
    } else {
        sync_marker(WEFT_SYNC_MUTEX_LOCK, f, 0);
        get_flockfile()(f);
    }
    self.stdio = self.depth;
    return 1;
}

static void stdio_unlock(FILE *f, int held) {
    if (!held) {
        return;
    }
    if (mode == WEFT_MODE_RECORD) sync_record(WEFT_SYNC_MUTEX_UNLOCK, f, 0);
    get_funlockfile()(f);
    if (mode == WEFT_MODE_REPLAY) sync_marker(WEFT_SYNC_MUTEX_UNLOCK, f, 0);
    self.stdio = 0;
    leave();
}

/* A call on stream `file`, made with the stream's lock taken in the log's
 * order. The variadic ones (printf, scanf and their kin) are in
 * weft_stdio.c: they call the v-forms here. */
#define STDIO(ret, scrub, name, params, file, args)                             \
    DECLARE_REAL(ret, name, params)                                             \
    scrub(name)                                                                 \
    IMPL ret impl_##name(params) {                                              \
        (void)get_##name();                                                     \
        FILE *stream = (file);                                                  \
        int held = stdio_lock(stream);                                          \
        ret r = get_##name() args;                                              \
        stdio_unlock(stream, held);                                             \
        return r;                                                               \
    }

STDIO(int, SCRUB32, vfprintf, P(FILE *f, const char *fmt, va_list ap), f, (f, fmt, ap))
STDIO(int, SCRUB32, vprintf, P(const char *fmt, va_list ap), stdout, (fmt, ap))
STDIO(int, SCRUB32, __vfprintf_chk, P(FILE *f, int flag, const char *fmt, va_list ap), f, (f, flag, fmt, ap))
STDIO(int, SCRUB32, __vprintf_chk, P(int flag, const char *fmt, va_list ap), stdout, (flag, fmt, ap))
STDIO(int, SCRUB32, puts, const char *s, stdout, (s))
STDIO(int, SCRUB32, fputs, P(const char *s, FILE *f), f, (s, f))
STDIO(int, SCRUB32, fputc, P(int c, FILE *f), f, (c, f))
STDIO(int, SCRUB32, putc, P(int c, FILE *f), f, (c, f))
STDIO(int, SCRUB32, putchar, int c, stdout, (c))
STDIO(size_t, SCRUB64, fwrite, P(const void *p, size_t size, size_t n, FILE *f), f, (p, size, n, f))
STDIO(int, SCRUB32, fflush, FILE *f, f, (f))
STDIO(int, SCRUB32, vfwprintf, P(FILE *f, const wchar_t *fmt, va_list ap), f, (f, fmt, ap))
STDIO(int, SCRUB32, vwprintf, P(const wchar_t *fmt, va_list ap), stdout, (fmt, ap))
STDIO(int, SCRUB32, fputws, P(const wchar_t *s, FILE *f), f, (s, f))
STDIO(wint_t, SCRUB32, fputwc, P(wchar_t c, FILE *f), f, (c, f))
STDIO(wint_t, SCRUB32, putwc, P(wchar_t c, FILE *f), f, (c, f))
STDIO(wint_t, SCRUB32, putwchar, wchar_t c, stdout, (c))
/* Input by lines, blocks and conversions (gcc's _FORTIFY_SOURCE makes
 * fgets and fread the _chk forms). Reads of single characters (getc and
 * its kin, which C++'s synchronized cin makes) are not ordered: a thread
 * that reads a large input alone would log two records a character. */
STDIO(char *, SCRUB64, fgets, P(char *s, int n, FILE *f), f, (s, n, f))
STDIO(char *, SCRUB64, __fgets_chk, P(char *s, size_t size, int n, FILE *f), f, (s, size, n, f))
STDIO(wchar_t *, SCRUB64, fgetws, P(wchar_t *s, int n, FILE *f), f, (s, n, f))
STDIO(size_t, SCRUB64, fread, P(void *p, size_t size, size_t n, FILE *f), f, (p, size, n, f))
STDIO(size_t, SCRUB64, __fread_chk, P(void *p, size_t len, size_t size, size_t n, FILE *f), f, (p, len, size, n, f))
STDIO(ssize_t, SCRUB64, getline, P(char **line, size_t *n, FILE *f), f, (line, n, f))
STDIO(ssize_t, SCRUB64, getdelim, P(char **line, size_t *n, int delim, FILE *f), f, (line, n, delim, f))
STDIO(ssize_t, SCRUB64, __getdelim, P(char **line, size_t *n, int delim, FILE *f), f, (line, n, delim, f))
STDIO(int, SCRUB32, vfscanf, P(FILE *f, const char *fmt, va_list ap), f, (f, fmt, ap))
STDIO(int, SCRUB32, vscanf, P(const char *fmt, va_list ap), stdin, (fmt, ap))
STDIO(int, SCRUB32, __isoc99_vfscanf, P(FILE *f, const char *fmt, va_list ap), f, (f, fmt, ap))
STDIO(int, SCRUB32, __isoc99_vscanf, P(const char *fmt, va_list ap), stdin, (fmt, ap))

/* flockfile(3) and its kin: a program that locks a stream itself (to
 * write or read a line in several calls, or with the _unlocked calls)
 * takes the same lock, in the log's order too. */
SCRUB64(flockfile)
IMPL void impl_flockfile(FILE *f) {
    (void)get_ftrylockfile();
    if (stdio_lock(f)) {
        self.stdio = 0;
        leave();
    } else {
        get_flockfile()(f);
    }
}

SCRUB64(funlockfile)
IMPL void impl_funlockfile(FILE *f) {
    (void)get_funlockfile();
    if (__libc_single_threaded || !enter()) {
        get_funlockfile()(f);
        return;
    }
    stdio_unlock(f, 1);
}

/* The lock that orders libgomp's work-sharing calls (OMP_WORK). */
static int omp_work_lock;

/* fork(2) in a process with threads copies memory while the other threads
 * run: a thread in the middle of a call on a stream leaves its buffer
 * half-written in the child, which writes it out (exit() flushes the
 * streams), and the log places the fork only where the recorder saw it,
 * after the copy (6 recordings of 6 of a printing thread beside forking
 * children failed in log order). The standard streams are locked around
 * the fork, in the log's order, so that no other thread is inside a call
 * on them when the copy is taken; glibc resets every stream's lock in the
 * child (its fork's fresetlockfiles). */
DECLARE_REAL(pid_t, fork, void)
SCRUB32(fork)
IMPL pid_t impl_fork(void) {
    (void)get_fork();
    if (__libc_single_threaded) {
        return get_fork()();
    }
    impl_flockfile(stdout);
    impl_flockfile(stderr);
    pid_t pid = get_fork()();
    /* The child's are reset, and so is the work-sharing lock, which
     * another thread may have held (OMP_WORK). */
    if (pid != 0) {
        impl_funlockfile(stderr);
        impl_funlockfile(stdout);
    } else {
        omp_work_lock = 0;
    }
    return pid;
}

/* ---------------------------------------------------------- C11 threads */

/* C11's mutexes and condition variables (<threads.h>) are glibc's pthread
 * ones (mtx_t and cnd_t share their layouts), but glibc's mtx_lock and
 * the rest call its pthread functions directly, past the interposed
 * symbols: each is interposed too, through the pthread wrappers above,
 * with C11's results (glibc's thrd_err_map). */
static int thrd_result(int err) {
    switch (err) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case ETIMEDOUT: return thrd_timedout;
    case EBUSY: return thrd_busy;
    default: return thrd_error;
    }
}

#define C11(name, params, call)                                                 \
    SCRUB32(name)                                                               \
    IMPL int impl_##name(params) {                                              \
        return thrd_result(call);                                               \
    }

C11(mtx_lock, mtx_t *m, impl_pthread_mutex_lock((pthread_mutex_t *)m))
C11(mtx_trylock, mtx_t *m, impl_pthread_mutex_trylock((pthread_mutex_t *)m))
C11(mtx_timedlock, P(mtx_t *m, const struct timespec *t), impl_pthread_mutex_timedlock((pthread_mutex_t *)m, t))
C11(mtx_unlock, mtx_t *m, impl_pthread_mutex_unlock((pthread_mutex_t *)m))
C11(cnd_signal, cnd_t *c, impl_pthread_cond_signal((pthread_cond_t *)c))
C11(cnd_broadcast, cnd_t *c, impl_pthread_cond_broadcast((pthread_cond_t *)c))
C11(cnd_wait, P(cnd_t *c, mtx_t *m), impl_pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m))
C11(cnd_timedwait, P(cnd_t *c, mtx_t *m, const struct timespec *t),
    impl_pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, t))

/* ---------------------------------------------- one-time initialization */

/* Which thread runs a one-time initialization is a race, and the calls
 * the initialization makes are logged in that thread: each call is logged
 * (WEFT_SYNC_ONCE, result 1 for the thread that runs it, as it starts; 0
 * for the others, as their call returns, after it is done), and so is the
 * end of the initialization (WEFT_SYNC_ONCE_DONE). A replay gives each
 * call its place and the recorded answer: the thread that ran it runs it
 * again, through the real call; the others return without it, since it
 * was done before their place. */

/* The once control and routine of a pthread_once call, and whether this
 * call ran the routine. */
struct once_call {
    pthread_once_t *control;
    void (*routine)(void);
    int ran;
};

/* The routine the real pthread_once runs in the thread that runs it: the
 * program's own, between the places of its start and its end. */
static void once_routine(void) {
    struct once_call *call = self.once;
    call->ran = 1;
    if (mode == WEFT_MODE_RECORD) sync_record(WEFT_SYNC_ONCE, call->control, 1);
    /* The routine's frames lie where the recording's record was written
     * from and the replay's marker was not: the same bytes in both, as
     * the stubs leave below a caller (SCRUB_BYTES). */
    __asm__ volatile("lea -" SCRUB_BYTES "(%%rsp), %%rdi\nmov $" SCRUB_WORDS ", %%ecx\nxor %%eax, %%eax\nrep stosq"
                     : : : "rax", "rcx", "rdi", "memory");
    call->routine();
    releasing(WEFT_SYNC_ONCE_DONE, call->control);
    released(WEFT_SYNC_ONCE_DONE, call->control);
}

/* The real pthread_once with `routine` run through once_routine, outside
 * the runtime (its calls are the program's); whether it ran the routine. */
static int run_once(int (*real)(pthread_once_t *, void (*)(void)), pthread_once_t *control, void (*routine)(void),
                    int *result) {
    struct once_call call = {control, routine, 0}, *outer = self.once;
    self.once = &call;
    leave();
    *result = real(control, once_routine);
    self.depth++;
    self.once = outer;
    return call.ran;
}

DECLARE_REAL(int, pthread_once, pthread_once_t *, void (*)(void))
SCRUB32(pthread_once)
IMPL int impl_pthread_once(pthread_once_t *control, void (*routine)(void)) {
    int (*real)(pthread_once_t *, void (*)(void)) = get_pthread_once();
    if (!enter()) return real(control, routine);
    int r = 0;
    if (mode == WEFT_MODE_RECORD) {
        if (!run_once(real, control, routine, &r)) sync_record(WEFT_SYNC_ONCE, control, 0);
    } else if (sync_marker(WEFT_SYNC_ONCE, control, 0)) {
        run_once(real, control, routine, &r);
    }
    leave();
    return r;
}

/* C11's call_once is glibc's pthread_once (once_flag shares its layout),
 * called past the interposed symbol. */
SCRUB64(call_once)
IMPL long impl_call_once(once_flag *flag, void (*routine)(void)) {
    impl_pthread_once((pthread_once_t *)flag, routine);
    return 0;
}

/* A function-local static's guard (the Itanium C++ ABI, §3.3.2):
 * __cxa_guard_acquire returns 1 to the thread that is to construct the
 * object, after the others waited for it or found it built. Compiled
 * code calls it only after it read the guard unset, which a replay that
 * runs the thread later would not: so every call places a LOCK_WAIT as
 * it starts, where the thread's read came before, and the replay's
 * marker (matched against both) is made then. */
DECLARE_REAL(int, __cxa_guard_acquire, long *)
SCRUB32(__cxa_guard_acquire)
IMPL int impl___cxa_guard_acquire(long *guard) {
    int (*real)(long *) = get___cxa_guard_acquire();
    if (!enter()) return real(guard);
    int r = 0;
    if (mode == WEFT_MODE_RECORD) {
        sync_record(WEFT_SYNC_LOCK_WAIT, guard, WEFT_SYNC_ONCE);
        quiet(1);
        r = real(guard);
        acquired(WEFT_SYNC_ONCE, guard, r);
    } else if (sync_marker(WEFT_SYNC_ONCE, guard, 0)) {
        r = real(guard);
    }
    leave();
    return r;
}

/* The object is built (release) or its constructor threw (abort, and the
 * next caller tries again): the end of the initialization, either way. */
VOID_RELEASE(__cxa_guard_release, WEFT_SYNC_ONCE_DONE, guard, long *guard, (guard))
VOID_RELEASE(__cxa_guard_abort, WEFT_SYNC_ONCE_DONE, guard, long *guard, (guard))

/* ------------------------------------------------------ OpenMP's locks */

/* libgomp (GCC's OpenMP runtime) locks without libc: critical and atomic
 * sections and the omp_lock_t API take its own mutexes (atomics, and
 * futex calls made inline, past the pthread wrappers and past what the
 * recording filter logs). Their order is logged at the entry points that
 * compiled OpenMP code calls (libgomp's ABI, libgomp.map): each call is
 * an acquire or a release of one variable, as a pthread mutex's (seed 003
 * §3.2), and a replay grants them in the recorded order. Without it, which
 * thread entered a critical section first was for the search to find. */

/* The variables of the locks libgomp keeps to itself: every unnamed
 * critical section shares one lock, GOMP_atomic_start another. */
static const char omp_critical_lock, omp_atomic_lock;

/* A blocking acquire that returns nothing: in a recording the real call,
 * then its place; in a replay its place, then the real call. The real
 * function is resolved first in both (see BLOCKING_ACQUIRE). */
#define OMP_ACQUIRE(name, var, params, args)                                    \
    VOID_WRAPPER(name, P(params), args, if (mode == WEFT_MODE_RECORD) {         \
        quiet(1);                                                               \
        real args;                                                              \
        acquired(WEFT_SYNC_MUTEX_LOCK, (const void *)(var), 0);                 \
    } else {                                                                    \
        sync_marker(WEFT_SYNC_MUTEX_LOCK, (const void *)(var), 0);              \
        real args;                                                              \
    })

/* A test: nonzero when it took the lock (omp_test_nest_lock: the new
 * nesting count), logged as a trylock that succeeded or found it busy. A
 * replay makes the real call only where the recording took the lock. */
#define OMP_TEST(name, params, args, var)                                       \
    DECLARE_REAL(int, name, params)                                             \
    SCRUB32(name)                                                               \
    IMPL int impl_##name(params) {                                              \
        int (*real)(params) = get_##name();                                     \
        if (!enter()) return real args;                                         \
        int r;                                                                  \
        if (mode == WEFT_MODE_RECORD) {                                         \
            quiet(1);                                                           \
            r = real args;                                                      \
            acquired(WEFT_SYNC_MUTEX_TRYLOCK, (const void *)(var), r ? 0 : EBUSY); \
        } else {                                                                \
            r = sync_marker(WEFT_SYNC_MUTEX_TRYLOCK, (const void *)(var), 0) ? 0 : real args; \
        }                                                                       \
        leave();                                                                \
        return r;                                                               \
    }

/* Whether this thread runs a single construct: the first of its team to
 * arrive does. Logged as a trylock of one variable that succeeded or
 * found it busy. A replay returns the recorded answer, and makes the real
 * call all the same: it moves the team's count of single constructs as
 * in the recording, whichever thread arrives first. */
static const char omp_single_token;
DECLARE_REAL(_Bool, GOMP_single_start, void)
SCRUB32(GOMP_single_start)
IMPL int impl_GOMP_single_start(void) {
    _Bool (*real)(void) = get_GOMP_single_start();
    if (!enter()) return real();
    int r;
    if (mode == WEFT_MODE_RECORD) {
        r = real();
        sync_record(WEFT_SYNC_MUTEX_TRYLOCK, &omp_single_token, r ? 0 : EBUSY);
    } else {
        r = !sync_marker(WEFT_SYNC_MUTEX_TRYLOCK, &omp_single_token, 0);
        real();
    }
    leave();
    return r;
}

/* Work sharing: which thread takes which chunk of a dynamic, guided or
 * runtime-scheduled loop, and which section, is the order in which the
 * threads call libgomp for work (an atomic counter of its own). Each such
 * call takes its place in the log under a lock of the runtime's, so the
 * places are in the calls' order; a replay makes each call when its
 * place comes (its marker follows the real call, as a release's does),
 * so the threads take the same work. Calls that may wait for another
 * thread (ordered loops, sections with reductions) are left alone: one
 * would wait under the lock for a thread that needs it. */
static const char omp_work_token;

#define OMP_WORK(ret, name, params, args)                                       \
    DECLARE_REAL(ret, name, params)                                             \
    SCRUB32(name)                                                               \
    IMPL ret impl_##name(params) {                                              \
        ret (*real)(params) = get_##name();                                     \
        if (!enter()) return real args;                                         \
        ret r;                                                                  \
        if (mode == WEFT_MODE_RECORD) {                                         \
            while (__atomic_exchange_n(&omp_work_lock, 1, __ATOMIC_ACQUIRE))   \
                __builtin_ia32_pause();                                         \
            r = real args;                                                      \
            unsigned long seq = next_seq();                                     \
            __atomic_store_n(&omp_work_lock, 0, __ATOMIC_RELEASE);              \
            sync_record_at(seq, WEFT_SYNC_WORK_SHARE, &omp_work_token, 0);      \
        } else {                                                                \
            r = real args;                                                      \
            sync_marker(WEFT_SYNC_WORK_SHARE, &omp_work_token, 0);              \
        }                                                                       \
        leave();                                                                \
        return r;                                                               \
    }
#define START_PARAMS long start, long end, long incr, long chunk, long *istart, long *iend
#define START_ARGS (start, end, incr, chunk, istart, iend)
#define RUNTIME_PARAMS long start, long end, long incr, long *istart, long *iend
#define RUNTIME_ARGS (start, end, incr, istart, iend)
#define ULL_START_PARAMS _Bool up, unsigned long long start, unsigned long long end, unsigned long long incr, \
    unsigned long long chunk, unsigned long long *istart, unsigned long long *iend
#define ULL_START_ARGS (up, start, end, incr, chunk, istart, iend)
#define ULL_RUNTIME_PARAMS _Bool up, unsigned long long start, unsigned long long end, unsigned long long incr, \
    unsigned long long *istart, unsigned long long *iend
#define ULL_RUNTIME_ARGS (up, start, end, incr, istart, iend)
#define NEXT_PARAMS long *istart, long *iend
#define ULL_NEXT_PARAMS unsigned long long *istart, unsigned long long *iend
#define NEXT_ARGS (istart, iend)
/* One schedule's start and next calls, for long and unsigned long long
 * loops. */
#define OMP_SCHEDULE(kind, params, args, ull_params, ull_args)                 \
    OMP_WORK(_Bool, GOMP_loop_##kind##_start, P(params), args)                  \
    OMP_WORK(_Bool, GOMP_loop_##kind##_next, P(NEXT_PARAMS), NEXT_ARGS)         \
    OMP_WORK(_Bool, GOMP_loop_ull_##kind##_start, P(ull_params), ull_args)      \
    OMP_WORK(_Bool, GOMP_loop_ull_##kind##_next, P(ULL_NEXT_PARAMS), NEXT_ARGS)
OMP_SCHEDULE(dynamic, START_PARAMS, START_ARGS, ULL_START_PARAMS, ULL_START_ARGS)
OMP_SCHEDULE(nonmonotonic_dynamic, START_PARAMS, START_ARGS, ULL_START_PARAMS, ULL_START_ARGS)
OMP_SCHEDULE(guided, START_PARAMS, START_ARGS, ULL_START_PARAMS, ULL_START_ARGS)
OMP_SCHEDULE(nonmonotonic_guided, START_PARAMS, START_ARGS, ULL_START_PARAMS, ULL_START_ARGS)
OMP_SCHEDULE(runtime, RUNTIME_PARAMS, RUNTIME_ARGS, ULL_RUNTIME_PARAMS, ULL_RUNTIME_ARGS)
OMP_SCHEDULE(nonmonotonic_runtime, RUNTIME_PARAMS, RUNTIME_ARGS, ULL_RUNTIME_PARAMS, ULL_RUNTIME_ARGS)
OMP_SCHEDULE(maybe_nonmonotonic_runtime, RUNTIME_PARAMS, RUNTIME_ARGS, ULL_RUNTIME_PARAMS, ULL_RUNTIME_ARGS)
OMP_WORK(unsigned, GOMP_sections_start, unsigned count, (count))
OMP_WORK(unsigned, GOMP_sections_next, void, ())

OMP_ACQUIRE(GOMP_critical_start, &omp_critical_lock, void, ())
VOID_RELEASE(GOMP_critical_end, WEFT_SYNC_MUTEX_UNLOCK, &omp_critical_lock, void, ())
OMP_ACQUIRE(GOMP_critical_name_start, p, void **p, (p))
VOID_RELEASE(GOMP_critical_name_end, WEFT_SYNC_MUTEX_UNLOCK, p, void **p, (p))
OMP_ACQUIRE(GOMP_atomic_start, &omp_atomic_lock, void, ())
VOID_RELEASE(GOMP_atomic_end, WEFT_SYNC_MUTEX_UNLOCK, &omp_atomic_lock, void, ())
OMP_ACQUIRE(omp_set_lock, l, void *l, (l))
VOID_RELEASE(omp_unset_lock, WEFT_SYNC_MUTEX_UNLOCK, l, void *l, (l))
OMP_TEST(omp_test_lock, void *l, (l), l)
OMP_ACQUIRE(omp_set_nest_lock, l, void *l, (l))
VOID_RELEASE(omp_unset_nest_lock, WEFT_SYNC_MUTEX_UNLOCK, l, void *l, (l))
OMP_TEST(omp_test_nest_lock, void *l, (l), l)

/* ------------------------------------------------------ thread returns */

/* A thread's start routine and its argument, for thread_start. */
struct start {
    void *(*routine)(void *);
    void *arg;
};

/* Every thread runs its start routine through here, so that its return
 * has a place in the order (THREAD_RETURN): the program's own code in the
 * thread is done there. What follows (TLS destructors, freeing the stack,
 * the exit) is libc's, and the exit's place comes much later; without the
 * marker a replay would run the thread's last code (a Rust sender's drop,
 * a worker's final count) as late as the exit. A thread that calls
 * pthread_exit has no marker. Record and replay take the same path.
 * The 16 bytes of `struct start` are not freed: a free() in the new
 * thread made it create its malloc arena at once, and that mmap raced
 * with the next thread's stack, so a thread's stack moved between record
 * and replay (CI saw a buffer on its stack 128 MB lower in the recording:
 * two arenas' reservations); the thread that created it may have exited
 * by then. */
static void *thread_start(void *p) {
    struct start start = *(struct start *)p;
    void *r = start.routine(start.arg);
    if (enter()) {
        if (mode == WEFT_MODE_RECORD) {
            sync_record(WEFT_SYNC_THREAD_RETURN, (const void *)start.routine, 0);
        } else {
            sync_marker(WEFT_SYNC_THREAD_RETURN, (const void *)start.routine, 0);
        }
        leave();
    }
    return r;
}

DECLARE_REAL(int, pthread_create, pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
SCRUB32(pthread_create)
IMPL int impl_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*routine)(void *), void *arg) {
    struct start *start = malloc(sizeof *start);
    if (!start) {
        return get_pthread_create()(t, attr, routine, arg);
    }
    *start = (struct start){routine, arg};
    int r = get_pthread_create()(t, attr, thread_start, start);
    if (r) {
        free(start);
    }
    return r;
}

/* --------------------------------------------------- futex via syscall(3) */

/* Runtimes that lock without libc (Rust's std) make their futex calls
 * through syscall(3): a wake is a release of the futex word, a wait's
 * return an acquire. Every other call goes to libc untouched. */
static long (*real_syscall)(long, ...);
EXPORT long syscall(long nr, ...) {
    va_list ap;
    va_start(ap, nr);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (!real_syscall) {
        real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    }
    if (nr != SYS_futex || !enter()) {
        return real_syscall(nr, a, b, c, d, e, f);
    }
    int cmd = (int)b & FUTEX_CMD_MASK;
    int wake = cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET || cmd == FUTEX_WAKE_OP || cmd == FUTEX_REQUEUE || cmd == FUTEX_CMP_REQUEUE;
    /* A wait with a timeout takes its places as an untimed one: logged
     * at its return only (as the recorder would trap it), a receiver that
     * checks its queue before a timed wait (Rust's recv_timeout) would
     * replay that check after the sender's wake. Its result is the
     * recorded one (ETIMEDOUT included), so the timeout itself does not
     * matter in a replay. */
    int wait = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
    long r;
    int err;
    if (mode == WEFT_MODE_RECORD) {
        if (wake) sync_record(WEFT_SYNC_FUTEX_WAKE, (void *)a, 0);
        /* A wait takes two places: its start (whether it finds the word
         * changed depends on the wakes before it), with the value it
         * expects, which tells a lock word (2: locked, with waiters) from
         * a counter; and its return (which waiter a wake released). */
        if (wait) sync_record(WEFT_SYNC_FUTEX_WAIT_START, (void *)a, (unsigned)c);
        quiet(wait);
        self.phase = WEFT_PHASE_AFTER;
        if (wait && d) {
            /* At the runtime's site: the filter would trap libc's. */
            r = PRIVATE(nr, a, b, c, d, e, f);
            err = r < 0 ? (int)-r : 0;
            r = r < 0 ? -1 : r;
        } else {
            r = real_syscall(nr, a, b, c, d, e, f);
            err = errno;
        }
        quiet(0);
        if (wait) sync_record(WEFT_SYNC_FUTEX_WAIT, (void *)a, r < 0 ? -(long)err : r);
    } else {
        /* The replayer answers a wait's start 0 when the log orders the
         * wait: it returns at its return's place, which is answered with
         * the recorded errno (0: woken), and never blocks. It answers 1 on
         * a lock word, whose futex calls are emulated for real
         * (replay/src/log_index.rs). */
        if (wait && sync_marker(WEFT_SYNC_FUTEX_WAIT_START, (void *)a, (unsigned)c) == 0) {
            long recorded = sync_marker(WEFT_SYNC_FUTEX_WAIT, (void *)a, 0);
            leave();
            if (recorded > 0) {
                errno = (int)recorded;
                return -1;
            }
            return 0;
        }
        /* On a lock word the log orders the acquisitions, not the time:
         * a timed wait waits there as an untimed one (its timeout is no
         * syscall of the log's). */
        r = real_syscall(nr, a, b, c, wait ? 0 : d, e, f);
        err = errno;
        if (wait) sync_marker(WEFT_SYNC_FUTEX_WAIT, (void *)a, 0);
        if (wake) sync_marker(WEFT_SYNC_FUTEX_WAKE, (void *)a, 0);
    }
    leave();
    errno = err;
    return r;
}
