//! The tracee: starting a program under ptrace with weft's settings, and
//! reading and writing its registers and memory. Shared by the recorder and
//! the replayer, which must start the program identically.
//!
//! Launch follows DESIGN.md: fork; in the child turn ASLR off
//! (personality(2) ADDR_NO_RANDOMIZE), make rdtsc fault (prctl(2)
//! PR_SET_TSC), give every signal its default disposition and unblock it,
//! stop for the tracer, install the seccomp filter, exec.

use anyhow::{bail, Context, Result};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use crate::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The general registers of a stopped thread (`struct user_regs_struct`).
pub type Regs = libc::user_regs_struct;

/// `auxv` entry types (include/uapi/linux/auxvec.h).
const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_EXECFN: u64 = 31;
const AT_SYSINFO_EHDR: u64 = 33;

/// What to start and how.
pub struct Launch {
    /// Path of the executable to exec.
    pub exe: CString,
    /// argv, including argv[0].
    pub argv: Vec<CString>,
    /// The environment.
    pub env: Vec<CString>,
    /// Directory to run in; `None` keeps the current one.
    pub cwd: Option<CString>,
    /// seccomp-bpf programs to install before exec (recording only).
    pub filters: Vec<seccompiler::BpfProgram>,
    /// Pin the program to one CPU (replay).
    pub one_cpu: bool,
    /// Give the program /dev/null as stdin (replay: inputs come from the log).
    pub null_stdin: bool,
}

/// ptrace options both recorder and replayer use.
pub fn ptrace_options() -> ptrace::Options {
    ptrace::Options::PTRACE_O_TRACESYSGOOD
        | ptrace::Options::PTRACE_O_TRACECLONE
        | ptrace::Options::PTRACE_O_TRACEFORK
        | ptrace::Options::PTRACE_O_TRACEVFORK
        | ptrace::Options::PTRACE_O_TRACEEXEC
        | ptrace::Options::PTRACE_O_TRACEEXIT
        | ptrace::Options::PTRACE_O_TRACESECCOMP
        | ptrace::Options::PTRACE_O_EXITKILL
}

/// Forks and execs the program traced. Returns its pid, stopped at the
/// PTRACE_EVENT_EXEC stop. Errors when the fork fails or the exec does.
pub fn launch(spec: &Launch) -> Result<Pid> {
    let argv: Vec<*const libc::c_char> =
        spec.argv.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> =
        spec.env.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let dev_null = c"/dev/null";
    // The one CPU is the one we run on now (if allowed): concurrent
    // replays then spread over the cores instead of all sharing the first.
    let mut cpu0: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut cpu0);
        let now = usize::try_from(libc::sched_getcpu()).ok().filter(|&c| libc::CPU_ISSET(c, &cpu0));
        let first = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &cpu0)).unwrap_or(0);
        libc::CPU_ZERO(&mut cpu0);
        libc::CPU_SET(now.unwrap_or(first), &mut cpu0);
    }
    // SAFETY: the child only makes async-signal-safe calls on memory
    // prepared before the fork, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork failed: {}", std::io::Error::last_os_error());
    }
    if pid > 0 && spec.one_cpu {
        // The tracing thread follows its tracee to that CPU: a tracer left
        // to float pays a cross-CPU wakeup on every ptrace stop, which made
        // lock-heavy replays 7 times slower on a 2-vCPU VM.
        // SAFETY: sets the calling thread's affinity from a valid set.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpu0) };
    }
    if pid == 0 {
        unsafe {
            if let Some(cwd) = &spec.cwd {
                if libc::chdir(cwd.as_ptr()) != 0 {
                    libc::_exit(126);
                }
            }
            if spec.null_stdin {
                let fd = libc::open(dev_null.as_ptr(), libc::O_RDONLY);
                libc::dup2(fd, 0);
                libc::close(fd);
            }
            default_signals();
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV, 0, 0, 0);
            if spec.one_cpu {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpu0);
            }
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            for filter in &spec.filters {
                if seccompiler::apply_filter(filter).is_err() {
                    libc::_exit(125);
                }
            }
            libc::execve(spec.exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(EXEC_FAILED + (*libc::__errno_location()).clamp(0, 127));
        }
    }
    let pid = Pid::from_raw(pid);
    match waitpid(pid, Some(WaitPidFlag::__WALL))? {
        WaitStatus::Stopped(_, libc::SIGSTOP) => {}
        other => bail!("tracee did not stop before exec: {other:?}"),
    }
    ptrace::setoptions(pid, ptrace_options()).context("PTRACE_SETOPTIONS")?;
    ptrace::cont(pid, None)?;
    loop {
        match waitpid(pid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXEC) => return Ok(pid),
            // execve itself traps to the recorder's filter.
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_SECCOMP) => ptrace::cont(pid, None)?,
            // The child leaves after a failed exec.
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT) => ptrace::cont(pid, None)?,
            WaitStatus::Exited(_, 126) => bail!("cannot change to the recorded working directory"),
            WaitStatus::Exited(_, 125) => bail!("cannot install the seccomp filter"),
            WaitStatus::Exited(_, code) => bail!(
                "cannot execute {}: {}",
                spec.exe.to_string_lossy(),
                match code.checked_sub(EXEC_FAILED) {
                    // ENOEXEC: a script with no `#!` line, a truncated ELF.
                    Some(libc::ENOEXEC) => "not an executable format the kernel runs (a script needs a `#!` line)".to_string(),
                    // The program itself was found (weft looks first).
                    Some(libc::ENOENT) => "the interpreter its `#!` line or ELF header names does not exist".to_string(),
                    Some(errno) => std::io::Error::from_raw_os_error(errno).to_string(),
                    None => format!("the child exited with status {code} before exec"),
                }
            ),
            other => bail!("unexpected stop before exec: {other:?}"),
        }
    }
}

