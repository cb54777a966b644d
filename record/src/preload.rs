//! The environment a recorded program starts with: with the in-process
//! runtime on, the runtime in `LD_PRELOAD` (ld.so(8)), where the program's
//! own interposers and sanitizers keep working; and, runtime or not,
//! sanitizer options that a traced program needs.
//!
//! - The runtime comes after the libraries the user preloads: their
//!   functions (a libfaketime-style `clock_gettime`) are the program's
//!   first, and reach the runtime's through `dlsym(RTLD_NEXT)`, as they
//!   reach libc's natively.
//! - AddressSanitizer linked as a shared library (gcc's default) aborts
//!   when another library comes before it in the initial list ("ASan
//!   runtime does not come first in initial library list"), as a preloaded
//!   one does. The sanitizer runtimes the executable needs are preloaded
//!   first, so their interceptors wrap the runtime's functions; and
//!   `ASAN_OPTIONS` gets `verify_asan_link_order=0`, for the sanitized
//!   programs it starts later (a test harness's).
//! - LeakSanitizer (on by default with ASan) stops the world at exit with
//!   ptrace from a clone weft does not trace (CLONE_UNTRACED), which
//!   cannot attach to traced threads: under weft it spun forever, and
//!   outlived the recording. `detect_leaks=0` goes in `ASAN_OPTIONS` and
//!   `LSAN_OPTIONS`, after the user's (the last setting wins), as rr
//!   advises for itself.

use object::elf::{FileHeader64, DT_NEEDED};
use object::read::elf::{Dyn, FileHeader};
use object::read::{ReadCache, ReadRef};
use object::Endianness;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// The sanitizer runtimes that check they come first (sonames starting
/// so).
const FIRST_RUNTIMES: [&[u8]; 2] = [b"libasan.so", b"libhwasan.so"];

/// The sanitizer option that LeakSanitizer's ptrace needs under weft.
const NO_LEAK_CHECK: &[u8] = b"detect_leaks=0";

/// The ASan option that lets a sanitized program start after a preloaded
/// library (sanitizer_common's flags).
const ASAN_LINK_ORDER: &[u8] = b"verify_asan_link_order=0";

/// The environment `vars` as `NAME=value` bytes, with [`NO_LEAK_CHECK`]
/// last in `ASAN_OPTIONS` and `LSAN_OPTIONS`; and with the runtime library
/// `runtime`, when given, in `LD_PRELOAD`: after the sanitizer runtimes
/// the executable at `exe` needs ([`sanitizers_needed`]) and what the user
/// preloads, with [`ASAN_LINK_ORDER`] in `ASAN_OPTIONS` too.
pub fn environment(vars: impl Iterator<Item = (OsString, OsString)>, runtime: Option<&Path>, exe: &Path) -> Vec<Vec<u8>> {
    let mut preload: Vec<Vec<u8>> = runtime.map(|_| sanitizers_needed(exe)).unwrap_or_default();
    let (mut asan_options, mut lsan_options) = (Vec::new(), Vec::new());
    let mut env = Vec::new();
    for (k, v) in vars {
        let (k, v) = (k.into_vec(), v.into_vec());
        match &k[..] {
            b"LD_PRELOAD" if runtime.is_some() => preload.extend(v.split(|b| *b == b':' || *b == b' ').filter(|p| !p.is_empty()).map(<[u8]>::to_vec)),
            b"ASAN_OPTIONS" => asan_options = v,
            b"LSAN_OPTIONS" => lsan_options = v,
            _ => env.push(join(k, b"=", v)),
        }
    }
    let mut asan_added = vec![NO_LEAK_CHECK];
    if let Some(runtime) = runtime {
        preload.push(runtime.as_os_str().as_encoded_bytes().to_vec());
        env.push(join(b"LD_PRELOAD".to_vec(), b"=", preload.join(&b':')));
        asan_added.push(ASAN_LINK_ORDER);
    }
    env.push(join(b"ASAN_OPTIONS".to_vec(), b"=", options(asan_options, &asan_added)));
    env.push(join(b"LSAN_OPTIONS".to_vec(), b"=", options(lsan_options, &[NO_LEAK_CHECK])));
    env
}

