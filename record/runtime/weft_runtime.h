/* The contract between weft's in-process recording runtime
 * (weft_runtime.c) and the recorder and replayer (record/src/runtime.rs
 * mirrors every constant here; a unit test there checks the layout).
 *
 * Addresses are fixed, as rr's "rr page" is: the recorder's seccomp filter
 * must know, before the program runs, which syscall instructions are the
 * runtime's own, and the replay must find the same code at the same place.
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

/* Version of this contract: HELLO fails when the recorder's differs. */
#define WEFT_RT_VERSION 1

/* The runtime's code page: three `syscall; ret` sites, 16 bytes apart.
 * - PRIVATE: the runtime's own unlogged calls (setting up its mappings):
 *   let through by the recording filter, run for real by the replayer.
 * - BUFFERED: the buffered syscalls and the replay's synchronization
 *   markers: let through by the recording filter (the runtime logs the
 *   call itself), matched against the log by the replayer.
 * - CTL: the runtime's requests to weft (WEFT_NR_CTL): trapped by the
 *   recording filter like any unknown syscall, answered by the replayer. */
#define WEFT_PAGE 0x6fff00000000UL
#define WEFT_SITE_PRIVATE (WEFT_PAGE + 0x00)
#define WEFT_SITE_BUFFERED (WEFT_PAGE + 0x10)
#define WEFT_SITE_CTL (WEFT_PAGE + 0x20)

/* The shared buffers: a header page (the global sequence counter, the
 * write locks) then
 * WEFT_SLOTS per-thread slots of WEFT_SLOT_SIZE bytes, in a file the
 * recorder creates and maps too. */
#define WEFT_SHARED 0x6fff00010000UL
#define WEFT_HEADER_SIZE 4096UL
#define WEFT_SLOT_SIZE (256UL << 10)
#define WEFT_SLOTS 512UL
#define WEFT_SHARED_SIZE (WEFT_HEADER_SIZE + WEFT_SLOTS * WEFT_SLOT_SIZE)
/* In the header, after the counter: WEFT_WRITE_LOCKS u32 locks the
 * runtimes of every recorded process take around a buffered write (by
 * descriptor number), from byte WEFT_WRITE_LOCKS_AT. */
#define WEFT_WRITE_LOCKS_AT 64UL
#define WEFT_WRITE_LOCKS 64
/* Slot header: tid (i32) at 0, head (u64, bytes committed, written by the
 * thread) at 8, tail (u64, bytes consumed, written by the recorder) at 16,
 * quiet (u32: the thread's futex waits are not logged) at 24, logging
 * (u32: a call's outcome is known, its record not yet written) at 28,
 * phase_at (u64: the address of the thread's phase, a u32 that is
 * WEFT_PHASE_BEFORE from a runtime function's entry until its first call)
 * at 32; records from byte 64. */
#define WEFT_PHASE_BEFORE 1
#define WEFT_PHASE_AFTER 2
#define WEFT_SLOT_DATA 64UL
/* The largest read the runtime buffers (bytes); larger ones take the
 * ptrace path, where the recorder may keep them as a file slice. */
#define WEFT_MAX_BUFFERED_READ (64UL << 10)

/* Syscall numbers no kernel has (ENOSYS without weft). */
#define WEFT_NR_CTL 0x5746
#define WEFT_NR_SYNC 0x5747

/* WEFT_NR_CTL requests (first argument). */
#define WEFT_CTL_HELLO 1    /* (version, &hello_reply, &control): mode */
#define WEFT_CTL_REGISTER 2 /* (&phase): slot index, or -1 */
#define WEFT_CTL_FLUSH 3    /* (slot): 0 once the slot is drained */

/* HELLO's answers. */
#define WEFT_MODE_RECORD 1
#define WEFT_MODE_REPLAY 2

struct weft_hello_reply {
    char shm_path[256];   /* the shared buffers' file (record mode) */
};

/* Per process, in the runtime's .bss; the recorder writes it. */
struct weft_control {
    volatile unsigned int disabled;   /* 1: every call takes the ptrace path */
    volatile unsigned int generation; /* bumped in each forked child */
};

/* Record kinds. */
#define WEFT_REC_SYSCALL 1
#define WEFT_REC_SYNC 2

/* One record, 8-byte aligned, followed by the path (path_len bytes, when
 * path_len is not WEFT_NO_PATH) then `nchunks` chunks: u64 addr, u64 len,
 * the bytes; each part padded to 8 bytes. For a sync record, nr is the
 * operation (WEFT_SYNC_*), args[0] the variable, result the result.
 * The trace stores records as they are (docs/trace-format.md, version
 * 11): a change here is a change of the trace format. */
struct weft_record {
    unsigned int size;
    unsigned short kind;
    unsigned short nchunks;
    unsigned long seq;
    long nr;
    unsigned long args[6];
    long result;
    unsigned int path_len;
    unsigned int pad;
};
#define WEFT_NO_PATH 0xffffffffU

/* Synchronization operations (seed 003 §3.2), for WEFT_REC_SYNC records
 * and the replay's WEFT_NR_SYNC markers (args: op, variable, result).
 * Acquires are logged after the call, releases before it. */
#define WEFT_SYNC_MUTEX_LOCK 1
#define WEFT_SYNC_MUTEX_TRYLOCK 2
#define WEFT_SYNC_MUTEX_UNLOCK 3
#define WEFT_SYNC_RWLOCK_READ 4
#define WEFT_SYNC_RWLOCK_WRITE 5
#define WEFT_SYNC_RWLOCK_UNLOCK 6
#define WEFT_SYNC_COND_RELEASE 7
#define WEFT_SYNC_COND_ACQUIRE 8
#define WEFT_SYNC_COND_SIGNAL 9
#define WEFT_SYNC_COND_BROADCAST 10
#define WEFT_SYNC_SEM_WAIT 11
#define WEFT_SYNC_SEM_POST 12
#define WEFT_SYNC_BARRIER_ARRIVE 13
#define WEFT_SYNC_BARRIER_LEAVE 14
#define WEFT_SYNC_SPIN_LOCK 15
#define WEFT_SYNC_SPIN_UNLOCK 16
#define WEFT_SYNC_FUTEX_WAIT 17
#define WEFT_SYNC_FUTEX_WAKE 18
#define WEFT_SYNC_FUTEX_WAIT_START 19
#define WEFT_SYNC_LOCK_WAIT 20 /* result: the blocking acquire's op */
#define WEFT_SYNC_THREAD_RETURN 21 /* variable: the start routine */
/* (22 is the recorder's SyscallWait.) A one-time initialization
 * (pthread_once, call_once, a function-local static's guard): ONCE when
 * the call is made (result 1: this thread runs the initialization, logged
 * as it starts; 0: another did, logged as the call returns), ONCE_DONE
 * when the initialization is done. */
#define WEFT_SYNC_ONCE 23
#define WEFT_SYNC_ONCE_DONE 24
/* A libgomp call that hands out work (a loop's chunk, a section)
 * returned: the calls are made in the log's order. */
#define WEFT_SYNC_WORK_SHARE 25

#endif
