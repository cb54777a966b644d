//! The on-disk trace: a directory holding `events`, an append-only stream of
//! checksummed frames, and `files/`, the copies of every file the program
//! mapped. The layout is specified in docs/trace-format.md.
//!
//! Writing is crash-safe by construction: a frame is only ever appended, and
//! the writer hands complete frames to the kernel while the program runs, so
//! a recorder killed with SIGKILL leaves a file whose every complete frame
//! reads back. Reading stops at the first incomplete or damaged frame and
//! reports it with the file and byte offset.

use crate::event::{Contents, Event, MappedFile, Meta};
use serde::{de::DeserializeOwned, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The first bytes of an `events` file.
pub const MAGIC: &[u8; 8] = b"WEFTTRC\0";
/// The trace format version this build reads and writes.
pub const VERSION: u32 = 5;
/// Frame flag: the payload is zstd-compressed.
const FLAG_ZSTD: u8 = 1;
/// Frame header: payload length, flags, payload CRC-32, header CRC-32 (bytes).
const HEADER_LEN: usize = 13;
/// Payloads at least this large (bytes) are compressed.
const COMPRESS_MIN: usize = 256;
/// Payloads at least this large (bytes) are bulk input data, compressed with
/// zstd's fast negative level: the recorder shares the cores with the
/// program, so compression speed matters more than ratio.
const BULK_MIN: usize = 64 << 10;
/// zstd level for bulk payloads.
const BULK_LEVEL: i32 = -20;
/// Frames above this size (bytes) are refused as corrupt when reading.
const FRAME_MAX: u32 = 1 << 30;
/// Longest time buffered frames wait before they are handed to the kernel.
const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The path is not a weft trace directory.
    #[error("{path}: not a weft trace (no events file)")]
    NotATrace {
        /// The directory given.
        path: PathBuf,
    },
    /// The events file does not start with weft's magic bytes.
    #[error("{path}: not a weft trace (bad magic at offset 0)")]
    BadMagic {
        /// The events file.
        path: PathBuf,
    },
    /// The trace was written by an incompatible version of weft.
    #[error("{path}: trace format version {found}, this weft reads version {VERSION}")]
    Version {
        /// The events file.
        path: PathBuf,
        /// The version found in the file.
        found: u32,
    },
    /// The file ends in the middle of a frame (the recorder was killed).
    #[error("{path}: truncated at offset {offset}: incomplete record")]
    Truncated {
        /// The events file.
        path: PathBuf,
        /// Byte offset of the incomplete frame.
        offset: u64,
    },
    /// A frame's checksum or contents are wrong.
    #[error("{path}: corrupt record at offset {offset}: {what}")]
    Corrupt {
        /// The events file.
        path: PathBuf,
        /// Byte offset of the damaged frame.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    /// A file the trace hard-linked no longer holds what the program read
    /// (a hard link shares its contents with the original).
    #[error("{path}: changed since the recording: {what}")]
    Changed {
        /// The trace's link to the file.
        path: PathBuf,
        /// Which bytes differ.
        what: String,
    },
    /// An I/O error on a trace file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
    move |source| TraceError::Io { path: path.to_path_buf(), source }
}

/// Appends frames to a new trace directory and copies mapped files into it.
/// Encoding, compression and writing happen on a writer thread, so the
/// recorder can resume the tracee as soon as an event's bytes are copied out.
pub struct TraceWriter {
    dir: PathBuf,
    tx: Option<mpsc::Sender<Record>>,
    worker: Option<std::thread::JoinHandle<Result<(), TraceError>>>,
    /// Copies already made, by (device, inode, size, mtime).
    copies: HashMap<(u64, u64, u64, i64), MappedFile>,
}

/// What the recorder hands the writer thread.
enum Record {
    Meta(Box<Meta>),
    Event(Event),
    Flush,
}

impl TraceWriter {
    /// Creates `dir` (which must not exist yet, or be empty) with an empty
    /// `events` file and a `files/` directory, and starts the writer thread.
    pub fn create(dir: &Path) -> Result<Self, TraceError> {
        fs::create_dir_all(dir.join("files")).map_err(io_err(dir))?;
        let path = dir.join("events");
        let file = File::options().write(true).create_new(true).open(&path).map_err(io_err(&path))?;
        let mut frames = FrameWriter { path, out: BufWriter::with_capacity(1 << 20, file) };
        frames.header()?;
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("weft-trace-writer".into())
            .spawn(move || frames.run(rx))
            .map_err(io_err(dir))?;
        Ok(Self { dir: dir.to_path_buf(), tx: Some(tx), worker: Some(worker), copies: HashMap::new() })
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends the meta record; must be the first record written.
    pub fn write_meta(&mut self, meta: &Meta) -> Result<(), TraceError> {
        self.send(Record::Meta(Box::new(meta.clone())))?;
        self.flush()
    }

    /// Appends one event. Frames reach the kernel within 50 ms.
    pub fn write_event(&mut self, event: Event) -> Result<(), TraceError> {
        self.send(Record::Event(event))
    }

    /// Asks for every buffered frame to be handed to the kernel now.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.send(Record::Flush)
    }

    /// Writes everything still queued and stops the writer thread. Returns
    /// the first error the writer met.
    pub fn finish(&mut self) -> Result<(), TraceError> {
        self.tx = None;
        match self.worker.take().map(|w| w.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(TraceError::Io {
                path: self.dir.join("events"),
                source: std::io::Error::other("the trace writer thread panicked"),
            }),
            None => Ok(()),
        }
    }

    fn send(&mut self, record: Record) -> Result<(), TraceError> {
        if self.tx.as_ref().is_some_and(|tx| tx.send(record).is_ok()) {
            return Ok(());
        }
        // The writer stopped: its error says why.
        self.finish()?;
        Err(TraceError::Io { path: self.dir.join("events"), source: std::io::Error::other("trace writer stopped") })
    }

    /// Copies (or hard-links, when on the same filesystem) `path` into
    /// `files/`, once per distinct file, and describes the copy.
    pub fn copy_file(&mut self, path: &Path) -> Result<MappedFile, TraceError> {
        let md = fs::metadata(path).map_err(io_err(path))?;
        Ok(self.place_file(path, &md, true)?.expect("a copy is always placed"))
    }

    /// Hard-links `path`, whose metadata is `md`, into `files/` (once per
    /// distinct file) and describes the link; `Ok(None)` when it cannot be
    /// linked (another filesystem) and would have to be copied.
    pub fn link_file(&mut self, path: &Path, md: &fs::Metadata) -> Result<Option<MappedFile>, TraceError> {
        self.place_file(path, md, false)
    }

    fn place_file(&mut self, path: &Path, md: &fs::Metadata, may_copy: bool) -> Result<Option<MappedFile>, TraceError> {
        let key = (md.dev(), md.ino(), md.size(), md.mtime());
        if let Some(done) = self.copies.get(&key) {
            return Ok(Some(done.clone()));
        }
        let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let copy = format!("{}-{}", self.copies.len(), base);
        let dest = self.dir.join("files").join(&copy);
        if fs::hard_link(path, &dest).is_err() {
            if !may_copy {
                return Ok(None);
            }
            fs::copy(path, &dest).map_err(io_err(path))?;
        }
        let mapped = MappedFile {
            path: path.as_os_str().as_encoded_bytes().to_vec(),
            copy,
            size: md.size(),
        };
        self.copies.insert(key, mapped.clone());
        Ok(Some(mapped))
    }
}

/// The writer thread's side: frames records into the events file.
struct FrameWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl FrameWriter {
    fn header(&mut self) -> Result<(), TraceError> {
        self.out.write_all(MAGIC).map_err(io_err(&self.path))?;
        self.out.write_all(&VERSION.to_le_bytes()).map_err(io_err(&self.path))
    }

    /// Writes records until the recorder hangs up, flushing at least every
    /// [`FLUSH_EVERY`] and whenever asked.
    fn run(mut self, rx: mpsc::Receiver<Record>) -> Result<(), TraceError> {
        let mut last_flush = Instant::now();
        loop {
            let record = match rx.recv_timeout(FLUSH_EVERY) {
                Ok(r) => Some(r),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return self.flush(),
            };
            let urgent = match record {
                Some(Record::Meta(m)) => self.append(&*m).map(|_| false)?,
                Some(Record::Event(e)) => self.append(&e).map(|_| false)?,
                Some(Record::Flush) | None => true,
            };
            if urgent || last_flush.elapsed() >= FLUSH_EVERY {
                self.flush()?;
                last_flush = Instant::now();
            }
        }
    }

    fn flush(&mut self) -> Result<(), TraceError> {
        self.out.flush().map_err(io_err(&self.path))
    }

    fn append<T: Serialize>(&mut self, value: &T) -> Result<(), TraceError> {
        let raw = bincode::serialize(value).map_err(|e| TraceError::Corrupt {
            path: self.path.clone(),
            offset: 0,
            what: format!("cannot encode: {e}"),
        })?;
        let (flags, payload) = if raw.len() >= COMPRESS_MIN {
            let level = if raw.len() >= BULK_MIN { BULK_LEVEL } else { 1 };
            (FLAG_ZSTD, zstd::bulk::compress(&raw, level).map_err(io_err(&self.path))?)
        } else {
            (0, raw)
        };
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        header[4] = flags;
        header[5..9].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        let header_crc = crc32fast::hash(&header[..9]);
        header[9..].copy_from_slice(&header_crc.to_le_bytes());
        self.out.write_all(&header).map_err(io_err(&self.path))?;
        self.out.write_all(&payload).map_err(io_err(&self.path))
    }
}

/// A trace read back into memory: its meta record, every complete event,
/// and, when the file did not end cleanly, why it stopped.
#[derive(Debug)]
pub struct Trace {
    /// The trace directory.
    pub dir: PathBuf,
    /// The meta record.
    pub meta: Meta,
    /// The events, in global order; an event's index is its id.
    pub events: Vec<Event>,
    /// Set when reading stopped at a truncated or corrupt frame.
    pub damage: Option<TraceError>,
}

impl Trace {
    /// Reads the trace in `dir`. Fails when `dir` is not a trace or its meta
    /// record is unreadable; damage after the meta record stops reading and
    /// is kept in [`Trace::damage`].
    pub fn open(dir: &Path) -> Result<Self, TraceError> {
        let path = dir.join("events");
        if !path.is_file() {
            return Err(TraceError::NotATrace { path: dir.to_path_buf() });
        }
        let mut bytes = Vec::new();
        File::open(&path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(io_err(&path))?;
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            return Err(TraceError::BadMagic { path });
        }
        let found = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
        if found != VERSION {
            return Err(TraceError::Version { path, found });
        }
        let mut frames = Frames { path: &path, bytes: &bytes, offset: 12 };
        let meta: Meta = match frames.next_record() {
            Some(Ok(meta)) => meta,
            Some(Err(e)) => return Err(e),
            None => return Err(TraceError::Truncated { path: path.clone(), offset: 12 }),
        };
        let mut events = Vec::new();
        let mut damage = None;
        while let Some(next) = frames.next_record::<Event>() {
            match next {
                Ok(e) => events.push(e),
                Err(e) => {
                    damage = Some(e);
                    break;
                }
            }
        }
        Ok(Self { dir: dir.to_path_buf(), meta, events, damage })
    }

    /// Path of a copied file (a [`MappedFile::copy`] name) in this trace.
    pub fn file_path(&self, copy: &str) -> PathBuf {
        self.dir.join("files").join(copy)
    }

    /// The bytes `data` stands for: inline, or read from the trace's link
    /// to a file and checked against the hash taken when the program read
    /// them. Errors: the link is missing or unreadable, or the file changed
    /// since the recording.
    pub fn contents<'a>(&self, data: &'a Contents) -> Result<Cow<'a, [u8]>, TraceError> {
        let slice = match data {
            Contents::Bytes(b) => return Ok(Cow::Borrowed(b)),
            Contents::File(slice) => slice,
        };
        let path = self.file_path(&slice.file.copy);
        let mut bytes = vec![0; slice.len as usize];
        let file = File::open(&path).map_err(io_err(&path))?;
        file.read_exact_at(&mut bytes, slice.offset).map_err(io_err(&path))?;
        if xxhash_rust::xxh3::xxh3_64(&bytes) != slice.hash {
            let what = format!("bytes {}..{} differ from what the program read", slice.offset, slice.offset + slice.len);
            return Err(TraceError::Changed { path, what });
        }
        Ok(Cow::Owned(bytes))
    }
}