/// The exit status of a launched child whose execve(2) failed, plus its
/// errno (at most 127).
const EXEC_FAILED: i32 = 128;

/// In the forked child before exec: every signal's disposition back to
/// SIG_DFL and no signal blocked, as a program started from a shell finds
/// them, whatever weft changed in its own process (the Rust runtime
/// ignores SIGPIPE before `main`; `weft record` ignores SIGINT). exec keeps
/// ignored dispositions and the mask (execve(2), "signal(7): Signal mask
/// and pending signals"), so without this the program would inherit them:
/// `yes | head -1` would end with EPIPE instead of SIGPIPE. A signal the
/// shell had weft ignore (nohup's SIGHUP) is reset too, in recording and
/// replay alike, so that both start the program identically.
/// Async-signal-safe: only sigaction(2) and sigprocmask(2).
unsafe fn default_signals() {
    let mut dfl: libc::sigaction = std::mem::zeroed();
    dfl.sa_sigaction = libc::SIG_DFL;
    for signo in 1..=64 {
        // SIGKILL, SIGSTOP and glibc's internal signals refuse: harmless.
        libc::sigaction(signo, &dfl, std::ptr::null_mut());
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
}

/// A process's memory, through /proc/PID/mem (which, unlike
/// process_vm_writev, may write read-only pages: breakpoints, file copies).
pub struct Memory {
    file: File,
}

impl Memory {
    /// Opens the memory of process `pid`.
    pub fn open(pid: Pid) -> Result<Self> {
        let path = format!("/proc/{pid}/mem");
        let file = File::options().read(true).write(true).open(&path).with_context(|| format!("open {path}"))?;
        Ok(Self { file })
    }

    /// Reads `len` bytes at `addr`. Errors if any byte is unmapped.
    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, addr)
            .with_context(|| format!("read {len} bytes of tracee memory at {addr:#x}"))?;
        Ok(buf)
    }

    /// Reads the little-endian u32 at `addr` (no allocation: replays read
    /// futex and lock words at every trap on them). Errors if unmapped.
    pub fn read_u32(&self, addr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.file.read_exact_at(&mut b, addr).with_context(|| format!("read 4 bytes of tracee memory at {addr:#x}"))?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads the little-endian u64 at `addr`.
    pub fn read_u64(&self, addr: u64) -> Result<u64> {
        let b = self.read(addr, 8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// Reads a NUL-terminated string at `addr` (at most 4096 bytes).
    pub fn read_cstr(&self, addr: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        while out.len() < 4096 {
            let n = self.file.read_at(&mut chunk, addr + out.len() as u64)?;
            if n == 0 {
                break;
            }
            if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..n]);
        }
        Ok(out)
    }

    /// The concatenated bytes of `ranges` (address, length).
    pub fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        for &(addr, len) in ranges {
            bytes.extend(self.read(addr, len as usize)?);
        }
        Ok(bytes)
    }

    /// xxh3 of the bytes of `ranges`: the hash that validates an output
    /// syscall. Unreadable ranges hash as empty.
    pub fn hash_ranges(&self, ranges: &[(u64, u64)]) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for &(addr, len) in ranges {
            if let Ok(bytes) = self.read(addr, len as usize) {
                h.update(&bytes);
            }
        }
        h.digest()
    }

    /// Writes `data` at `addr`, even into read-only pages.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, addr)
            .with_context(|| format!("write {} bytes of tracee memory at {addr:#x}", data.len()))
    }
}

