//! Running the trace's copy of an executable with the recorded initial
//! stack. The kernel copies the path given to execve(2) to the top of the
//! new stack (`AT_EXECFN`, getauxval(3)), above the environment and
//! argument strings, so a path of another length moves every string, the
//! auxv and the first stack pointer (fs/exec.c, `bprm->filename`): the
//! first syscall given a stack address then differs from the recording.
//! The copy is opened and executed through `/dev/fd/N` (proc(5): the link
//! reaches the open file), padded with repeated `/`, which path resolution
//! ignores (path_resolution(7)), to exactly the recorded length; the
//! recorded bytes are written over it at the exec stop. The descriptor is
//! close-on-exec: the program does not inherit it.

use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A path of a chosen length to an open executable, valid while this
/// lives (until the program has been exec'ed).
pub struct ExecAlias {
    path: PathBuf,
    /// The executable, open (close-on-exec, as std opens files).
    _file: File,
}

impl ExecAlias {
    /// A path of `len` bytes to `exe`. Errors when `exe` cannot be opened,
    /// or `len` is shorter than `/dev/fd/N`.
    pub fn new(exe: &Path, len: usize) -> Result<Self> {
        let file = File::open(exe).with_context(|| format!("open {}", exe.display()))?;
        let link = format!("dev/fd/{}", file.as_raw_fd());
        let Some(slashes) = len.checked_sub(link.len()).filter(|&n| n >= 1) else {
            bail!("the recorded program path is {len} bytes, shorter than /{link}");
        };
        let mut path = vec![b'/'; slashes];
        path.extend_from_slice(link.as_bytes());
        Ok(Self { path: PathBuf::from(OsStr::from_bytes(&path)), _file: file })
    }

    /// The path, `len` bytes long.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alias_has_the_length_asked_and_reaches_the_file() {
        let exe = Path::new("/bin/sh");
        let alias = ExecAlias::new(exe, 60).unwrap();
        assert_eq!(alias.path().as_os_str().len(), 60);
        assert_eq!(std::fs::read(alias.path()).unwrap(), std::fs::read(exe).unwrap());
        assert!(ExecAlias::new(exe, 4).is_err(), "too short for /dev/fd/N");
    }
}
