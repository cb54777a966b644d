//! The on-disk trace: a directory holding `events`, an append-only stream of
//! checksummed frames, and `files/`, the copies of every file the program
//! mapped. The layout is specified in docs/trace-format.md.
//!
//! A trace holds the program's input, so it is private whatever the umask:
//! directories 0700, the events file 0600, copies read-only (0400) in weft's
//! content-addressed [`crate::store`]. Reading it trusts none of its bytes:
//! every allocation they size is bounded first.
//!
//! Writing is crash-safe by construction: a frame is only ever appended, and
//! the writer hands complete frames to the kernel while the program runs, so
//! a recorder killed with SIGKILL leaves a file whose every complete frame
//! reads back. Reading stops at the first incomplete or damaged frame and
//! reports it with the file and byte offset.

use crate::buffered::BufferedRecord;
use crate::event::{Contents, Event, EventKind, MappedFile, Meta, Tid};
use crate::store::{self, Store};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use crate::handoff::Handoff;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The first bytes of an `events` file.
pub const MAGIC: &[u8; 8] = b"WEFTTRC\0";
/// The trace format version this build writes (version 17 added the
/// `Once` and `OnceDone` sync records, 16 buffered `gettid` and `getpid`
/// records, 15 buffered `write` records), and the newest it reads.
pub const VERSION: u32 = 17;
/// The oldest trace format version this build reads: version 14 added
/// `Syscall::sent` to every syscall record.
pub const OLDEST_READABLE: u32 = 14;
/// Frame flag: the payload is zstd-compressed.
const FLAG_ZSTD: u8 = 1;
/// Frame header: payload length, flags, payload CRC-32, header CRC-32 (bytes).
const HEADER_LEN: usize = 13;
/// Payloads at least this large (bytes) are compressed.
const COMPRESS_MIN: usize = 256;
/// Entries at least this large (bytes) are bulk input data, each in a
/// frame of its own compressed with zstd's fast negative level: the
/// recorder shares the cores with the program, and input data compresses
/// little, so speed matters more than ratio there.
const BULK_MIN: usize = 64 << 10;
/// zstd level for bulk payloads.
const BULK_LEVEL: i32 = -20;
/// Longest time (from being queued) before an entry reaches the kernel: it
/// waits at most one of the writer's polls ([`POLL_EVERY`]) to be taken,
/// and the writer flushes when the last flush is one poll old.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// How long the writer sleeps between two looks at its queue when nobody
/// wakes it (record/src/handoff.rs): half of [`FLUSH_EVERY`].
const POLL_EVERY: Duration = Duration::from_millis(FLUSH_EVERY.as_millis() as u64 / 2);
/// Frames above this size (bytes) are refused as corrupt when reading, and
/// so are payloads that decompress to more: the format's maximum record.
/// A record this large would need a single read(2) of 1 GiB from a pipe,
/// socket or device.
const FRAME_MAX: u32 = 1 << 30;
/// Mode of the events file: the owner's only.
const EVENTS_MODE: u32 = 0o600;
/// Events are gathered into frames of at least this many bytes (before
/// compression), or fewer when the writer flushes.
const BATCH_MAX: usize = 64 << 10;

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
    #[error("{path}: trace format version {found}, this weft reads versions {OLDEST_READABLE} to {VERSION}")]
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
    /// A copy in the trace no longer holds what the program read or
    /// mapped (a hard link to the user's own file shares its contents with
    /// the original; a copy may have been edited).
    #[error("{path}: changed since the recording: {what}")]
    Changed {
        /// The trace's copy of the file.
        path: PathBuf,
        /// Which bytes differ.
        what: String,
    },
    /// An I/O error on a trace file. (Not a `source`: the message holds
    /// it, and a chain printed in full would say it twice.)
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
    move |error| TraceError::Io { path: path.to_path_buf(), error }
}