/// A cursor over the frames of an events file held in memory.
struct Frames<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    offset: usize,
}

impl Frames<'_> {
    fn next_record<T: DeserializeOwned>(&mut self) -> Option<Result<T, TraceError>> {
        let rest = &self.bytes[self.offset..];
        if rest.is_empty() {
            return None;
        }
        let at = self.offset as u64;
        let corrupt = |what: String| TraceError::Corrupt { path: self.path.to_path_buf(), offset: at, what };
        let truncated = || TraceError::Truncated { path: self.path.to_path_buf(), offset: at };
        if rest.len() < HEADER_LEN {
            return Some(Err(truncated()));
        }
        let word = |at: usize| u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        // The header has its own checksum so that a damaged length reads as
        // corruption, not as a frame running past the end of the file.
        if crc32fast::hash(&rest[..9]) != word(9) {
            return Some(Err(corrupt("frame header checksum mismatch".into())));
        }
        let (len, flags) = (word(0), rest[4]);
        if len > FRAME_MAX || flags > FLAG_ZSTD {
            return Some(Err(corrupt(format!("bad frame header (length {len}, flags {flags})"))));
        }
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len as usize) else {
            return Some(Err(truncated()));
        };
        if crc32fast::hash(payload) != word(5) {
            return Some(Err(corrupt("payload checksum mismatch".into())));
        }
        self.offset += HEADER_LEN + len as usize;
        let raw = if flags & FLAG_ZSTD != 0 {
            match zstd::stream::decode_all(payload) {
                Ok(raw) => raw,
                Err(e) => return Some(Err(corrupt(format!("bad zstd data: {e}")))),
            }
        } else {
            payload.to_vec()
        };
        Some(bincode::deserialize(&raw).map_err(|e| corrupt(format!("undecodable record: {e}"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Syscall};

    fn meta() -> Meta {
        Meta {
            argv: vec![b"prog".to_vec()],
            env: vec![],
            cwd: b"/".to_vec(),
            exec_path: b"prog".to_vec(),
            exe: b"/bin/prog".to_vec(),
            at_random: [7; 16],
            pid: 100,
            exec_files: vec![],
            cpu: crate::cpu::Cpu::current(),
        }
    }

    fn event(i: u64) -> Event {
        Event {
            tid: 100,
            label: i,
            kind: EventKind::Syscall(Syscall {
                nr: 0,
                args: [0; 6],
                result: 1000,
                path: None,
                writes: vec![crate::event::MemWrite { addr: 0x1000, data: Contents::Bytes(vec![i as u8; 1000]) }],
                output_hash: None,
                file: None,
                unsupported: false,
            }),
        }
    }

    fn write_trace(dir: &Path, n: u64) {
        let mut w = TraceWriter::create(dir).unwrap();
        w.write_meta(&meta()).unwrap();
        for i in 0..n {
            w.write_event(event(i)).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        write_trace(tmp.path(), 5);
        let t = Trace::open(tmp.path()).unwrap();
        assert_eq!(t.meta, meta());
        assert_eq!(t.events, (0..5).map(event).collect::<Vec<_>>());
        assert!(t.damage.is_none());
    }

    #[test]
    fn truncated_trace_reads_its_complete_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        write_trace(tmp.path(), 5);
        let path = tmp.path().join("events");
        let len = fs::metadata(&path).unwrap().len();
        File::options().write(true).open(&path).unwrap().set_len(len - 3).unwrap();
        let t = Trace::open(tmp.path()).unwrap();
        assert_eq!(t.events.len(), 4);
        assert!(matches!(t.damage, Some(TraceError::Truncated { .. })), "{:?}", t.damage);
    }

    /// A trace of 3 events whose `events` byte at `at(file length)` is
    /// XORed with `mask`.
    fn damaged_trace(at: impl FnOnce(usize) -> usize, mask: u8) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        write_trace(tmp.path(), 3);
        let path = tmp.path().join("events");
        let mut bytes = fs::read(&path).unwrap();
        let k = at(bytes.len());
        bytes[k] ^= mask;
        fs::write(&path, &bytes).unwrap();
        tmp
    }

    #[test]
    fn corrupt_byte_is_reported_with_offset() {
        let tmp = damaged_trace(|n| n - 5, 0xff);
        let t = Trace::open(tmp.path()).unwrap();
        assert_eq!(t.events.len(), 2);
        let msg = t.damage.unwrap().to_string();
        assert!(msg.contains("checksum mismatch") && msg.contains("offset"), "{msg}");
    }

    /// A damaged length must not pass for a frame cut short by a crash.
    #[test]
    fn damaged_length_is_corruption_not_truncation() {
        let tmp = damaged_trace(|_| 12 + 3, 0x40); // high byte of the meta frame's length
        let msg = Trace::open(tmp.path()).err().unwrap().to_string();
        assert!(msg.contains("header checksum mismatch") && msg.contains("offset 12"), "{msg}");
    }

    #[test]
    fn foreign_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(Trace::open(tmp.path()), Err(TraceError::NotATrace { .. })));
        fs::write(tmp.path().join("events"), b"hello world, not a trace").unwrap();
        assert!(matches!(Trace::open(tmp.path()), Err(TraceError::BadMagic { .. })));
    }
}