/// At the exec stop, hides the vDSO from the program (so libc's time calls
/// become real, trappable syscalls) by turning its auxv entry into
/// AT_IGNORE, and returns the address of the 16 AT_RANDOM bytes.
/// The auxv follows argv and envp on the initial stack (System V x86-64 ABI
/// §3.4.1).
pub fn patch_auxv(mem: &Memory, rsp: u64) -> Result<u64> {
    let argc = mem.read_u64(rsp)?;
    let mut p = rsp + 8 * (argc + 2);
    while mem.read_u64(p)? != 0 {
        p += 8;
    }
    p += 8;
    let mut at_random = 0;
    loop {
        let kind = mem.read_u64(p)?;
        match kind {
            AT_NULL => break,
            AT_SYSINFO_EHDR => mem.write(p, &AT_IGNORE.to_le_bytes())?,
            AT_RANDOM => at_random = mem.read_u64(p + 8)?,
            _ => {}
        }
        p += 16;
    }
    if at_random == 0 {
        bail!("no AT_RANDOM in the program's auxv");
    }
    Ok(at_random)
}

/// At the exec stop (`rsp` the initial stack pointer): the address of the
/// path the program was exec'ed by, which the kernel put at the top of the
/// stack (auxv `AT_EXECFN`, getauxval(3)). Errors when the auxv has none.
pub fn execfn(mem: &Memory, rsp: u64) -> Result<u64> {
    let argc = mem.read_u64(rsp)?;
    let mut p = rsp + 8 * (argc + 2);
    while mem.read_u64(p)? != 0 {
        p += 8;
    }
    p += 8;
    loop {
        match mem.read_u64(p)? {
            AT_NULL => bail!("no AT_EXECFN in the program's auxv"),
            AT_EXECFN => return mem.read_u64(p + 8),
            _ => p += 16,
        }
    }
}

/// The distinct files mapped into process `pid`, in address order
/// (/proc/PID/maps, proc(5)).
pub fn mapped_files(pid: Pid) -> Result<Vec<String>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut files: Vec<String> = Vec::new();
    for line in maps.lines() {
        if let Some(path) = line.split_whitespace().nth(5) {
            if path.starts_with('/') && !files.iter().any(|f| f == path) {
                files.push(path.to_string());
            }
        }
    }
    Ok(files)
}

/// `PTRACE_GET_SYSCALL_INFO` op values (linux/ptrace.h).
pub const SYSCALL_INFO_ENTRY: u8 = 1;
/// The stop is a syscall-exit-stop.
pub const SYSCALL_INFO_EXIT: u8 = 2;
/// The stop is a PTRACE_EVENT_SECCOMP stop.
pub const SYSCALL_INFO_SECCOMP: u8 = 3;

