//! The content-addressed store of file copies that traces share:
//! `<trace root>/store/<xxh3-64 as 16 hex digits>`, one read-only file per
//! distinct content, owned by the recording user. A trace's `files/` holds
//! hard links to store entries, so a hundred traces of a program hold one
//! copy of its libc, and no trace ever links to a file that the system or
//! another user owns (an edit or chmod through such a link would change
//! that file). The idea is git's object store; the layout is in
//! docs/trace-format.md.
//!
//! Like git's index, `<store>/index/` remembers which entry holds each
//! source file as of its last change (device, inode, size, mtime and
//! ctime), so that a file put again unchanged is not read again: hashing
//! and comparing a 64 MB input took about 30 ms of every recording that
//! read it (perf), with the program stopped at its first read.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Mode of a directory weft creates for traces or the store: the owner's only.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a copied file: read-only, the owner's only.
const COPY_MODE: u32 = 0o400;
/// Mode of a copied file whose original was executable (a replay may run
/// the executable's copy).
const COPY_EXEC_MODE: u32 = 0o500;
/// Bytes read at a time when hashing or comparing files.
const CHUNK: usize = 1 << 20;
/// How long a file must have gone unchanged (by its ctime) before the
/// index vouches for it: timestamps move in clock ticks, so a file written
/// again within the tick it was indexed in would look unchanged (git's
/// "racily clean" entries).
const SETTLED: Duration = Duration::from_secs(2);

