//! The packets weft answers itself rather than through gdbstub:
//! `qGetTLSAddr` (GDB RSP, "General Query Packets") and lldb's
//! `qShlibInfoAddr`, which gdbstub 0.7 does not implement and offers no
//! hook for, and `vKill`, which
//! gdbstub answers, outside extended mode, by closing the connection
//! without the `OK` gdb waits for ("Remote connection closed"). The server
//! reads the client's bytes itself; before handing them to gdbstub it
//! takes a complete, well-formed `$qGetTLSAddr:...#cs` or `$vKill;...#cs`
//! packet out of the stream
//! when one begins where gdbstub expects a packet, and answers it on the
//! socket with RSP framing (GDB RSP, "Overview"): `+` for gdb's packet
//! unless no-ack mode is on, then `$reply#checksum`. gdb's `+` for that
//! reply goes to gdbstub, which ignores acks. Anything else (a bad
//! checksum included) goes to gdbstub untouched, which handles it as
//! before.
//!
//! It also notes the threads gdb's `H` packets select, which gdbstub keeps
//! to itself: a `bs` after `Hc0` steps gdb's general thread
//! ([`Intercept::step_thread`]).

use std::collections::VecDeque;

/// The packets taken out of the stream, up to their arguments.
const TLS: &[u8] = b"qGetTLSAddr:";
const KILL: &[u8] = b"vKill;";
const SHLIB: &[u8] = b"qShlibInfoAddr";
/// The packet that turns acks off (GDB RSP, "Packet Acknowledgment");
/// gdbstub accepts it (its targets' `use_no_ack_mode` is true unless
/// overridden, and weft's is not).
const NO_ACK: &[u8] = b"QStartNoAckMode";
/// The longest packet, in bytes, read ahead in full; a longer one goes
/// to gdbstub as it comes.
const MAX_PACKET: usize = 256;
/// The most of a packet's body kept to read an `H` packet's thread id
/// (`Hgp1f2a.1f2b` is 12 bytes).
const H_BODY: usize = 32;

/// The client's bytes not yet handed to gdbstub.
pub trait Unread {
    /// The bytes read from the client and not handed on yet.
    fn unread(&mut self) -> &mut VecDeque<u8>;
    /// Reads more of them, waiting; false once the connection closed.
    fn read_more(&mut self) -> bool;
}

/// A packet taken out of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// `qGetTLSAddr:ARGS`, with its arguments.
    Tls(Vec<u8>),
    /// `vKill;PID`: gdb's `kill`, answered `OK`.
    Kill,
    /// `qShlibInfoAddr`: lldb asks where the loader's `r_debug` address
    /// is kept (LLDB's gdb-remote extensions).
    ShlibInfoAddr,
}

/// Where gdbstub's packet reader stands, mirrored from the bytes it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Framing {
    /// Between packets: a `$` starts one.
    #[default]
    Between,
    /// In a packet's body, until `#`.
    Body,
    /// After `#`, this many checksum digits to go.
    Checksum(u8),
}

/// The interception state of one client connection.
#[derive(Debug, Default)]
pub struct Intercept {
    framing: Framing,
    /// The client negotiated no-ack mode (`QStartNoAckMode`).
    no_ack: bool,
    /// The start of the body of the packet gdbstub is reading.
    body: Vec<u8>,
    /// The thread gdb's last `Hg` selected, if it named one.
    general: Option<i32>,
    /// gdb's last `Hc` named any thread (`0` or `-1`) rather than one.
    continue_any: bool,
    /// The last resume was a `bc` or `bs` of the thread `Hc` named: gdb
    /// stepping a thread off a breakpoint before it resumes the one it
    /// selected, which that stop does not change.
    named_reverse: bool,
}

impl Intercept {
    /// Notes `byte` handed to gdbstub, to know where its packets begin.
    pub fn passed(&mut self, byte: u8) {
        self.framing = match (self.framing, byte) {
            (Framing::Between, b'$') => {
                self.body.clear();
                Framing::Body
            }
            (Framing::Body, b'#') => {
                self.packet_read();
                Framing::Checksum(2)
            }
            (Framing::Body, _) if self.body.len() < H_BODY => {
                self.body.push(byte);
                Framing::Body
            }
            (Framing::Checksum(2), _) => Framing::Checksum(1),
            (Framing::Checksum(_), _) => Framing::Between,
            (other, _) => other,
        };
    }

    /// Notes the thread a packet gdbstub read selects (`Hg`, `Hc`; GDB RSP,
    /// "Packets": `H op thread-id`), and how it resumes (`bc`, `bs`,
    /// `vCont`, `c`, `s`, `C`, `S`).
    fn packet_read(&mut self) {
        let body = self.body.as_slice();
        if let Some(id) = body.strip_prefix(b"Hg") {
            self.general = thread_id(id);
        } else if let Some(id) = body.strip_prefix(b"Hc") {
            self.continue_any = thread_id(id).is_none();
        } else if body == b"bc" || body == b"bs" {
            self.named_reverse = !self.continue_any;
        } else if body.starts_with(b"vCont;") || matches!(body.first(), Some(b'c' | b's' | b'C' | b'S')) {
            self.named_reverse = false;
        }
    }

