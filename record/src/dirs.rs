//! Where traces live: `$XDG_DATA_HOME/weft/<prog>-<n>` (falling back to
//! `~/.local/share/weft`), with a `latest-trace` link to the newest, as rr
//! keeps `~/.local/share/rr`.

use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};

/// The directory that holds all traces.
pub fn trace_root() -> Result<PathBuf> {
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("neither XDG_DATA_HOME nor HOME is set"))?;
            PathBuf::from(home).join(".local/share")
        }
    };
    Ok(data.join("weft"))
}

/// A new, unused trace directory name for program `prog`:
/// `<root>/<basename>-<n>` with the smallest unused n.
pub fn new_trace_dir(prog: &Path) -> Result<PathBuf> {
    let root = trace_root()?;
    std::fs::create_dir_all(&root).with_context(|| format!("create {}", root.display()))?;
    let base = prog.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
    (0..)
        .map(|n| root.join(format!("{base}-{n}")))
        .find(|p| !p.exists())
        .ok_or_else(|| anyhow!("no free trace name"))
}

/// Points `<root>/latest-trace` at `dir` (replacing the link atomically).
pub fn set_latest(dir: &Path) -> Result<()> {
    let root = trace_root()?;
    std::fs::create_dir_all(&root)?;
    let tmp = root.join(format!(".latest-trace.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(std::fs::canonicalize(dir)?, &tmp)?;
    std::fs::rename(&tmp, root.join("latest-trace"))?;
    Ok(())
}

/// The trace a command should use: `given`, or the `latest-trace` link.
pub fn resolve_trace(given: Option<&Path>) -> Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let link = trace_root()?.join("latest-trace");
            std::fs::canonicalize(&link)
                .with_context(|| format!("no trace given and no {} (record one with `weft record`)", link.display()))
        }
    }
}

/// Every trace directory under the trace root, oldest first.
pub fn list_traces() -> Result<Vec<PathBuf>> {
    let root = trace_root()?;
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(vec![]) };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("events").is_file() && !p.is_symlink())
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    dirs.sort();
    Ok(dirs.into_iter().map(|(_, p)| p).collect())
}