/// Appends frames to a new trace directory and copies mapped files into it.
/// Encoding, compression and writing happen on a writer thread, so the
/// recorder can resume the tracee as soon as an event's bytes are copied out.
pub struct TraceWriter {
    dir: PathBuf,
    /// `dir` existed (empty) before [`TraceWriter::create`].
    existed: bool,
    /// Where records go to the writer thread; closed by
    /// [`TraceWriter::finish`].
    queue: Arc<Handoff<Record>>,
    worker: Option<std::thread::JoinHandle<Result<(), TraceError>>>,
    /// Entries encoded and not yet sent to the writer (sent at the end of
    /// each [`TraceWriter::write_entries`], and every [`BATCH_MAX`] bytes).
    entries: Vec<u8>,
    /// Buffers of [`Record::Entries`] the writer has framed, back for
    /// the next entries: a fresh one per message (allocated here, freed
    /// on the writer's thread) cost the allocator fresh pages, zeroed by
    /// the kernel, for every 64 KiB of events.
    spare: mpsc::Receiver<Vec<u8>>,
    /// Copies already made, by (device, inode, size, mtime).
    copies: HashMap<(u64, u64, u64, i64), MappedFile>,
    /// The shared store copies go into, when the trace is on its filesystem.
    store: Option<Store>,
}

/// One entry of the events stream: an event the recorder logged, or a
/// record the in-process runtime wrote, stored as its bytes and decoded
/// into its event when the trace is read ([`BufferedRecord`]). The writer
/// encodes the same entry from borrowed parts ([`LoggedRef`]).
#[derive(Debug, Deserialize)]
pub enum Logged {
    /// An event logged at a ptrace stop.
    Event(Event),
    /// A record from a thread's in-process buffer.
    Buffered(BufferedRecord),
}

impl Logged {
    /// The event it logs; `None` for a malformed record
    /// ([`BufferedRecord::decode`]).
    pub fn into_event(self) -> Option<Event> {
        match self {
            Logged::Event(e) => Some(e),
            Logged::Buffered(r) => r.decode(),
        }
    }
}

/// An entry of the events stream as the recorder writes it: [`Logged`]
/// with its parts borrowed, encoded to the same bytes, so that a buffered
/// record goes from the copy of its thread's slot into the stream without
/// a copy of its own.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum LoggedRef<'a> {
    /// [`Logged::Event`].
    Event(&'a Event),
    /// [`Logged::Buffered`]: the record's thread and bytes.
    Buffered(BufferedRef<'a>),
}

/// [`BufferedRecord`], borrowed: field for field, the same encoding.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BufferedRef<'a> {
    /// [`BufferedRecord::tid`].
    pub tid: Tid,
    /// [`BufferedRecord::bytes`].
    #[serde(with = "serde_bytes")]
    pub bytes: &'a [u8],
}

/// What the recorder hands the writer thread: entries encoded on the
/// recorder's thread, which the writer only frames and compresses, in
/// batches (one channel message, and one wake-up of the writer, per event
/// cost more than the event's encoding).
enum Record {
    /// Entries encoded back to back, each under [`BULK_MIN`] bytes.
    Entries(Vec<u8>),
    /// A payload for a frame of its own: the meta record, or an entry of
    /// [`BULK_MIN`] bytes or more.
    Frame(Vec<u8>),
    Flush,
}

