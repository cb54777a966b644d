//! gdb's host I/O: the `vFile:` packets (GDB RSP, "Host I/O Packets") by
//! which gdb reads files "on the target". gdb reads the process's `/proc`
//! files through them (`/proc/PID/task/TID/maps` at every connection,
//! `info proc mappings`) and, with a `target:` sysroot (gdb's default),
//! the executable and its libraries too.
//!
//! A replay's target is the recording, so a path is answered as the
//! recorded process would see it: `/proc/PID/...` of the recorded process
//! from the task that replays it (rr does the same); a file the recording
//! mapped from the trace's copy (the bytes the program ran, even after
//! the file was upgraded); any other path from the host, as gdbserver
//! serves it (gdb's separate debug files). Nothing can be written.

use crate::target::ReplayTarget;
use gdbstub::target::ext::host_io::{
    FsKind, HostIo, HostIoClose, HostIoCloseOps, HostIoErrno, HostIoError, HostIoFstat, HostIoFstatOps, HostIoOpen, HostIoOpenFlags,
    HostIoOpenMode, HostIoOpenOps, HostIoPread, HostIoPreadOps, HostIoReadlink, HostIoReadlinkOps, HostIoResult, HostIoSetfs,
    HostIoSetfsOps, HostIoStat,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use weft_record::Tid;
use weft_replay::ReplaySession;

/// The pid gdbstub gives gdb for the process (it has no multiprocess
/// support): gdb asks for `/proc/1/...`.
const GDB_PID: u64 = 1;

/// The files a client opened with `vFile:open`, by the descriptor it was
/// given. A new client starts with none ([`HostFiles::clear`]).
#[derive(Default)]
pub struct HostFiles {
    open: HashMap<u32, File>,
    next: u32,
}

impl HostFiles {
    /// Closes every file (a client went; the next one opens its own).
    pub fn clear(&mut self) {
        self.open.clear();
    }

    fn file(&self, fd: u32) -> Result<&File, HostIoErrno> {
        self.open.get(&fd).ok_or(HostIoErrno::EBADF)
    }
}

/// Where gdb's `path` is read from ([`crate::hostio`]): the replaying
/// task's `/proc` entry, the trace's copy of a mapped file, or the host's.
fn translate(session: &ReplaySession<'_>, path: &[u8]) -> PathBuf {
    if let Some(proc_path) = path.strip_prefix(b"/proc/").and_then(|rest| proc_path(session, rest)) {
        return proc_path;
    }
    match session.recorded_copy(path) {
        Some(Ok(copy)) => copy,
        _ => PathBuf::from(OsStr::from_bytes(path)),
    }
}

/// `/proc/N/REST` (`rest` is `N/REST`) when N names the recorded process
/// (gdb's pid for it, its recorded pid, or a live thread's recorded tid):
/// the same entry of the task that replays it, where `task/T` in REST
/// names a live thread by its recorded tid too. An unknown thread stands
/// for the current one (gdb asks for `task/1` before it lists threads).
/// `None` for another process's entry.
fn proc_path(session: &ReplaySession<'_>, rest: &[u8]) -> Option<PathBuf> {
    let (n, mut rest) = leading_number(rest)?;
    let ours = n == GDB_PID || Tid::try_from(n) == Ok(session.trace().meta.pid) || task(session, n, false).is_some();
    if !ours {
        return None;
    }
    let mut out = format!("/proc/{}", task(session, n, true)?).into_bytes();
    if let Some((t, tail)) = rest.strip_prefix(b"/task/").and_then(leading_number) {
        out.extend(format!("/task/{}", task(session, t, true)?).bytes());
        rest = tail;
    }
    if rest == b"/exe" {
        return Some(session.exe_path().to_path_buf());
    }
    out.extend_from_slice(rest);
    Some(PathBuf::from(OsStr::from_bytes(&out)))
}

/// The kernel's id of the task replaying recorded thread `tid`; with
/// `or_current`, the current thread's when `tid` is not live.
fn task(session: &ReplaySession<'_>, tid: u64, or_current: bool) -> Option<i32> {
    let live = Tid::try_from(tid).ok().and_then(|t| session.task_id(t));
    live.or_else(|| or_current.then(|| session.task_id(session.current_tid())).flatten())
}

/// The decimal number at the start of `s` and what follows it (empty, or
/// from a `/`).
fn leading_number(s: &[u8]) -> Option<(u64, &[u8])> {
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    let (n, rest) = s.split_at(digits);
    if n.is_empty() || !(rest.is_empty() || rest[0] == b'/') {
        return None;
    }
    Some((std::str::from_utf8(n).ok()?.parse().ok()?, rest))
}

/// The protocol's errno for `e` (GDB RSP, "Errno Values").
fn errno<E>(e: std::io::Error) -> HostIoError<E> {
    let code = match e.raw_os_error() {
        Some(libc::ENOENT) => HostIoErrno::ENOENT,
        Some(libc::EACCES) => HostIoErrno::EACCES,
        Some(libc::EPERM) => HostIoErrno::EPERM,
        Some(libc::EISDIR) => HostIoErrno::EISDIR,
        Some(libc::ENOTDIR) => HostIoErrno::ENOTDIR,
        Some(libc::EINVAL) => HostIoErrno::EINVAL,
        Some(libc::EMFILE) => HostIoErrno::EMFILE,
        Some(libc::ENAMETOOLONG) => HostIoErrno::ENAMETOOLONG,
        _ => HostIoErrno::EIO,
    };
    HostIoError::Errno(code)
}

impl HostIo for ReplayTarget<'_, '_> {
    fn support_open(&mut self) -> Option<HostIoOpenOps<'_, Self>> {
        Some(self)
    }
    fn support_close(&mut self) -> Option<HostIoCloseOps<'_, Self>> {
        Some(self)
    }
    fn support_pread(&mut self) -> Option<HostIoPreadOps<'_, Self>> {
        Some(self)
    }
    fn support_fstat(&mut self) -> Option<HostIoFstatOps<'_, Self>> {
        Some(self)
    }
    fn support_readlink(&mut self) -> Option<HostIoReadlinkOps<'_, Self>> {
        Some(self)
    }
    fn support_setfs(&mut self) -> Option<HostIoSetfsOps<'_, Self>> {
        Some(self)
    }
}