    /// A stop was reported in thread `tid`, which becomes the general
    /// thread: gdb selects it and sends no `Hg` for it (the stop reply
    /// named it; gdbserver makes that thread its general one too). A `bs`
    /// after `Hc0` then steps the thread that stopped, not one gdb
    /// selected before the stop. Not after a reverse resume of a named
    /// thread: that stepped it off a breakpoint, and gdb's selection stays.
    pub fn stopped_in(&mut self, tid: i32) {
        if !self.named_reverse {
            self.general = Some(tid);
        }
    }

    /// The thread a reverse step (`bs`) is for when gdb's last `Hc` named
    /// any thread: the thread its last `Hg` selected. gdb resumes that
    /// way in reverse (`bs` has no thread of its own) when the selected
    /// thread is not the one that last stopped: it first steps the thread
    /// at the breakpoint off it (`Hc` with that thread), then sends `Hc0`
    /// and `bs` meaning the thread it selected, as gdbserver steps its
    /// current (general) thread. `None` when `Hc` named a thread, or no
    /// `Hg` did.
    pub fn step_thread(&self) -> Option<i32> {
        self.general.filter(|_| self.continue_any)
    }

    /// The `qGetTLSAddr` or `vKill` packet the unread bytes begin with,
    /// which it removes from them; `None` (nothing removed) when they
    /// begin with anything else, including a packet whose checksum is
    /// wrong or that gdbstub's reader is in the middle of. Reads from
    /// `from` (waiting) until it can tell.
    pub fn take(&mut self, from: &mut dyn Unread) -> Option<Taken> {
        if self.framing != Framing::Between {
            return None;
        }
        let end = loop {
            let bytes = from.unread().make_contiguous();
            if bytes.first().is_some_and(|b| *b != b'$') {
                return None;
            }
            let hash = bytes.iter().position(|b| *b == b'#');
            if let Some(hash) = hash.filter(|h| bytes.len() >= h + 3) {
                break hash;
            }
            let body = &bytes[1.min(bytes.len())..hash.unwrap_or(bytes.len())];
            let ours = [TLS, KILL, SHLIB, NO_ACK].iter().any(|p| p.starts_with(body) || (*p != NO_ACK && body.starts_with(p)));
            if !ours || bytes.len() > MAX_PACKET || !from.read_more() {
                return None;
            }
        };
        let bytes = from.unread().make_contiguous();
        let body = &bytes[1..end];
        let sum = body.iter().fold(0u8, |a, b| a.wrapping_add(*b));
        let checksum = std::str::from_utf8(&bytes[end + 1..end + 3]).ok().and_then(|s| u8::from_str_radix(s, 16).ok());
        if checksum != Some(sum) {
            return None;
        }
        if body == NO_ACK {
            self.no_ack = true;
            return None;
        }
        let taken = match body.strip_prefix(TLS) {
            Some(args) => Taken::Tls(args.to_vec()),
            None if body.starts_with(KILL) => Taken::Kill,
            None if body == SHLIB => Taken::ShlibInfoAddr,
            None => return None,
        };
        from.unread().drain(..end + 3);
        Some(taken)
    }

    /// What to send for `reply` (packet data that needs no escaping) to a
    /// packet taken by [`Intercept::take`]: the ack unless in no-ack
    /// mode, then `$reply#cs` with its two-digit checksum.
    pub fn frame(&self, reply: &str) -> Vec<u8> {
        let sum = reply.bytes().fold(0u8, |a, b| a.wrapping_add(b));
        let ack = if self.no_ack { "" } else { "+" };
        format!("{ack}${reply}#{sum:02x}").into_bytes()
    }
}

