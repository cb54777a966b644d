//! The loaded shared libraries, as the `qXfer:libraries-svr4:read` XML
//! document (GDB RSP, "Library List Format for SVR4 Targets"), built the
//! way gdbserver builds it: from the dynamic linker's own list, which the
//! session reads from tracee memory
//! ([`ReplaySession::libraries`](weft_replay::ReplaySession::libraries),
//! [`weft_replay::loader`]). The list's first entry is the executable
//! (`main-lm`); gdb gets the others, those with a name, as libraries.

use std::fmt::Write;
use weft_replay::loader::Library;

/// The library list document for the loader's `link_map` chain
/// `libraries`, in the loader's order (the executable first). An empty
/// chain (before the loader has set it up, or a static executable) gives
/// an empty list without `main-lm`.
pub fn library_list(libraries: &[Library]) -> String {
    let mut xml = String::from("<library-list-svr4 version=\"1.0\"");
    if let Some(main) = libraries.first() {
        let _ = write!(xml, " main-lm=\"{:#x}\"", main.lm);
    }
    xml.push('>');
    for m in libraries.iter().skip(1).filter(|m| !m.name.is_empty()) {
        let _ = write!(
            xml,
            "<library name=\"{}\" lm=\"{:#x}\" l_addr=\"{:#x}\" l_ld=\"{:#x}\" lmid=\"0x0\"/>",
            escape(&String::from_utf8_lossy(&m.name)),
            m.lm,
            m.l_addr,
            m.l_ld
        );
    }
    xml.push_str("</library-list-svr4>");
    xml
}

/// `s` as XML attribute text.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(name: &[u8], lm: u64, l_addr: u64, l_ld: u64) -> Library {
        Library { name: name.to_vec(), lm, l_addr, l_ld }
    }

    #[test]
    fn empty_without_a_chain() {
        assert_eq!(library_list(&[]), "<library-list-svr4 version=\"1.0\"></library-list-svr4>");
    }

    #[test]
    fn the_executable_is_main_lm_and_nameless_modules_are_left_out() {
        let xml = library_list(&[
            lib(b"", 0x7100_0000, 0x5555_5555_4000, 0x5555_5555_7000),
            lib(b"/lib/x86_64-linux-gnu/libc.so.6", 0x7100_0100, 0x7fff_0000_0000, 0x7fff_0020_0000),
            lib(b"", 0x7100_0180, 0x7ffe_0000_0000, 0x7ffe_0003_0000),
            lib(b"/tmp/a&b\"<c>'.so", 0x7100_0200, 0x10_0000, 0x20_0000),
        ]);
        assert_eq!(
            xml,
            "<library-list-svr4 version=\"1.0\" main-lm=\"0x71000000\">\
             <library name=\"/lib/x86_64-linux-gnu/libc.so.6\" lm=\"0x71000100\" l_addr=\"0x7fff00000000\" l_ld=\"0x7fff00200000\" lmid=\"0x0\"/>\
             <library name=\"/tmp/a&amp;b&quot;&lt;c&gt;&apos;.so\" lm=\"0x71000200\" l_addr=\"0x100000\" l_ld=\"0x200000\" lmid=\"0x0\"/>\
             </library-list-svr4>"
        );
        let main_only = library_list(&[lib(b"", 0x7100_0000, 0, 0)]);
        assert_eq!(main_only, "<library-list-svr4 version=\"1.0\" main-lm=\"0x71000000\"></library-list-svr4>");
    }
}