impl TraceWriter {
    /// Creates `dir` (which must not exist yet, or be empty) with an empty
    /// `events` file and a `files/` directory, private to the user whatever
    /// the umask (0700 and 0600), and starts the writer thread. Copies go to
    /// the store under [`crate::dirs::trace_root`] when `dir` is on its
    /// filesystem, else straight into `files/`.
    pub fn create(dir: &Path) -> Result<Self, TraceError> {
        // Checked first: making it private would change the mode of
        // whatever the user named.
        if dir.symlink_metadata().is_ok() && !fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) {
            let taken = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "exists and is not an empty directory; a trace needs a new one");
            return Err(io_err(dir)(taken));
        }
        let existed = dir.exists();
        store::make_private_dir(dir).map_err(io_err(dir))?;
        let files = dir.join("files");
        store::make_private_dir(&files).map_err(io_err(&files))?;
        let path = dir.join("events");
        let file = File::options()
            .write(true)
            .create_new(true)
            .mode(EVENTS_MODE)
            .open(&path)
            .and_then(|f| f.set_permissions(fs::Permissions::from_mode(EVENTS_MODE)).map(|_| f))
            .map_err(io_err(&path))?;
        let store = crate::dirs::trace_root().ok().and_then(|root| Store::for_trace(root.join("store"), dir));
        let compressor = |level| zstd::bulk::Compressor::new(level).map_err(io_err(&path));
        let (small, bulk) = (compressor(1)?, compressor(BULK_LEVEL)?);
        let (spare_tx, spare) = mpsc::channel();
        let mut frames = FrameWriter { path, out: BufWriter::with_capacity(1 << 20, file), small, bulk, batch: Vec::new(), compressed: Vec::new(), spare: spare_tx };
        frames.header()?;
        let queue = Arc::new(Handoff::new(BATCH_MAX));
        let writer_queue = Arc::clone(&queue);
        let worker = std::thread::Builder::new()
            .name("weft-trace-writer".into())
            .spawn(move || frames.run(&writer_queue))
            .map_err(io_err(dir))?;
        Ok(Self { dir: dir.to_path_buf(), existed, queue, worker: Some(worker), entries: Vec::new(), spare, copies: HashMap::new(), store })
    }

    /// Removes what [`TraceWriter::create`] made: a recording that never
    /// started (the program could not be executed) leaves no trace. An
    /// empty directory the user had made stays. Best effort: errors are
    /// ignored.
    pub fn discard(mut self) {
        let _ = self.finish();
        let _ = fs::remove_file(self.dir.join("events"));
        let _ = fs::remove_dir_all(self.dir.join("files"));
        if !self.existed {
            let _ = fs::remove_dir(&self.dir);
        }
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends the meta record; must be the first record written.
    pub fn write_meta(&mut self, meta: &Meta) -> Result<(), TraceError> {
        let mut raw = Vec::new();
        encode_into(&self.dir, &mut raw, meta)?;
        self.send(Record::Frame(raw))?;
        self.flush()
    }

    /// Appends one event. Frames reach the kernel within [`FLUSH_EVERY`].
    pub fn write_event(&mut self, event: Event) -> Result<(), TraceError> {
        self.write_entries([LoggedRef::Event(&event)])
    }

    /// Appends `logged`, in order (nothing, when empty). Errors: an entry
    /// cannot be encoded or exceeds the format's maximum record size; the writer stopped.
    pub fn write_entries<'a>(&mut self, logged: impl IntoIterator<Item = LoggedRef<'a>>) -> Result<(), TraceError> {
        for entry in logged {
            let start = self.entries.len();
            if encode_into(&self.dir, &mut self.entries, &entry)? >= BULK_MIN {
                let bulk = self.entries.split_off(start);
                self.send_entries()?;
                self.send(Record::Frame(bulk))?;
            } else if self.entries.len() >= BATCH_MAX {
                self.send_entries()?;
            }
        }
        self.send_entries()
    }

    /// Sends the encoded entries, if any, with a spare buffer (one the
    /// writer gave back, or a new one with room for a batch) taking
    /// their place.
    fn send_entries(&mut self) -> Result<(), TraceError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let spare = self.spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH_MAX + (BATCH_MAX >> 2)));
        let entries = std::mem::replace(&mut self.entries, spare);
        self.send(Record::Entries(entries))
    }

    /// Asks for every buffered frame to be handed to the kernel now.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.send(Record::Flush)
    }

    /// Writes everything still queued and stops the writer thread. Returns
    /// the first error the writer met.
    pub fn finish(&mut self) -> Result<(), TraceError> {
        self.queue.close();
        match self.worker.take().map(|w| w.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(TraceError::Io {
                path: self.dir.join("events"),
                error: std::io::Error::other("the trace writer thread panicked"),
            }),
            None => Ok(()),
        }
    }

    fn send(&mut self, record: Record) -> Result<(), TraceError> {
        // Entries wake the writer only by the batch: it polls for the rest.
        let (bytes, urgent) = match &record {
            Record::Entries(entries) => (entries.len(), false),
            Record::Frame(raw) => (raw.len(), true),
            Record::Flush => (0, true),
        };
        if self.queue.push(record, bytes, urgent) {
            return Ok(());
        }
        // The writer stopped: its error says why.
        self.finish()?;
        Err(TraceError::Io { path: self.dir.join("events"), error: std::io::Error::other("trace writer stopped") })
    }

    /// Copies `path` into the trace (through the store), once per distinct
    /// file, and describes the copy.
    pub fn copy_file(&mut self, path: &Path) -> Result<MappedFile, TraceError> {
        let md = fs::metadata(path).map_err(io_err(path))?;
        if let Some(done) = self.copies.get(&file_key(&md)) {
            return Ok(done.clone());
        }
        let copy = self.copy_name(path);
        let dest = self.dir.join("files").join(&copy);
        let stored = self.store.as_ref().map(|store| store.put(path));
        let hash = match stored {
            Some(Ok((hash, entry))) if fs::hard_link(&entry, &dest).is_ok() => hash,
            Some(Ok((_, entry))) => store::copy_hashed(&entry, &dest).map_err(io_err(&dest))?,
            Some(Err(e)) => {
                // A broken store costs sharing, not the recording.
                tracing::warn!("cannot put {} into the store: {e}; copying it into the trace", path.display());
                store::copy_hashed(path, &dest).map_err(io_err(path))?
            }
            None => store::copy_hashed(path, &dest).map_err(io_err(path))?,
        };
        self.placed(path, &md, copy, &dest, hash)
    }

    /// A copy of `path`, whose metadata is `md`, for slices of big reads:
    /// a hard link when the recording user (not root) owns the file, which
    /// spares a copy of a big input, else a copy as [`Self::copy_file`]
    /// makes (an edit or chmod through a link to a file of root's or of
    /// another user's would change that file). `Ok(None)` when the file is
    /// the user's but cannot be linked (another filesystem).
    pub fn link_file(&mut self, path: &Path, md: &fs::Metadata) -> Result<Option<MappedFile>, TraceError> {
        if let Some(done) = self.copies.get(&file_key(md)) {
            return Ok(Some(done.clone()));
        }
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        if me == 0 || md.uid() != me {
            return self.copy_file(path).map(Some);
        }
        let copy = self.copy_name(path);
        let dest = self.dir.join("files").join(&copy);
        if fs::hard_link(path, &dest).is_err() {
            return Ok(None);
        }
        let hash = store::hash_file(&dest).map_err(io_err(&dest))?;
        Ok(Some(self.placed(path, md, copy, &dest, hash)?))
    }

    /// `<n>-<basename>`: the name of the next copy under `files/`.
    fn copy_name(&self, path: &Path) -> String {
        let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("{}-{}", self.copies.len(), base)
    }

    /// Remembers and describes the copy `dest` (named `copy`) of `path`,
    /// whose metadata was `md`, holding bytes that hash to `hash`.
    fn placed(&mut self, path: &Path, md: &fs::Metadata, copy: String, dest: &Path, hash: u64) -> Result<MappedFile, TraceError> {
        let size = fs::metadata(dest).map_err(io_err(dest))?.len();
        let mapped = MappedFile { path: path.as_os_str().as_encoded_bytes().to_vec(), copy, size, hash };
        self.copies.insert(file_key(md), mapped.clone());
        Ok(mapped)
    }
}

