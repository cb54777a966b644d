//! gdb's watched ranges as x86 debug-register watchpoints. gdb asks a
//! remote target for any length (`Z2,ADDR,LEN`; GDB RSP, "Packets",
//! `Z2`); an x86 debug register watches 1, 2, 4 or 8 bytes aligned to
//! their length. Like gdbserver's x86 code (`x86_handle_nonaligned_watchpoint`),
//! a range is cut into the fewest such pieces; more pieces than the 4
//! debug registers is an error, which gdb reports as "Could not insert
//! hardware watchpoint".

use weft_replay::{WatchKind, Watchpoint};

/// Debug registers an x86 thread has.
const DEBUG_REGISTERS: usize = 4;

/// The aligned pieces that watch `len` bytes at `addr` for `kind`, or
/// `None` when `len` is 0 or needs more than 4 debug registers.
pub fn pieces(addr: u64, len: u64, kind: WatchKind) -> Option<Vec<Watchpoint>> {
    let mut out = Vec::new();
    let (mut at, end) = (addr, addr.checked_add(len)?);
    while at < end {
        let size = [8u8, 4, 2, 1].into_iter().find(|s| at % *s as u64 == 0 && at + *s as u64 <= end)?;
        out.push(Watchpoint { addr: at, len: size, kind });
        if out.len() > DEBUG_REGISTERS {
            return None;
        }
        at += size as u64;
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(addr: u64, len: u64) -> Option<Vec<(u64, u8)>> {
        pieces(addr, len, WatchKind::Write).map(|p| p.iter().map(|w| (w.addr, w.len)).collect())
    }

    #[test]
    fn cuts_ranges_into_aligned_pieces() {
        assert_eq!(sizes(0x1000, 8), Some(vec![(0x1000, 8)]));
        assert_eq!(sizes(0x1004, 4), Some(vec![(0x1004, 4)]));
        assert_eq!(sizes(0x1001, 4), Some(vec![(0x1001, 1), (0x1002, 2), (0x1004, 1)]));
        assert_eq!(sizes(0x1000, 16), Some(vec![(0x1000, 8), (0x1008, 8)]));
        assert_eq!(sizes(0x1000, 32).map(|p| p.len()), Some(4));
        assert_eq!(sizes(0x1000, 33), None);
        assert_eq!(sizes(0x1000, 0), None);
        assert_eq!(sizes(u64::MAX, 2), None);
    }
}
