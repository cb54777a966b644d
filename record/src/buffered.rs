//! One record the in-process runtime wrote (`struct weft_record` and what
//! follows it, record/runtime/weft_runtime.h): a buffered syscall with its
//! path and the memory it wrote, or a synchronization operation.
//!
//! The recorder checks a record's layout and its place in the order
//! ([`take_place`]), and writes its bytes into the trace as they are; the
//! trace reader decodes them into the [`Event`] a replay consumes
//! ([`BufferedRecord`]). Decoding at record time (an event, its path and
//! out-buffers allocated, then encoded again) cost the recorder more than
//! the rest of a buffered event's way into the trace, on the cores the
//! program runs on.

use crate::event::{Contents, Event, EventKind, MemWrite, Sync, SyncOp, Syscall};
use crate::runtime::{self, RECORD_HEADER};
use crate::syscalls;
use crate::Tid;
use serde::Deserialize;

/// Where a record's place in the global order lies (bytes).
const SEQ: std::ops::Range<usize> = 8..16;

/// The most chunks of memory one record may carry (the runtime copies at
/// most two).
const MAX_CHUNKS: usize = 8;

/// A record of thread `tid`, as the runtime wrote it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct BufferedRecord {
    /// The recorded tid of the thread whose slot held it.
    pub tid: Tid,
    /// The record's bytes: its header, then its path and chunks, each
    /// padded to 8 bytes.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// What a record's header says, once its layout checked out.