/// Appends `value`'s encoding to `out`; returns its length in bytes.
/// Errors: it cannot be encoded, or exceeds [`FRAME_MAX`] (it is then
/// taken off `out`), reported against the events file of trace `dir`.
fn encode_into<T: Serialize>(dir: &Path, out: &mut Vec<u8>, value: &T) -> Result<usize, TraceError> {
    let cannot = |what: String| TraceError::Corrupt { path: dir.join("events"), offset: 0, what: format!("cannot encode: {what}") };
    let start = out.len();
    bincode::serialize_into(&mut *out, value).map_err(|e| cannot(e.to_string()))?;
    let len = out.len() - start;
    if len > FRAME_MAX as usize {
        out.truncate(start);
        return Err(cannot(format!("a record of {len} bytes: the format's maximum is {FRAME_MAX}")));
    }
    Ok(len)
}

/// What tells distinct files apart: (device, inode, size, mtime).
fn file_key(md: &fs::Metadata) -> (u64, u64, u64, i64) {
    (md.dev(), md.ino(), md.size(), md.mtime())
}

/// A writer dropped without [`TraceWriter::finish`] (an error unwound the
/// recorder) still lets its thread write what is queued and end.
impl Drop for TraceWriter {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// The writer thread's side: frames records into the events file.
struct FrameWriter {
    path: PathBuf,
    out: BufWriter<File>,
    /// zstd contexts, kept: creating one per frame cost more than the
    /// compression itself (most frames are a few hundred bytes).
    small: zstd::bulk::Compressor<'static>,
    bulk: zstd::bulk::Compressor<'static>,
    /// Encoded events not yet framed.
    batch: Vec<u8>,
    /// The last compressed payload; its buffer is kept for the next.
    compressed: Vec<u8>,
    /// Where the buffers of framed [`Record::Entries`] go back to the
    /// recorder ([`TraceWriter::spare`]).
    spare: mpsc::Sender<Vec<u8>>,
}

impl FrameWriter {
    fn header(&mut self) -> Result<(), TraceError> {
        self.out.write_all(MAGIC).map_err(io_err(&self.path))?;
        self.out.write_all(&VERSION.to_le_bytes()).map_err(io_err(&self.path))
    }