impl HostIoOpen for ReplayTarget<'_, '_> {
    /// Opens `filename` for reading; a request to write or create gets
    /// `EROFS`: the recording cannot be changed.
    fn open(&mut self, filename: &[u8], flags: HostIoOpenFlags, _mode: HostIoOpenMode) -> HostIoResult<u32, Self> {
        let writes = HostIoOpenFlags::O_WRONLY | HostIoOpenFlags::O_RDWR | HostIoOpenFlags::O_CREAT | HostIoOpenFlags::O_TRUNC | HostIoOpenFlags::O_APPEND;
        if flags.intersects(writes) {
            return Err(HostIoError::Errno(HostIoErrno::EROFS));
        }
        let file = File::open(translate(self.session(), filename)).map_err(errno)?;
        let files = &mut self.files;
        files.next += 1;
        files.open.insert(files.next, file);
        Ok(files.next)
    }
}

impl HostIoClose for ReplayTarget<'_, '_> {
    fn close(&mut self, fd: u32) -> HostIoResult<(), Self> {
        self.files.open.remove(&fd).map(drop).ok_or(HostIoError::Errno(HostIoErrno::EBADF))
    }
}

impl HostIoPread for ReplayTarget<'_, '_> {
    fn pread(&mut self, fd: u32, count: usize, offset: u64, buf: &mut [u8]) -> HostIoResult<usize, Self> {
        let file = self.files.file(fd).map_err(HostIoError::Errno)?;
        let n = count.min(buf.len());
        file.read_at(&mut buf[..n], offset).map_err(errno)
    }
}

impl HostIoFstat for ReplayTarget<'_, '_> {
    fn fstat(&mut self, fd: u32) -> HostIoResult<HostIoStat, Self> {
        let md = self.files.file(fd).map_err(HostIoError::Errno)?.metadata().map_err(errno)?;
        // The protocol's fields are 32 bits wide but for the sizes.
        let narrow = |v: u64| v as u32;
        Ok(HostIoStat {
            st_dev: narrow(md.dev()),
            st_ino: narrow(md.ino()),
            st_mode: HostIoOpenMode::from_bits_truncate(md.mode()),
            st_nlink: narrow(md.nlink()),
            st_uid: md.uid(),
            st_gid: md.gid(),
            st_rdev: narrow(md.rdev()),
            st_size: md.size(),
            st_blksize: md.blksize(),
            st_blocks: md.blocks(),
            st_atime: md.atime() as u32,
            st_mtime: md.mtime() as u32,
            st_ctime: md.ctime() as u32,
        })
    }
}

impl HostIoReadlink for ReplayTarget<'_, '_> {
    /// The target of link `filename` ([`translate`]; the recorded
    /// process's `/proc/PID/exe` is the executable gdb loads).
    fn readlink(&mut self, filename: &[u8], buf: &mut [u8]) -> HostIoResult<usize, Self> {
        let path = translate(self.session(), filename);
        let target = if filename.ends_with(b"/exe") && path == self.session().exe_path() {
            path
        } else {
            std::fs::read_link(&path).map_err(errno)?
        };
        let bytes = target.as_os_str().as_bytes();
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }
}

impl HostIoSetfs for ReplayTarget<'_, '_> {
    /// Every process of the replay sees the one file system.
    fn setfs(&mut self, _fs: FsKind) -> HostIoResult<(), Self> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_numbers_end_at_a_slash_or_the_end() {
        assert_eq!(leading_number(b"12/maps"), Some((12, &b"/maps"[..])));
        assert_eq!(leading_number(b"7"), Some((7, &b""[..])));
        assert_eq!(leading_number(b"self/maps"), None);
        assert_eq!(leading_number(b"12x/maps"), None);
        assert_eq!(leading_number(b"99999999999999999999999/maps"), None);
    }
}