/// Which kind of syscall stop `tid` is in (`PTRACE_GET_SYSCALL_INFO`, Linux
/// 5.3): one of the `SYSCALL_INFO_*` values, or 0 when not in one.
pub fn syscall_stop_kind(tid: Pid) -> u8 {
    let mut info = [0u8; 88];
    // SAFETY: the kernel writes at most info.len() bytes.
    let r = unsafe {
        libc::ptrace(0x420e, tid.as_raw(), info.len(), info.as_mut_ptr())
    };
    if r <= 0 {
        0
    } else {
        info[0]
    }
}

/// The 128-byte siginfo of the signal `tid` is stopped for.
pub fn siginfo_bytes(tid: Pid) -> Result<Vec<u8>> {
    let info = ptrace::getsiginfo(tid)?;
    // SAFETY: siginfo_t is plain data of 128 bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(&info as *const libc::siginfo_t as *const u8, std::mem::size_of::<libc::siginfo_t>())
    };
    Ok(bytes.to_vec())
}

/// Gives thread `tid`, stopped for a signal, the 128-byte siginfo `bytes`
/// (a logged one); other lengths are left alone.
pub fn set_siginfo_bytes(tid: Pid, bytes: &[u8]) -> Result<()> {
    let Ok(info) = <[u8; 128]>::try_from(bytes) else { return Ok(()) };
    // SAFETY: siginfo_t is 128 bytes of plain data.
    let info: libc::siginfo_t = unsafe { std::mem::transmute(info) };
    Ok(ptrace::setsiginfo(tid, &info)?)
}

/// `PTRACE_GETSIGMASK` / `PTRACE_SETSIGMASK` (linux/ptrace.h).
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

/// The blocked-signal mask of stopped thread `tid` (bit N-1: signal N).
pub fn sigmask(tid: Pid) -> Result<u64> {
    let mut mask = 0u64;
    // SAFETY: the kernel writes one 8-byte sigset.
    nix::errno::Errno::result(unsafe { libc::ptrace(PTRACE_GETSIGMASK, tid.as_raw(), 8usize, &mut mask) })
        .context("PTRACE_GETSIGMASK")?;
    Ok(mask)
}

/// Sets the blocked-signal mask of stopped thread `tid`.
pub fn set_sigmask(tid: Pid, mask: u64) -> Result<()> {
    // SAFETY: the kernel reads one 8-byte sigset.
    nix::errno::Errno::result(unsafe { libc::ptrace(PTRACE_SETSIGMASK, tid.as_raw(), 8usize, &mask) })
        .context("PTRACE_SETSIGMASK")?;
    Ok(())
}

/// The registers as a flat list of u64 in `user_regs_struct` order.
pub fn regs_words(regs: &Regs) -> Vec<u64> {
    // SAFETY: user_regs_struct is 27 u64 fields with no padding.
    unsafe { std::slice::from_raw_parts(regs as *const Regs as *const u64, 27) }.to_vec()
}

/// The syscall arguments of a thread stopped at syscall entry, in ABI order.
pub fn syscall_args(regs: &Regs) -> [u64; 6] {
    [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9]
}

/// Which rdtsc-family instruction is at `pc`, if any: its length in bytes
/// and whether it is rdtscp.
pub fn rdtsc_at(mem: &Memory, pc: u64) -> Option<(u8, bool)> {
    let code = mem.read(pc, 3).ok()?;
    match code.as_slice() {
        [0x0f, 0x31, _] => Some((2, false)),
        [0x0f, 0x01, 0xf9] => Some((3, true)),
        _ => None,
    }
}

/// The clone(2) flags of the spawning syscall a thread is in (at its
/// entry or its PTRACE_EVENT_CLONE/FORK/VFORK stop, `orig_rax` holds the
/// number): fork(2) is `SIGCHLD`, vfork(2) `CLONE_VM | CLONE_VFORK |
/// SIGCHLD` (what the kernel's own wrappers pass), clone the caller's
/// flags, clone3 the first word of its `struct clone_args`.
pub fn clone_flags(mem: &Memory, regs: &Regs) -> u64 {
    match regs.orig_rax as i64 {
        libc::SYS_fork => libc::SIGCHLD as u64,
        libc::SYS_vfork => (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64,
        libc::SYS_clone3 => mem.read_u64(regs.rdi).unwrap_or(0),
        _ => regs.rdi,
    }
}