/// A specific thread in a thread-id (GDB RSP, "thread-id syntax":
/// `p<pid>.<tid>` or `<tid>`, in hex); `None` for `0` and `-1` (any,
/// all) and for anything malformed.
fn thread_id(id: &[u8]) -> Option<i32> {
    let id = std::str::from_utf8(id).ok()?;
    let tid = match id.strip_prefix('p') {
        Some(rest) => rest.split_once('.')?.1,
        None => id,
    };
    i32::from_str_radix(tid, 16).ok().filter(|t| *t > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unread bytes, with more arriving in `chunks`.
    struct Script {
        unread: VecDeque<u8>,
        chunks: VecDeque<&'static [u8]>,
    }

    impl Unread for Script {
        fn unread(&mut self) -> &mut VecDeque<u8> {
            &mut self.unread
        }
        fn read_more(&mut self) -> bool {
            self.chunks.pop_front().map(|c| self.unread.extend(c)).is_some()
        }
    }

    fn script(chunks: &[&'static [u8]]) -> Script {
        Script { unread: VecDeque::new(), chunks: chunks.iter().copied().collect() }
    }

    /// Hands every unread byte to "gdbstub", through `i`.
    fn pass_all(i: &mut Intercept, s: &mut Script) -> Vec<u8> {
        let bytes: Vec<u8> = s.unread.drain(..).collect();
        bytes.iter().for_each(|b| i.passed(*b));
        bytes
    }

    #[test]
    fn takes_a_tls_packet_even_in_pieces() {
        let mut i = Intercept::default();
        let mut s = script(&[b"$qGetTLS", b"Addr:p1.2a,8,7f00#", b"2", b"8+$g#67"]);
        assert_eq!(i.take(&mut s), Some(Taken::Tls(b"p1.2a,8,7f00".to_vec())));
        assert_eq!(s.unread, b"+$g#67");
        assert_eq!(i.frame("7fff0010"), b"+$7fff0010#2a");
        assert_eq!(i.take(&mut s), None);
        assert_eq!(pass_all(&mut i, &mut s), b"+$g#67");
    }

    #[test]
    fn leaves_other_packets_to_gdbstub() {
        let mut i = Intercept::default();
        for bytes in [&b"$qGetTLSAddr:1,2,3#00"[..], b"$qSupported:multiprocess+#c6", b"$g#67", b"+", b"\x03"] {
            let mut s = script(&[bytes]);
            assert_eq!(i.take(&mut s), None);
            assert_eq!(pass_all(&mut i, &mut s), bytes);
        }
        // Not at a packet boundary: gdbstub is inside `$m0,`.
        let mut s = script(&[b"$m0,$qGetTLSAddr:1,2,3#27"]);
        s.read_more();
        s.unread.drain(..4).for_each(|b| i.passed(b));
        assert_eq!(i.take(&mut s), None);
        assert_eq!(pass_all(&mut i, &mut s), b"$qGetTLSAddr:1,2,3#27");
        // An endless packet is not read ahead for ever, nor a closed one.
        let mut s = script(&[&b"$qGetTLSAddr:"[..], &[b'1'; 300], b"#00"]);
        assert_eq!(i.take(&mut s), None);
        assert_eq!(s.chunks.len(), 1);
        let mut s = script(&[b"$qGetTLSAddr:1,2"]);
        assert_eq!(i.take(&mut s), None);
        assert_eq!(s.unread, b"$qGetTLSAddr:1,2");
    }

    #[test]
    fn notes_the_thread_a_reverse_step_is_for() {
        let mut i = Intercept::default();
        let mut s = script(&[b"$Hgp1.65b3#7e$Hcp1.65b4#7b$bs#d5"]);
        s.read_more();
        pass_all(&mut i, &mut s);
        assert_eq!(i.step_thread(), None, "Hc named a thread");
        for packet in [&b"$Hcp1.0#aa"[..], b"$Hc-1#09", b"$Hc0#db"] {
            let mut s = script(&[packet]);
            s.read_more();
            pass_all(&mut i, &mut s);
            assert_eq!(i.step_thread(), Some(0x65b3));
        }
        let mut s = script(&[b"$bc#c5"]);
        s.read_more();
        pass_all(&mut i, &mut s);
        i.stopped_in(0x65b5);
        assert_eq!(i.step_thread(), Some(0x65b5), "a stop selects the thread it is in");
        let mut s = script(&[b"$Hcp1.65b4#7b$bs#d5"]);
        s.read_more();
        pass_all(&mut i, &mut s);
        i.stopped_in(0x65b4);
        let mut s = script(&[b"$Hcp1.0#aa"]);
        s.read_more();
        pass_all(&mut i, &mut s);
        assert_eq!(i.step_thread(), Some(0x65b5), "a step off a breakpoint selects nothing");
        let mut s = script(&[b"$Hg0#df"]);
        s.read_more();
        pass_all(&mut i, &mut s);
        assert_eq!(i.step_thread(), None, "Hg named no thread");
        assert_eq!(thread_id(b"p1.zz"), None);
        assert_eq!(thread_id(b"1f"), Some(31));
    }

    #[test]
    fn takes_vkill() {
        let mut i = Intercept::default();
        let mut s = script(&[b"$vKill;", b"a410#33+"]);
        assert_eq!(i.take(&mut s), Some(Taken::Kill));
        assert_eq!(s.unread, b"+");
    }

    #[test]
    fn no_ack_mode_drops_the_ack() {
        let mut i = Intercept::default();
        let mut s = script(&[b"$QStartNoAckMode#b0"]);
        assert_eq!(i.take(&mut s), None);
        assert_eq!(pass_all(&mut i, &mut s), b"$QStartNoAckMode#b0");
        assert_eq!(i.frame("E01"), b"$E01#a6");
    }
}