    /// Writes records until the recorder hangs up, handing them to the
    /// kernel within [`FLUSH_EVERY`] and whenever asked. Events are
    /// gathered into frames of up to [`BATCH_MAX`] bytes: compressing each
    /// small event alone cost more than recording it. Once it returns (on
    /// the end or an error) or panics, the recorder's sends fail.
    fn run(mut self, queue: &Handoff<Record>) -> Result<(), TraceError> {
        let _receiving = queue.receiving();
        self.write_all(queue)
    }

    fn write_all(&mut self, queue: &Handoff<Record>) -> Result<(), TraceError> {
        let mut last_flush = Instant::now();
        let mut records = VecDeque::new();
        while queue.take(&mut records, POLL_EVERY) {
            while let Some(record) = records.pop_front() {
                if self.write(record)? {
                    last_flush = Instant::now();
                }
            }
            if last_flush.elapsed() >= POLL_EVERY {
                self.flush()?;
                last_flush = Instant::now();
            }
        }
        self.flush()
    }

    /// Writes `record` into the batch or a frame of its own, or flushes.
    /// Returns whether it flushed.
    fn write(&mut self, record: Record) -> Result<bool, TraceError> {
        match record {
            Record::Entries(mut entries) => {
                // Into an empty batch, the buffers trade places instead of
                // the entries being copied (a message is most often a
                // whole batch).
                if self.batch.is_empty() {
                    std::mem::swap(&mut self.batch, &mut entries);
                } else {
                    self.batch.extend_from_slice(&entries);
                }
                entries.clear();
                // The recorder may have finished: the buffer is freed.
                let _ = self.spare.send(entries);
                if self.batch.len() >= BATCH_MAX {
                    self.end_batch()?;
                }
                Ok(false)
            }
            Record::Frame(raw) => {
                self.end_batch()?;
                let bulk = raw.len() >= BULK_MIN;
                self.frame(raw.into(), bulk).map(|_| false)
            }
            Record::Flush => self.flush().map(|_| true),
        }
    }