struct Header<'a> {
    kind: u16,
    seq: u64,
    nr: i64,
    args: [u64; 6],
    result: i64,
    path: Option<&'a [u8]>,
    /// The chunks: the address each was copied from, and its bytes (the
    /// first `nchunks`; an array, as the recorder checks every record).
    chunks: [(u64, &'a [u8]); MAX_CHUNKS],
    nchunks: usize,
}

impl<'a> Header<'a> {
    fn chunks(&self) -> &[(u64, &'a [u8])] {
        &self.chunks[..self.nchunks]
    }
}

/// Reads the header at the start of `bytes` and walks its parts. Returns
/// it and the record's size in bytes; `None` when the record is malformed
/// (a size that is not a multiple of 8 or runs past `bytes`, an unknown
/// kind, operation or syscall, a part that runs past the record).
fn header(bytes: &[u8]) -> Option<(Header<'_>, usize)> {
    let size = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    if size < RECORD_HEADER || size > bytes.len() || !size.is_multiple_of(8) {
        return None;
    }
    let record = &bytes[..size];
    let u32_at = |o: usize| Some(u32::from_le_bytes(record.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(record.get(o..o + 8)?.try_into().ok()?));
    let kind = u16::from_le_bytes(record.get(4..6)?.try_into().ok()?);
    let nchunks = u16::from_le_bytes(record.get(6..8)?.try_into().ok()?) as usize;
    let mut args = [0u64; 6];
    for (i, a) in args.iter_mut().enumerate() {
        *a = u64_at(24 + 8 * i)?;
    }
    let mut h = Header { kind, seq: u64_at(SEQ.start)?, nr: u64_at(16)? as i64, args, result: u64_at(72)? as i64, path: None, chunks: [(0, &[]); MAX_CHUNKS], nchunks: 0 };
    match kind {
        runtime::REC_SYNC => {
            SyncOp::from_code(h.nr)?;
        }
        // poll's out-buffer is 8 bytes per descriptor: a count that large
        // is no poll the runtime made.
        runtime::REC_SYSCALL
            if nchunks <= MAX_CHUNKS
                && runtime::BUFFERED_SYSCALLS.contains(&h.nr)
                && (h.nr != libc::SYS_poll || h.args[1] <= u64::from(u32::MAX)) =>
        {
            let mut at = RECORD_HEADER;
            let path_len = u32_at(80)?;
            if path_len != runtime::NO_PATH {
                let len = path_len as usize;
                h.path = Some(record.get(at..at.checked_add(len)?)?);
                at += len.next_multiple_of(8);
            }
            for k in 0..nchunks {
                let (addr, len) = (u64_at(at)?, usize::try_from(u64_at(at + 8)?).ok()?);
                h.chunks[k] = (addr, record.get(at + 16..(at + 16).checked_add(len)?)?);
                at += 16 + len.next_multiple_of(8);
            }
            h.nchunks = nchunks;
        }
        _ => return None,
    }
    Some((h, size))
}

/// Checks the record at the start of `bytes` as [`BufferedRecord::decode`]
/// reads it (its layout, and that its chunks hold its out-buffers),
/// without copying anything: its place in the global order and its size
/// in bytes. `None` when it is malformed, so that the recorder keeps no
/// record the trace reader would refuse.
fn check(bytes: &[u8]) -> Option<(u64, usize)> {
    let (h, size) = header(bytes)?;
    if h.kind == runtime::REC_SYSCALL {
        for (addr, len) in syscalls::out_buffers(h.nr, &h.args, h.result, &mut |_| None) {
            within(h.chunks(), addr, len)?;
        }
        output_hash(&h)?;
    }
    Some((h.seq, size))
}

/// Checks the record at the start of `bytes` ([`check`]) and zeroes its
/// place in the global order there: the trace's order is its stream's,
/// and a number that differs in every record compressed poorly (a third
/// more bytes per event on the syscall-heavy benchmark). Returns that
/// place and the record's size in bytes; `None` when it is malformed.
pub fn take_place(bytes: &mut [u8]) -> Option<(u64, usize)> {
    let (seq, size) = check(bytes)?;
    bytes[SEQ].fill(0);
    Some((seq, size))
}

impl BufferedRecord {
    /// The event the record logs, labelled [`runtime::BUFFERED_LABEL`]:
    /// a `Sync`, or a `Syscall` whose writes are cut from the chunks in
    /// [`syscalls::out_buffers`] order (the order a replay writes them
    /// back in). `None` when the record is malformed or a range of its
    /// out-buffers is not among its chunks.
    pub fn decode(&self) -> Option<Event> {
        let (h, _) = header(&self.bytes)?;
        let kind = match h.kind {
            runtime::REC_SYNC => EventKind::Sync(Sync { op: SyncOp::from_code(h.nr)?, var: h.args[0], result: h.result }),
            _ => {
                let mut s = Syscall::bare(h.nr, h.args, h.result);
                s.path = h.path.map(<[u8]>::to_vec);
                s.writes = writes(&s, h.chunks())?;
                s.output_hash = output_hash(&h)?;
                EventKind::Syscall(s)
            }
        };
        Some(Event { tid: self.tid, label: runtime::BUFFERED_LABEL, kind })
    }
}

/// The out-buffers of buffered syscall `s`, cut from the chunks the
/// runtime copied. `None` when a range is not among them.
fn writes(s: &Syscall, chunks: &[(u64, &[u8])]) -> Option<Vec<MemWrite>> {
    let ranges = syscalls::out_buffers(s.nr, &s.args, s.result, &mut |_| None);
    ranges.into_iter().map(|(addr, len)| Some(MemWrite { addr, data: Contents::Bytes(within(chunks, addr, len)?.to_vec()) })).collect()
}

/// For `write`, the one output syscall the runtime buffers, the xxh3-64
/// of the bytes it wrote, cut from its chunks, as the ptrace recorder
/// hashes them ([`crate::tracee::Memory::hash_ranges`]); `Some(None)` for
/// any other call, and `None` when a range is not among the chunks. (Not
/// `syscalls::class`, which looks the number up in the syscall table: on
/// every record the recorder checks, that cost the syscall-heavy
/// benchmark 15% of its recording time.)
fn output_hash(h: &Header<'_>) -> Option<Option<u64>> {
    if h.nr != libc::SYS_write {
        return Some(None);
    }
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    for (addr, len) in syscalls::output_ranges(h.nr, &h.args, h.result, &mut |_| None) {
        hash.update(within(h.chunks(), addr, len)?);
    }
    Some(Some(hash.digest()))
}

/// The `len` bytes at `addr`, cut from the chunk that holds them all;
/// `None` when none does. (Any record holds an empty range.)
fn within<'a>(chunks: &[(u64, &'a [u8])], addr: u64, len: u64) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    let end = addr.checked_add(len)?;
    chunks.iter().find_map(|&(start, bytes)| {
        let holds = start <= addr && start.checked_add(bytes.len() as u64).is_some_and(|stop| end <= stop);
        holds.then(|| &bytes[(addr - start) as usize..(end - start) as usize])
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record's header as the runtime writes it (weft_runtime.h): its
    /// `size` in bytes, kind, chunk count, sequence number and syscall
    /// number or sync op; no path, arguments and result zero.
    pub(crate) fn header_bytes(size: usize, kind: u16, nchunks: u16, seq: u64, nr: u64) -> [u8; RECORD_HEADER] {
        let mut rec = [0u8; RECORD_HEADER];
        rec[0..4].copy_from_slice(&(size as u32).to_le_bytes());
        rec[4..6].copy_from_slice(&kind.to_le_bytes());
        rec[6..8].copy_from_slice(&nchunks.to_le_bytes());
        rec[8..16].copy_from_slice(&seq.to_le_bytes());
        rec[16..24].copy_from_slice(&nr.to_le_bytes());
        rec[80..84].copy_from_slice(&runtime::NO_PATH.to_le_bytes());
        rec
    }

    fn clock_gettime_record() -> Vec<u8> {
        let size = RECORD_HEADER + 16 + 16;
        let mut rec = header_bytes(size, runtime::REC_SYSCALL, 1, 7, libc::SYS_clock_gettime as u64).to_vec();
        rec[32..40].copy_from_slice(&0x1000u64.to_le_bytes());
        rec.extend(0x1000u64.to_le_bytes());
        rec.extend(16u64.to_le_bytes());
        rec.extend([9u8; 16]);
        rec
    }

    #[test]
    fn decodes_a_buffered_clock_gettime() {
        let rec = clock_gettime_record();
        assert_eq!(check(&rec), Some((7, rec.len())));
        let e = BufferedRecord { tid: 42, bytes: rec }.decode().unwrap();
        assert_eq!((e.tid, e.label), (42, runtime::BUFFERED_LABEL));
        let EventKind::Syscall(s) = e.kind else { panic!() };
        assert_eq!(s.writes, vec![MemWrite { addr: 0x1000, data: Contents::Bytes(vec![9; 16]) }]);
    }

    #[test]
    fn malformed_records_are_refused() {
        let rec = clock_gettime_record();
        assert!(check(&rec[..40]).is_none(), "a truncated record");
        let mut long_chunk = rec.clone();
        long_chunk[RECORD_HEADER + 8..RECORD_HEADER + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check(&long_chunk).is_none(), "a chunk longer than the record");
        let mut bad_op = header_bytes(RECORD_HEADER, runtime::REC_SYNC, 0, 1, 999);
        assert!(check(&bad_op).is_none(), "an unknown sync operation");
        bad_op[16..24].copy_from_slice(&(SyncOp::MutexLock as u64).to_le_bytes());
        assert!(check(&bad_op).is_some());
        let mut moved = rec.clone();
        moved[RECORD_HEADER..RECORD_HEADER + 8].copy_from_slice(&0x2000u64.to_le_bytes());
        assert!(check(&moved).is_none(), "the out-buffer is not among the chunks");
        assert!(BufferedRecord { tid: 1, bytes: moved }.decode().is_none());
        let mut wrapping = rec.clone();
        wrapping[RECORD_HEADER..RECORD_HEADER + 8].copy_from_slice(&(u64::MAX - 7).to_le_bytes());
        assert!(check(&wrapping).is_none(), "a chunk whose end wraps around");
        let mut other_call = rec.clone();
        other_call[16..24].copy_from_slice(&(libc::SYS_mprotect as u64).to_le_bytes());
        assert!(check(&other_call).is_none(), "a call the runtime does not make");
        let mut huge_poll = rec;
        huge_poll[16..24].copy_from_slice(&(libc::SYS_poll as u64).to_le_bytes());
        huge_poll[32..40].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
        assert!(check(&huge_poll).is_none(), "a poll of more descriptors than exist");
    }
}
