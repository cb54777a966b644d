//! Names for addresses in the replayed program's executable: the data
//! symbol an address falls in (a lock's variable) from the ELF symbol
//! table (`object`), the source line of a code address from its DWARF
//! line table (`addr2line`), and whether an address is the executable's
//! code. What a diagnosis of a stuck replay says ("blocked on mutex
//! `lock_b` at deadlock.c:17") comes from here.

use anyhow::{anyhow, Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol};
use std::path::Path;

/// The main executable of a running process, as it is mapped there.
pub struct Executable {
    /// Its contents.
    data: Vec<u8>,
    /// Load bias: run-time address minus the address in the file.
    bias: u64,
    /// Its executable mappings, [start, end) run-time addresses.
    text: Vec<(u64, u64)>,
    /// Its DWARF line table, if it has one.
    lines: Option<addr2line::Loader>,
}

/// A data symbol an address falls in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Its name.
    pub name: String,
    /// The address's offset from the symbol's start, in bytes.
    pub offset: u64,
    /// The symbol's size, in bytes.
    pub size: u64,
}

impl Executable {
    /// Reads the executable of process `pid` and where it is mapped
    /// (/proc/PID/exe and /proc/PID/maps, proc(5)). Errors: the process is
    /// gone, or the file is not a readable ELF file.
    pub fn of_process(pid: i32) -> Result<Self> {
        let path = std::fs::read_link(format!("/proc/{pid}/exe")).context("read /proc/PID/exe")?;
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).context("read /proc/PID/maps")?;
        let data = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        let file = object::File::parse(&*data).with_context(|| format!("parse {}", path.display()))?;
        let first_vaddr = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let mapped = mappings(&maps, &path);
        let base = mapped.iter().filter(|m| m.offset == 0).map(|m| m.start).min();
        let base = base.ok_or_else(|| anyhow!("{} is not mapped in process {pid}", path.display()))?;
        let text = mapped.iter().filter(|m| m.exec).map(|m| (m.start, m.end)).collect();
        let lines = addr2line::Loader::new(&path).ok();
        Ok(Self { bias: base.wrapping_sub(first_vaddr), data, text, lines })
    }

    /// Whether run-time address `addr` is in the executable's code.
    pub fn in_text(&self, addr: u64) -> bool {
        self.text.iter().any(|&(s, e)| (s..e).contains(&addr))
    }

    /// The data or object symbol run-time address `addr` falls in.
    pub fn symbol(&self, addr: u64) -> Option<Symbol> {
        let file = object::File::parse(&*self.data).ok()?;
        let a = addr.wrapping_sub(self.bias);
        file.symbols()
            .filter(|s| s.is_definition() && matches!(s.kind(), object::SymbolKind::Data | object::SymbolKind::Unknown))
            .find(|s| s.address() <= a && a < s.address() + s.size().max(1))
            .and_then(|s| Some(Symbol { name: s.name().ok()?.to_string(), offset: a - s.address(), size: s.size() }))
    }

    /// The source file (its name, no directory) and line of run-time code
    /// address `addr`, as "file.c:17", from the DWARF line table.
    pub fn line(&self, addr: u64) -> Option<String> {
        let loc = self.lines.as_ref()?.find_location(addr.wrapping_sub(self.bias)).ok()??;
        let file = Path::new(loc.file?).file_name()?.to_string_lossy().into_owned();
        Some(format!("{file}:{}", loc.line?))
    }
}

/// One line of /proc/PID/maps for the file.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    exec: bool,
}

/// The mappings of `path` in a /proc/PID/maps text.
fn mappings(maps: &str, path: &Path) -> Vec<Mapping> {
    let want = path.to_string_lossy();
    maps.lines()
        .filter_map(|l| {
            // The path is the rest of the line after five fields and the
            // padding: it may hold spaces.
            let mut f = l.splitn(6, ' ');
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let name = f.nth(2)?.trim_start();
            if name != want {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            let hex = |x: &str| u64::from_str_radix(x, 16).ok();
            Some(Mapping { start: hex(s)?, end: hex(e)?, offset: hex(offset)?, exec: perms.contains('x') })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_of_the_file_only() {
        let maps = "555555554000-555555555000 r--p 00000000 08:01 12 /tmp/a b\n\
                    555555555000-555555556000 r-xp 00001000 08:01 12 /tmp/a\n\
                    555555554000-555555555000 r--p 00000000 08:01 12 /tmp/a\n\
                    7ffff7dd0000-7ffff7df0000 r-xp 00000000 08:01 13 /lib/libc.so.6\n";
        let m = mappings(maps, Path::new("/tmp/a"));
        assert_eq!(m.len(), 2);
        assert!(m[0].exec && m[0].offset == 0x1000 && m[0].start == 0x555555555000);
        assert!(!m[1].exec && m[1].end == 0x555555555000);
    }

    #[test]
    fn this_test_binary_names_its_own_code_and_data() {
        // Source lines need DWARF, which a release test build lacks: the
        // C programs of tests/spin.rs check them.
        static MARKER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(7);
        let exe = Executable::of_process(std::process::id() as i32).unwrap();
        let here = this_test_binary_names_its_own_code_and_data as *const () as u64;
        assert!(exe.in_text(here));
        let sym = exe.symbol(&MARKER as *const _ as u64).expect("a symbol for a static");
        assert!(sym.name.contains("MARKER") && sym.offset == 0 && sym.size == 8, "{sym:?}");
    }
}
