//! Where traces live: `$XDG_DATA_HOME/weft/<prog>-<n>` (falling back to
//! `~/.local/share/weft`), with a `latest-trace` link to the newest, as rr
//! keeps `~/.local/share/rr`. The root and every trace are private to the
//! user (0700): traces hold the programs' inputs.

use crate::store::make_private_dir;
use anyhow::{anyhow, bail, Context, Result};
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
    make_private_dir(&root).with_context(|| format!("create {}", root.display()))?;
    let base = prog.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
    (0..)
        .map(|n| root.join(format!("{base}-{n}")))
        .find(|p| !p.exists())
        .ok_or_else(|| anyhow!("no free trace name"))
}

/// Points `<root>/latest-trace` at `dir` (replacing the link atomically).
/// Errors name the path: in particular a `latest-trace` that is not a
/// symbolic link (a directory, say) is left alone and reported.
pub fn set_latest(dir: &Path) -> Result<()> {
    let root = trace_root()?;
    make_private_dir(&root).with_context(|| format!("create {}", root.display()))?;
    let link = latest_link(&root)?;
    let tmp = root.join(format!(".latest-trace.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let target = std::fs::canonicalize(dir).with_context(|| format!("{}", dir.display()))?;
    std::os::unix::fs::symlink(target, &tmp).with_context(|| format!("create {}", tmp.display()))?;
    std::fs::rename(&tmp, &link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!(e).context(format!("cannot replace {}", link.display()))
    })
}

/// `<root>/latest-trace`, which must be a symbolic link if it exists.
fn latest_link(root: &Path) -> Result<PathBuf> {
    let link = root.join("latest-trace");
    match std::fs::symlink_metadata(&link) {
        Ok(md) if !md.file_type().is_symlink() => {
            bail!("{} is not a symbolic link to a trace; move it away so that weft can keep the link there", link.display())
        }
        _ => Ok(link),
    }
}

/// The trace a command should use: `given`, or the trace the
/// `latest-trace` link points at. Errors: no link, a dangling one, or a
/// `latest-trace` that is not a link (each naming the path).
pub fn resolve_trace(given: Option<&Path>) -> Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let link = latest_link(&trace_root()?)?;
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