/// A store directory on the same filesystem as the traces that link into it.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store at `dir`, when a trace at `trace_dir` can hard-link into
    /// it (the two are on one filesystem, judged by `dir`'s nearest existing
    /// ancestor); `None` otherwise. Creates nothing.
    pub fn for_trace(dir: PathBuf, trace_dir: &Path) -> Option<Self> {
        let device = |p: &Path| p.ancestors().find_map(|a| fs::metadata(a).ok()).map(|m| m.dev());
        (device(&dir)? == device(trace_dir)?).then_some(Self { dir })
    }

    /// Puts a copy of `src` into the store (once per content) and returns
    /// its hash and the entry's path. The entry the index names for `src`
    /// as it is now is reused without reading anything. Otherwise an
    /// existing entry is reused only when its bytes are `src`'s (xxh3 is
    /// not collision-resistant), which costs two reads and no write, and a
    /// new copy gets a name of its own. Errors: reading `src`, writing the
    /// store (a failure to write the index only costs the next put a read).
    pub fn put(&self, src: &Path) -> io::Result<(u64, PathBuf)> {
        make_private_dir(&self.dir)?;
        let md = fs::metadata(src)?;
        let exec = md.permissions().mode() & 0o111 != 0;
        let (hash, entry) = match self.indexed(&md) {
            Some(found) => found,
            None => {
                let found = self.find_or_copy(src)?;
                self.index_at(&md, found.0, &found.1, SystemTime::now());
                found
            }
        };
        if exec {
            fs::set_permissions(&entry, fs::Permissions::from_mode(COPY_EXEC_MODE))?;
        }
        Ok((hash, entry))
    }

    /// The entry holding `src`'s bytes: an existing one, compared byte for
    /// byte, or a new copy.
    fn find_or_copy(&self, src: &Path) -> io::Result<(u64, PathBuf)> {
        let hash = hash_file(src)?;
        let entry = self.dir.join(format!("{hash:016x}"));
        if entry.exists() && same_bytes(src, &entry)? {
            return Ok((hash, entry));
        }
        let tmp = self.dir.join(unique_name(".tmp"));
        // The copy's own hash: `src` may have changed since it was hashed.
        let hash = copy_hashed(src, &tmp).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        let entry = self.dir.join(format!("{hash:016x}"));
        let name = if entry.exists() { self.dir.join(unique_name(&format!("{hash:016x}"))) } else { entry };
        fs::rename(&tmp, &name)?;
        Ok((hash, name))
    }

    /// The index's file for the source file of metadata `md`:
    /// `index/<device>-<inode>`, in hex.
    fn index_path(&self, md: &fs::Metadata) -> PathBuf {
        self.dir.join("index").join(format!("{:x}-{:x}", md.dev(), md.ino()))
    }

    /// The entry the index names for the source file of metadata `md`, if
    /// neither has changed since: the source's size, mtime and ctime are
    /// the indexed ones, and the entry is still read-only, of its size and
    /// mtime (an entry made writable and edited is not vouched for).
    fn indexed(&self, md: &fs::Metadata) -> Option<(u64, PathBuf)> {
        let line = fs::read_to_string(self.index_path(md)).ok()?;
        let (source, rest) = line.trim_end().split_once(" | ")?;
        let (hash, rest) = rest.split_once(' ')?;
        let (name, indexed_entry) = rest.split_once(' ')?;
        if source != source_stamp(md) || name.contains('/') {
            return None;
        }
        let entry = self.dir.join(name);
        let entry_md = fs::symlink_metadata(&entry).ok()?;
        let read_only = entry_md.is_file() && entry_md.permissions().mode() & 0o222 == 0;
        (read_only && indexed_entry == entry_stamp(&entry_md)).then_some((u64::from_str_radix(hash, 16).ok()?, entry))
    }

    /// Names `entry` (holding bytes of hash `hash`) in the index for the
    /// source file of metadata `md`, if that file had settled by `now`
    /// ([`SETTLED`]). Best effort: written to a temporary file and renamed.
    fn index_at(&self, md: &fs::Metadata, hash: u64, entry: &Path, now: SystemTime) {
        let changed = SystemTime::UNIX_EPOCH + Duration::new(md.ctime().max(0) as u64, md.ctime_nsec().clamp(0, 999_999_999) as u32);
        if !now.duration_since(changed).is_ok_and(|age| age >= SETTLED) {
            return;
        }
        let (Some(name), Ok(entry_md)) = (entry.file_name(), fs::metadata(entry)) else { return };
        let line = format!("{} | {hash:016x} {} {}\n", source_stamp(md), name.to_string_lossy(), entry_stamp(&entry_md));
        let dir = self.dir.join("index");
        let tmp = dir.join(unique_name(".tmp"));
        let written = make_private_dir(&dir).and_then(|_| fs::write(&tmp, line)).and_then(|_| fs::rename(&tmp, self.index_path(md)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }
}

/// What tells a source file's versions apart: its size, mtime and ctime
/// (ns; a user can set the mtime back, not the ctime).
fn source_stamp(md: &fs::Metadata) -> String {
    format!("{} {}.{:09} {}.{:09}", md.size(), md.mtime(), md.mtime_nsec(), md.ctime(), md.ctime_nsec())
}

/// What tells an entry's versions apart: its size and mtime (its ctime
/// moves with every trace that links it).
fn entry_stamp(md: &fs::Metadata) -> String {
    format!("{} {}.{:09}", md.size(), md.mtime(), md.mtime_nsec())
}

/// Writes `bytes` to the file `path`, replacing what it held, with mode
/// 0600 whatever the umask or the mode an earlier file there had: the
/// small files `weft replay` keeps in a trace (its schedule, lessons) are
/// as private as the trace. Errors: those of open(2) and write(2).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = File::options().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}

/// Creates `dir` and its missing parents, each with mode 0700 whatever the
/// umask (which can narrow a requested mode, even to no access at all),
/// and gives `dir` itself mode 0700 if it existed.
pub fn make_private_dir(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).collect();
    for d in missing.into_iter().rev() {
        match fs::DirBuilder::new().mode(DIR_MODE).create(d) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => fs::set_permissions(d, fs::Permissions::from_mode(DIR_MODE))?,
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
}

/// Copies `src` to the new file `dest` (std's copy uses copy_file_range(2),
/// which shares the blocks where the filesystem can reflink), makes it
/// read-only for its owner (0400, or 0500 for an executable), and returns
/// the xxh3-64 of the copy's bytes.
pub fn copy_hashed(src: &Path, dest: &Path) -> io::Result<u64> {
    let exec = fs::metadata(src)?.permissions().mode() & 0o111 != 0;
    fs::copy(src, dest)?;
    let mode = if exec { COPY_EXEC_MODE } else { COPY_MODE };
    fs::set_permissions(dest, fs::Permissions::from_mode(mode))?;
    hash_file(dest)
}

/// xxh3-64 of a file's bytes, read in 1 MiB chunks.
pub fn hash_file(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0; CHUNK];
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(hasher.digest()),
            n => hasher.update(&buf[..n]),
        }
    }
}

