//! The content-addressed store of file copies that traces share:
//! `<trace root>/store/<xxh3-64 as 16 hex digits>`, one read-only file per
//! distinct content, owned by the recording user. A trace's `files/` holds
//! hard links to store entries, so a hundred traces of a program hold one
//! copy of its libc, and no trace ever links to a file that the system or
//! another user owns (an edit or chmod through such a link would change
//! that file). The idea is git's object store; the layout is in
//! docs/trace-format.md.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of a directory weft creates for traces or the store: the owner's only.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a copied file: read-only, the owner's only.
const COPY_MODE: u32 = 0o400;
/// Mode of a copied file whose original was executable (a replay may run
/// the executable's copy).
const COPY_EXEC_MODE: u32 = 0o500;
/// Bytes read at a time when hashing or comparing files.
const CHUNK: usize = 1 << 20;

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
    /// its hash and the entry's path. An existing entry is reused only when
    /// its bytes are `src`'s (xxh3 is not collision-resistant), which costs
    /// two reads and no write; otherwise the copy gets a name of its own.
    /// Errors: reading `src`, writing the store.
    pub fn put(&self, src: &Path) -> io::Result<(u64, PathBuf)> {
        make_private_dir(&self.dir)?;
        let exec = fs::metadata(src)?.permissions().mode() & 0o111 != 0;
        let hash = hash_file(src)?;
        let entry = self.dir.join(format!("{hash:016x}"));
        if entry.exists() && same_bytes(src, &entry)? {
            if exec {
                fs::set_permissions(&entry, fs::Permissions::from_mode(COPY_EXEC_MODE))?;
            }
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

    #[test]
    fn identical_files_share_one_read_only_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::for_trace(tmp.path().join("store"), tmp.path()).unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        fs::write(&a, b"same bytes").unwrap();
        fs::write(&b, b"same bytes").unwrap();
        let (ha, ea) = store.put(&a).unwrap();
        let (hb, eb) = store.put(&b).unwrap();
        assert_eq!((ha, &ea), (hb, &eb));
        assert_eq!(ha, xxhash_rust::xxh3::xxh3_64(b"same bytes"));
        assert_eq!(fs::metadata(&ea).unwrap().permissions().mode() & 0o777, COPY_MODE);
        assert_eq!(fs::read_dir(tmp.path().join("store")).unwrap().count(), 1);
    }

    #[test]
    fn an_entry_with_other_bytes_under_the_hash_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::for_trace(tmp.path().join("store"), tmp.path()).unwrap();
        let a = tmp.path().join("a");
        fs::write(&a, b"real").unwrap();
        let (h, entry) = store.put(&a).unwrap();
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&entry, b"fake").unwrap();
        let (h2, other) = store.put(&a).unwrap();
        assert_eq!(h, h2);
        assert_ne!(entry, other);
        assert_eq!(fs::read(other).unwrap(), b"real");
    }
}
