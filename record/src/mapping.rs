//! What the log keeps of a file-backed mmap so that a replay can re-create
//! the mapping's contents, by what the descriptor passed to mmap(2) refers
//! to (its `/proc/PID/fd/N` link, proc(5), which reaches the open file
//! even when its name is gone):
//!
//! * a regular file mapped private: the trace's copy of the file, taken
//!   from its name when the name still leads to the mapped file, else from
//!   the descriptor (a file deleted or replaced since it was opened, a
//!   memfd);
//! * a regular file mapped shared: the mapped bytes at mmap time, in the
//!   log. Writes through a shared mapping change the file, so a copy taken
//!   later (or a hard link, which shares the file's contents) would not
//!   hold what the program saw at mmap time; later reads of the file are
//!   logged inputs anyway. Mappings larger than [`MAX_LOGGED`] fall back
//!   to a copy of the file;
//! * /dev/zero: nothing, it is anonymous memory (mmap(2): MAP_ANONYMOUS);
//! * another device: the mapped bytes at mmap time, read from the
//!   program's memory (at most [`MAX_LOGGED`]): later changes made by the
//!   device are not seen by a replay.
//!
//! mremap(2) growing a file mapping maps more of the file; a replay's
//! mapping is anonymous and would grow by zeros, so the log keeps the
//! bytes of the new part ([`grown`]).

use crate::tracee::Memory;
use anyhow::{bail, Context, Result};
use nix::unistd::Pid;
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::PathBuf;

/// The most bytes of one mapping logged with its event (64 MiB).
pub const MAX_LOGGED: u64 = 64 << 20;

/// Where a replay takes a mapping's contents from.
#[derive(Debug, PartialEq)]
pub enum Source {
    /// The trace's copy of a file, made from `from` and recorded as `name`
    /// (the path the program mapped).
    File {
        /// What to copy: the file's name, or the descriptor's /proc link.
        from: PathBuf,
        /// The name /proc gives the file (may end in " (deleted)").
        name: PathBuf,
    },
    /// These bytes, at the mapping's start (the rest is zeros).
    Bytes(Vec<u8>),
}

/// How to log the successful mmap at `addr` by thread `pid` of `args`
/// (mmap's: addr, length, prot, flags, fd, offset). Errors: the
/// descriptor cannot be inspected, or a device's mapped memory cannot be
/// read.
pub fn source(pid: Pid, mem: &Memory, args: &[u64; 6], addr: u64) -> Result<Source> {
    let fd_link = PathBuf::from(format!("/proc/{pid}/fd/{}", args[4] as i32));
    let name = std::fs::read_link(&fd_link).with_context(|| format!("read {}", fd_link.display()))?;
    let opened = std::fs::metadata(&fd_link).with_context(|| format!("stat {}", name.display()))?;
    let (len, offset) = (args[1], args[5]);
    if !opened.is_file() {
        return device(mem, &opened, &name, addr, len);
    }
    let shared = args[3] & libc::MAP_TYPE as u64 != libc::MAP_PRIVATE as u64;
    if shared && len <= MAX_LOGGED {
        return Ok(Source::Bytes(file_bytes(&fd_link, offset, len.min(opened.size().saturating_sub(offset)))?));
    }
    let same = |m: std::fs::Metadata| (m.dev(), m.ino()) == (opened.dev(), opened.ino());
    let from = if std::fs::metadata(&name).is_ok_and(same) { name.clone() } else { fd_link };
    Ok(Source::File { from, name })
}

/// A device mapping: nothing for /dev/zero, else the mapped bytes.
fn device(mem: &Memory, md: &std::fs::Metadata, name: &std::path::Path, addr: u64, len: u64) -> Result<Source> {
    const DEV_ZERO: (u32, u32) = (1, 5);
    let rdev = md.rdev();
    if md.file_type().is_char_device() && (libc::major(rdev), libc::minor(rdev)) == DEV_ZERO {
        return Ok(Source::Bytes(Vec::new()));
    }
    if len > MAX_LOGGED {
        bail!("cannot record the mapping of {}: {len} bytes of a device, more than weft logs ({MAX_LOGGED})", name.display());
    }
    let bytes = mem
        .read(addr, len as usize)
        .with_context(|| format!("cannot record the mapping of device {}: its memory cannot be read", name.display()))?;
    Ok(Source::Bytes(bytes))
}

/// Up to `len` bytes at `offset` of the file open at `path`: fewer when
/// the file ends first (another process may shrink it meanwhile).
fn file_bytes(path: &std::path::Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut bytes = vec![0u8; len as usize];
    let mut done = 0;
    while done < bytes.len() {
        match file.read_at(&mut bytes[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
        }
    }
    bytes.truncate(done);
    Ok(bytes)
}

/// For a successful mremap by thread `pid` of `args` (old address, old
/// length, new length, flags) that returned `addr`: when it grew a file
/// mapping, the bytes of the new part, as far as they can be read (pages
/// past the end of the file cannot, and are zeros in a replay), at most
/// [`MAX_LOGGED`]. `None` for anonymous memory or a mapping that did not
/// grow.
pub fn grown(pid: Pid, mem: &Memory, args: &[u64; 6], addr: u64) -> Option<Vec<u8>> {
    let (old_len, new_len) = (args[1], args[2]);
    if new_len <= old_len || !file_backed(pid, addr) {
        return None;
    }
    const PAGE: u64 = 4096;
    let (start, end) = (addr + old_len, addr + new_len.min(old_len + MAX_LOGGED));
    let mut bytes = Vec::new();
    let mut at = start;
    while at < end {
        let len = (PAGE - at % PAGE).min(end - at);
        match mem.read(at, len as usize) {
            Ok(page) => bytes.extend(page),
            Err(_) => break,
        }
        at += len;
    }
    Some(bytes)
}

/// Whether the mapping at `addr` of process `pid` is backed by a file
/// (a nonzero inode in /proc/PID/maps, proc(5)).
fn file_backed(pid: Pid, addr: u64) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return false };
    maps.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next().and_then(|r| r.split_once('-'));
        let inode = fields.nth(3);
        let within = range.and_then(|(a, b)| Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?)));
        within.is_some_and(|(a, b)| (a..b).contains(&addr)) && inode.is_some_and(|i| i != "0")
    })
}