/// Whether two files hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> io::Result<bool> {
    let (mut fa, mut fb) = (File::open(a)?, File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0; CHUNK], vec![0; CHUNK]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        if n != read_full(&mut fb, &mut bb)? || ba[..n] != bb[..n] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// `<prefix>.<pid>.<n>`: a name no other recording, nor this one, uses.
fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}.{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a temporary directory, and a file `a` there holding
    /// `bytes`.
    fn store_and_file(bytes: &[u8]) -> (tempfile::TempDir, Store, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::for_trace(tmp.path().join("store"), tmp.path()).unwrap();
        let a = tmp.path().join("a");
        fs::write(&a, bytes).unwrap();
        (tmp, store, a)
    }

    #[test]
    fn identical_files_share_one_read_only_entry() {
        let (tmp, store, a) = store_and_file(b"same bytes");
        let b = tmp.path().join("b");
        fs::write(&b, b"same bytes").unwrap();
        let (ha, ea) = store.put(&a).unwrap();
        let (hb, eb) = store.put(&b).unwrap();
        assert_eq!((ha, &ea), (hb, &eb));
        assert_eq!(ha, xxhash_rust::xxh3::xxh3_64(b"same bytes"));
        assert_eq!(fs::metadata(&ea).unwrap().permissions().mode() & 0o777, COPY_MODE);
        assert_eq!(fs::read_dir(tmp.path().join("store")).unwrap().count(), 1);
    }

    /// The index names an entry for a source file that has settled, and
    /// only while neither that file nor the entry changes.
    #[test]
    fn the_index_vouches_only_for_unchanged_files() {
        let (_tmp, store, a) = store_and_file(b"old bytes");
        let (hash, entry) = store.put(&a).unwrap();
        let md = fs::metadata(&a).unwrap();
        assert_eq!(store.indexed(&md), None, "a file changed just now is not indexed");
        let later = || SystemTime::now() + SETTLED;
        store.index_at(&md, hash, &entry, later());
        assert_eq!(store.indexed(&md), Some((hash, entry.clone())));
        assert_eq!(store.put(&a).unwrap(), (hash, entry.clone()));
        // A new version of the same size (its mtime set apart: two writes
        // within one clock tick can share their timestamps).
        fs::write(&a, b"new bytes").unwrap();
        File::options().write(true).open(&a).unwrap().set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1000)).unwrap();
        let md = fs::metadata(&a).unwrap();
        assert_eq!(store.indexed(&md), None);
        let (new_hash, new_entry) = store.put(&a).unwrap();
        assert_eq!(fs::read(&new_entry).unwrap(), b"new bytes");
        store.index_at(&md, new_hash, &new_entry, later());
        assert!(store.indexed(&md).is_some());
        fs::set_permissions(&new_entry, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store.indexed(&md), None, "an entry made writable");
    }

    #[test]
    fn an_entry_with_other_bytes_under_the_hash_is_not_used() {
        let (_tmp, store, a) = store_and_file(b"real");
        let (h, entry) = store.put(&a).unwrap();
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&entry, b"fake").unwrap();
        let (h2, other) = store.put(&a).unwrap();
        assert_eq!(h, h2);
        assert_ne!(entry, other);
        assert_eq!(fs::read(other).unwrap(), b"real");
    }
}