    /// Writes the pending batch and hands every frame to the kernel.
    fn flush(&mut self) -> Result<(), TraceError> {
        self.end_batch()?;
        self.out.flush().map_err(io_err(&self.path))
    }

    fn end_batch(&mut self) -> Result<(), TraceError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        // The batch's buffer is kept for the next one.
        let mut raw = std::mem::take(&mut self.batch);
        let framed = self.frame(raw.as_slice().into(), false);
        raw.clear();
        self.batch = raw;
        framed
    }

    /// Frames payload `raw`, compressed at zstd's fast level when `bulk`
    /// (an entry of input data of its own), else at level 1: a batch of
    /// events compresses four times smaller there, no slower (the
    /// syscall-heavy benchmark's 169 MB of entries: 3.8 MB at level 1,
    /// 17.9 MB at -20).
    fn frame(&mut self, raw: Cow<'_, [u8]>, bulk: bool) -> Result<(), TraceError> {
        let (flags, payload) = if raw.len() >= COMPRESS_MIN {
            let compressor = if bulk { &mut self.bulk } else { &mut self.small };
            self.compressed.clear();
            self.compressed.reserve(zstd::zstd_safe::compress_bound(raw.len()));
            compressor.compress_to_buffer(&raw, &mut self.compressed).map_err(io_err(&self.path))?;
            (FLAG_ZSTD, &self.compressed[..])
        } else {
            (0, &raw[..])
        };
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        header[4] = flags;
        header[5..9].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        let header_crc = crc32fast::hash(&header[..9]);
        header[9..].copy_from_slice(&header_crc.to_le_bytes());
        self.out.write_all(&header).map_err(io_err(&self.path))?;
        self.out.write_all(payload).map_err(io_err(&self.path))
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
    /// Reads the trace in `dir`. Fails when `dir` is not a trace, its meta
    /// record is unreadable, or anything follows the End event (a crash
    /// cannot leave that: the file was altered); damage after the meta
    /// record stops reading and is kept in [`Trace::damage`].
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
        if !(OLDEST_READABLE..=VERSION).contains(&found) {
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
        while let Some(next) = frames.next_events() {
            match next {
                Ok(batch) => events.extend(batch),
                Err(e) => {
                    damage = Some(e);
                    break;
                }
            }
            if matches!(events.last(), Some(Event { kind: EventKind::End(_), .. })) && frames.offset < bytes.len() {
                let what = format!("{} bytes after the End event", bytes.len() - frames.offset);
                return Err(TraceError::Corrupt { path: path.clone(), offset: frames.offset as u64, what });
            }
        }
        Ok(Self { dir: dir.to_path_buf(), meta, events, damage })
    }

    /// Every file the recording mapped, with the trace's copy: the
    /// executable and loader of the first exec, those of later execs, then
    /// the files of file-backed mmaps, in log order.
    pub fn mapped_files(&self) -> impl Iterator<Item = &MappedFile> {
        let logged = self.events.iter().flat_map(|e| match &e.kind {
            EventKind::Exec(x) => x.files.iter().collect(),
            EventKind::Syscall(s) => s.file.as_deref().into_iter().collect(),
            _ => Vec::new(),
        });
        self.meta.exec_files.iter().chain(logged)
    }

    /// Path of a copied file (a [`MappedFile::copy`] name) in this trace.
    pub fn file_path(&self, copy: &str) -> PathBuf {
        self.dir.join("files").join(copy)
    }

    /// The bytes of the trace's copy of `file`, checked against the size
    /// and hash taken at the recording. Errors: a copy name that leaves
    /// `files/`, a missing or unreadable copy, or one whose size or bytes
    /// changed since the recording (the message names the copy and the
    /// file it stands for).
    pub fn copy_bytes(&self, file: &MappedFile) -> Result<Vec<u8>, TraceError> {
        let (path, mut f) = self.open_copy(&file.copy)?;
        let len = f.metadata().map_err(io_err(&path))?.len();
        let original = String::from_utf8_lossy(&file.path);
        if len != file.size {
            let what = format!("{len} bytes, the recorded {original} had {}", file.size);
            return Err(TraceError::Changed { path, what });
        }
        let mut bytes = Vec::with_capacity(len as usize);
        f.read_to_end(&mut bytes).map_err(io_err(&path))?;
        if xxhash_rust::xxh3::xxh3_64(&bytes) != file.hash {
            let what = format!("its bytes differ from the recorded {original} (xxh3-64 mismatch)");
            return Err(TraceError::Changed { path, what });
        }
        Ok(bytes)
    }

    /// Opens the copy named `copy` under `files/`, refusing names that are
    /// not a plain file name (a crafted trace must not read other files).
    fn open_copy(&self, copy: &str) -> Result<(PathBuf, File), TraceError> {
        let path = self.file_path(copy);
        if copy.is_empty() || copy.contains('/') || copy == "." || copy == ".." {
            let what = format!("copy name {copy:?} is not a file name");
            return Err(TraceError::Corrupt { path: self.dir.join("events"), offset: 0, what });
        }
        let file = File::open(&path).map_err(io_err(&path))?;
        Ok((path, file))
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
        let (path, file) = self.open_copy(&slice.file.copy)?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        if slice.offset.checked_add(slice.len).is_none_or(|end| end > len) {
            let what = format!("{len} bytes, too short for bytes {}..+{} the program read", slice.offset, slice.len);
            return Err(TraceError::Changed { path, what });
        }
        let mut bytes = vec![0; slice.len as usize];
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
        let at = self.offset as u64;
        let raw = match self.next_payload()? {
            Ok(raw) => raw,
            Err(e) => return Some(Err(e)),
        };
        let corrupt = |what: String| TraceError::Corrupt { path: self.path.to_path_buf(), offset: at, what };
        Some(bincode::deserialize(&raw).map_err(|e| corrupt(format!("undecodable record: {e}"))))
    }

    /// The events of the next frame: one or more entries, back to back,
    /// the runtime's records decoded.
    fn next_events(&mut self) -> Option<Result<Vec<Event>, TraceError>> {
        let at = self.offset as u64;
        let raw = match self.next_payload()? {
            Ok(raw) => raw,
            Err(e) => return Some(Err(e)),
        };
        let corrupt = |what: String| TraceError::Corrupt { path: self.path.to_path_buf(), offset: at, what };
        let mut rest = &raw[..];
        let mut events = Vec::new();
        while !rest.is_empty() {
            match bincode::deserialize_from::<_, Logged>(&mut rest).map(Logged::into_event) {
                Ok(Some(e)) => events.push(e),
                Ok(None) => return Some(Err(corrupt(format!("malformed in-process record (entry {} of the frame)", events.len())))),
                Err(e) => return Some(Err(corrupt(format!("undecodable event {} of the frame: {e}", events.len())))),
            }
        }
        Some(Ok(events))
    }

    /// The next frame's checked and decompressed payload.
    fn next_payload(&mut self) -> Option<Result<Vec<u8>, TraceError>> {
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
        Some(if flags & FLAG_ZSTD != 0 { decompress(payload).map_err(corrupt) } else { Ok(payload.to_vec()) })
    }
}

/// Decompresses a zstd payload into at most the size its frame header
/// declares, which must be at most [`FRAME_MAX`]: a small frame that
/// unpacks to gigabytes (a "zstd bomb") is refused before anything is
/// allocated. weft's writer always declares the size (zstd's one-shot
/// compression does). Errors: what is wrong, for a corrupt-record message.
fn decompress(payload: &[u8]) -> Result<Vec<u8>, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(payload) {
        Ok(Some(size)) => size,
        Ok(None) => return Err("zstd frame does not declare its size".into()),
        Err(_) => return Err("bad zstd frame header".into()),
    };
    if size > u64::from(FRAME_MAX) {
        return Err(format!("zstd frame declares {size} bytes, more than the format's maximum {FRAME_MAX}"));
    }
    let raw = zstd::bulk::decompress(payload, size as usize).map_err(|e| format!("bad zstd data: {e}"))?;
    if raw.len() as u64 != size {
        return Err(format!("zstd frame declares {size} bytes and holds {}", raw.len()));
    }
    Ok(raw)
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
                writes: vec![crate::event::MemWrite { addr: 0x1000, data: Contents::Bytes(vec![i as u8; 1000]) }],
                ..Syscall::bare(0, [0; 6], 1000)
            }),
        }
    }

    /// A trace of `n` events, one frame each (a flush ends a frame).
    fn write_trace(dir: &Path, n: u64) {
        let mut w = TraceWriter::create(dir).unwrap();
        w.write_meta(&meta()).unwrap();
        for i in 0..n {
            w.write_event(event(i)).unwrap();
            w.flush().unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn events_share_frames() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::create(tmp.path()).unwrap();
        w.write_meta(&meta()).unwrap();
        for i in 0..1000 {
            w.write_event(event(i)).unwrap();
        }
        w.finish().unwrap();
        let t = Trace::open(tmp.path()).unwrap();
        assert_eq!(t.events, (0..1000).map(event).collect::<Vec<_>>());
        let frames = Frames { path: tmp.path(), bytes: &fs::read(tmp.path().join("events")).unwrap(), offset: 12 };
        assert!(std::iter::successors(Some(frames), |f| {
            let mut f = Frames { path: f.path, bytes: f.bytes, offset: f.offset };
            f.next_payload().map(|_| f)
        })
        .count() < 20, "1000 small events fit in a few frames");
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

    /// A version 12 trace is read as it is (version 13 only added an
    /// operation); an older or a newer one is refused, naming both.
    #[test]
    fn versions_read_and_refused() {
        let tmp = tempfile::tempdir().unwrap();
        write_trace(tmp.path(), 2);
        let path = tmp.path().join("events");
        let with_version = |v: u32| {
            let mut bytes = fs::read(&path).unwrap();
            bytes[8..12].copy_from_slice(&v.to_le_bytes());
            fs::write(&path, &bytes).unwrap();
            Trace::open(tmp.path())
        };
        assert_eq!(with_version(OLDEST_READABLE).unwrap().events.len(), 2);
        for v in [OLDEST_READABLE - 1, VERSION + 1] {
            let msg = with_version(v).err().unwrap().to_string();
            assert!(msg.contains(&format!("version {v},")) && msg.contains(&format!("versions {OLDEST_READABLE} to {VERSION}")), "{msg}");
        }
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
    fn a_zstd_frame_must_declare_a_bounded_size() {
        let raw = vec![7u8; 4096];
        let undeclared = zstd::stream::encode_all(&raw[..], 1).unwrap();
        assert_eq!(decompress(&undeclared).unwrap_err(), "zstd frame does not declare its size");
        let declared = zstd::bulk::compress(&raw, 1).unwrap();
        assert_eq!(decompress(&declared).unwrap(), raw);
    }

    #[test]
    fn bytes_after_the_end_event_refuse_the_trace() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::create(tmp.path()).unwrap();
        w.write_meta(&meta()).unwrap();
        w.write_event(Event { tid: 100, label: 0, kind: EventKind::End(crate::event::End::Exited(0)) }).unwrap();
        w.finish().unwrap();
        assert!(Trace::open(tmp.path()).unwrap().damage.is_none());
        let path = tmp.path().join("events");
        let len = fs::metadata(&path).unwrap().len();
        File::options().append(true).open(&path).unwrap().write_all(b"x").unwrap();
        let msg = Trace::open(tmp.path()).err().unwrap().to_string();
        assert!(msg.ends_with(&format!("corrupt record at offset {len}: 1 bytes after the End event")), "{msg}");
    }

    #[test]
    fn foreign_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(Trace::open(tmp.path()), Err(TraceError::NotATrace { .. })));
        fs::write(tmp.path().join("events"), b"hello world, not a trace").unwrap();
        assert!(matches!(Trace::open(tmp.path()), Err(TraceError::BadMagic { .. })));
    }
}
