//! Thread-local variables: gdb's `qGetTLSAddr:thread-id,offset,lm`
//! (GDB RSP, "General Query Packets"), which gdbstub lacks. This module
//! parses the request; the session computes the address
//! ([`ReplaySession::tls_address`](weft_replay::ReplaySession::tls_address),
//! from glibc's DTV, [`weft_replay::loader`]).

use weft_record::Tid;

/// A parsed `qGetTLSAddr` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The thread (recorded tid) whose variable gdb asks for.
    pub tid: Tid,
    /// The variable's offset in its module's TLS block, in bytes.
    pub offset: u64,
    /// The module's `struct link_map` address; 0 names the executable.
    pub lm: u64,
}

impl Request {
    /// Parses the packet's arguments, `thread-id,offset,lm` (all hex; the
    /// thread id plain or multiprocess `pPID.TID`; GDB RSP, "Packets",
    /// thread-id syntax). `None`: malformed, or a thread id that names no
    /// single thread (`0`, `-1`).
    pub fn parse(args: &[u8]) -> Option<Request> {
        let args = std::str::from_utf8(args).ok()?;
        let mut fields = args.split(',');
        let (thread, offset, lm) = (fields.next()?, fields.next()?, fields.next()?);
        if fields.next().is_some() {
            return None;
        }
        let tid = match thread.strip_prefix('p') {
            Some(multi) => multi.split_once('.')?.1,
            None => thread,
        };
        let tid = Tid::try_from(hex(tid)?).ok().filter(|t| *t > 0)?;
        Some(Request { tid, offset: hex(offset)?, lm: hex(lm)? })
    }
}

/// A hex number as the protocol writes it (no `0x`, at most 64 bits).
fn hex(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests() {
        assert_eq!(Request::parse(b"1f2a,10,7ffff7fc1000"), Some(Request { tid: 0x1f2a, offset: 0x10, lm: 0x7fff_f7fc_1000 }));
        assert_eq!(Request::parse(b"p1f2a.1f2b,0,0"), Some(Request { tid: 0x1f2b, offset: 0, lm: 0 }));
        for bad in [&b""[..], b"1,2", b"1,2,3,4", b"0,1,1", b"-1,1,1", b"p1,1,1", b"x,1,1", b"1,,1", b"1,2,zz", b"1,0x2,3"] {
            assert_eq!(Request::parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(Request::parse(b"1,2,10000000000000000"), None);
        assert_eq!(Request::parse(b"100000000,2,3"), None);
        assert_eq!(Request::parse(b"1,\xff,3"), None);
    }
}