/// Sanitizer options `user` (a `:`-separated list) with `added` after them.
fn options(user: Vec<u8>, added: &[&[u8]]) -> Vec<u8> {
    let mut all: Vec<&[u8]> = (!user.is_empty()).then_some(&user[..]).into_iter().collect();
    all.extend_from_slice(added);
    all.join(&b':')
}

fn join(mut a: Vec<u8>, sep: &[u8], b: Vec<u8>) -> Vec<u8> {
    a.extend_from_slice(sep);
    a.extend(b);
    a
}

/// The sonames among the `DT_NEEDED` entries of the ELF executable at
/// `exe` that are sanitizer runtimes checking that they come first
/// ([`FIRST_RUNTIMES`]); ld.so finds a preloaded name without a slash as
/// it finds a needed one. Empty for a file that is not a dynamic ELF
/// executable (a script, a static program) or cannot be read. Reads the
/// headers and the dynamic section only, not the whole file.
fn sanitizers_needed(exe: &Path) -> Vec<Vec<u8>> {
    let Ok(file) = std::fs::File::open(exe) else { return Vec::new() };
    let names = needed(&ReadCache::new(file)).unwrap_or_default();
    names.into_iter().filter(|name| FIRST_RUNTIMES.iter().any(|r| name.starts_with(r))).collect()
}

/// The `DT_NEEDED` names of the 64-bit ELF file `data`.
fn needed<'d, R: ReadRef<'d>>(data: R) -> object::read::Result<Vec<Vec<u8>>> {
    let header = FileHeader64::<Endianness>::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let Some((dynamic, link)) = sections.dynamic(endian, data)? else { return Ok(Vec::new()) };
    let strings = sections.strings(endian, data, link)?;
    let names = dynamic.iter().filter(|d| d.d_tag(endian) == u64::from(DT_NEEDED)).filter_map(|d| strings.get(u32::try_from(d.d_val(endian)).ok()?).ok());
    Ok(names.map(<[u8]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        list.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect::<Vec<_>>().into_iter()
    }

    fn text(env: &[Vec<u8>]) -> Vec<String> {
        env.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect()
    }

    #[test]
    fn the_runtime_comes_after_the_users_preloads() {
        let env = environment(vars(&[("A", "1"), ("LD_PRELOAD", "/x/fake.so /y/b.so"), ("ASAN_OPTIONS", "halt_on_error=1")]), Some(Path::new("/w/rt.so")), Path::new("/nonexistent"));
        let expected = ["A=1", "LD_PRELOAD=/x/fake.so:/y/b.so:/w/rt.so", "ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:verify_asan_link_order=0", "LSAN_OPTIONS=detect_leaks=0"];
        assert_eq!(text(&env), expected);
        let env = environment(vars(&[("A", "1")]), Some(Path::new("/w/rt.so")), Path::new("/nonexistent"));
        assert_eq!(text(&env), ["A=1", "LD_PRELOAD=/w/rt.so", "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0", "LSAN_OPTIONS=detect_leaks=0"]);
    }

    #[test]
    fn without_the_runtime_only_the_leak_check_is_off() {
        let env = environment(vars(&[("LD_PRELOAD", "/x/fake.so"), ("LSAN_OPTIONS", "detect_leaks=1")]), None, Path::new("/nonexistent"));
        assert_eq!(text(&env), ["LD_PRELOAD=/x/fake.so", "ASAN_OPTIONS=detect_leaks=0", "LSAN_OPTIONS=detect_leaks=1:detect_leaks=0"]);
    }

    #[test]
    fn an_executable_needing_no_sanitizer_needs_none_first() {
        let me = std::env::current_exe().unwrap();
        assert!(needed(&std::fs::read(&me).unwrap()[..]).unwrap().iter().any(|n| n.starts_with(b"libc.so")));
        assert!(sanitizers_needed(&me).is_empty());
        assert!(sanitizers_needed(Path::new("/nonexistent")).is_empty());
    }
}
