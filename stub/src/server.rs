//! The server: one session, gdb clients one at a time over TCP (GDB RSP,
//! "Remote Protocol Overview"). A thread accepts connections; the first
//! goes to the session's thread (the one that must make every ptrace
//! call), and one that comes while a client is attached is answered `E01`
//! and closed. A client that goes (detach, `kill`, a dropped connection,
//! a protocol error) leaves the session where it is for the next.
//!
//! The bytes gdb sends are read here, not by gdbstub, so that a running
//! replay can look for gdb's interrupt (a bare `0x03` byte; GDB RSP,
//! "Interrupts") without blocking, and hand everything to gdbstub's state
//! machine afterwards, but for the packets weft answers itself
//! (`qGetTLSAddr`, `qShlibInfoAddr`, `vKill`: [`crate::intercept`]).

use crate::intercept::{Intercept, Taken, Unread};
use crate::stop;
use crate::target::ReplayTarget;
use anyhow::{Context, Result};
use gdbstub::stub::state_machine::GdbStubStateMachine;
use gdbstub::stub::{DisconnectReason, GdbStubBuilder, MultiThreadStopReason};
use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use weft_replay::ReplaySession;

/// How often the accepting thread and the session's thread look at their
/// stop flags while idle.
const POLL: Duration = Duration::from_millis(50);

/// The reply to a second client: an error packet (GDB RSP, "Standard
/// Replies": `E NN`, here with its checksum `'E'+'0'+'1' = 0xa6`), which
/// gdb prints as "Remote failure reply: E01".
const BUSY_REPLY: &[u8] = b"$E01#a6";

/// How [`serve`] runs.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Set by the caller (from any thread) to make [`serve`] return once
    /// no client is attached; never set, `serve` serves forever.
    pub stop: Arc<AtomicBool>,
}

/// Serves gdb clients on `listener`, one at a time, until `opts.stop` is
/// set. The session stays where the last client left it. Errors: the
/// listener fails; a client's protocol or session error only ends that
/// client (it is logged on stderr).
pub fn serve(session: &mut ReplaySession<'_>, listener: TcpListener, opts: &ServeOptions) -> Result<()> {
    listener.set_nonblocking(true).context("cannot poll the listening socket")?;
    let busy = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let acceptor = {
        let (busy, done) = (busy.clone(), done.clone());
        std::thread::Builder::new().name("weft-accept".into()).spawn(move || accept(&listener, &busy, &done, &tx))?
    };
    let mut target = ReplayTarget::new(session);
    let result = loop {
        if opts.stop.load(Ordering::SeqCst) {
            break Ok(());
        }
        match rx.recv_timeout(POLL) {
            Ok((stream, peer)) => {
                eprintln!("weft: gdb connected from {peer}");
                if let Some(f) = target.known_failure() {
                    eprintln!("weft: note: no valid schedule was found; the replay stops at: {}", f.to_string().lines().next().unwrap_or_default());
                }
                match serve_client(&mut target, stream) {
                    Ok(end) => eprintln!("weft: gdb at {peer} {end}; waiting for the next client"),
                    Err(e) => eprintln!("weft: gdb at {peer} dropped: {e:#}; waiting for the next client"),
                }
                busy.store(false, Ordering::SeqCst);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err(anyhow::anyhow!("the listening socket failed")),
        }
    };
    done.store(true, Ordering::SeqCst);
    let accepted = acceptor.join().map_err(|_| anyhow::anyhow!("the accepting thread panicked"))?;
    result.and(accepted)
}

/// The accepting thread: hands a client over when none is attached
/// (`busy`), refuses it otherwise, until `done`.
fn accept(
    listener: &TcpListener,
    busy: &AtomicBool,
    done: &AtomicBool,
    clients: &mpsc::Sender<(TcpStream, SocketAddr)>,
) -> Result<()> {
    while !done.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                stream.set_nonblocking(false)?;
                if busy.swap(true, Ordering::SeqCst) {
                    eprintln!("weft: refused gdb from {peer}: another client is attached");
                    let _ = stream.write_all(BUSY_REPLY);
                } else if clients.send((stream, peer)).is_err() {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("accepting a gdb connection"),
        }
    }
    Ok(())
}

/// How a client's session ended.
enum ClientEnd {
    /// The connection closed.
    Closed,
    /// gdb said so (`D`, `k`), or the program's end was reported.
    Disconnected(DisconnectReason),
}

impl std::fmt::Display for ClientEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientEnd::Closed => write!(f, "closed the connection"),
            ClientEnd::Disconnected(DisconnectReason::Disconnect) => write!(f, "detached"),
            ClientEnd::Disconnected(DisconnectReason::Kill) => write!(f, "killed the program (the replay stays)"),
            ClientEnd::Disconnected(DisconnectReason::TargetExited(code)) => {
                write!(f, "saw the program exit with status {code}")
            }
            ClientEnd::Disconnected(DisconnectReason::TargetTerminated(sig)) => {
                write!(f, "saw the program terminated by signal {}", sig.0)
            }
        }
    }
}

/// Bytes from the client, read by us for gdbstub.
struct Incoming {
    fd: RawFd,
    /// Read, not yet handed to gdbstub.
    pending: VecDeque<u8>,
    /// The client closed the connection (or it failed).
    closed: bool,
}

impl Incoming {
    /// Takes what the client has sent so far, without blocking. True when
    /// it asks the target to stop: an interrupt byte, or a closed
    /// connection.
    fn poll(&mut self) -> bool {
        let mut buf = [0u8; 256];
        while !self.closed {
            // SAFETY: `buf` is valid for its length; `fd` is the open socket.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            match n {
                0 => self.closed = true,
                n if n > 0 => self.pending.extend(&buf[..n as usize]),
                _ => match std::io::Error::last_os_error().kind() {
                    std::io::ErrorKind::Interrupted => {}
                    std::io::ErrorKind::WouldBlock => break,
                    _ => self.closed = true,
                },
            }
        }
        self.closed || self.pending.contains(&0x03)
    }

    /// The next byte, waiting for it; `None` once the connection closed.
    fn next(&mut self) -> Option<u8> {
        while self.pending.is_empty() && self.read_more() {}
        self.pending.pop_front()
    }
}

impl Unread for Incoming {
    fn unread(&mut self) -> &mut VecDeque<u8> {
        &mut self.pending
    }

    fn read_more(&mut self) -> bool {
        while !self.closed {
            let mut buf = [0u8; 4096];
            // SAFETY: as in `poll`.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            match n {
                0 => self.closed = true,
                n if n > 0 => {
                    self.pending.extend(&buf[..n as usize]);
                    return true;
                }
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => self.closed = true,
            }
        }
        false
    }
}

/// The largest packet weft takes and offers (`PacketSize` in
/// `qSupported`), in bytes: gdb reads files through host I/O
/// ([`crate::hostio`]) and memory in pieces this large; gdbstub's default
/// of 4 KiB made loading libc's symbols from the target take 8 s.
const PACKET_SIZE: usize = 64 * 1024;

/// gdbstub's connection: its replies to the client, each kept until
/// gdbstub flushes it. (gdbstub's own `TcpStream` connection sends every
/// byte as a TCP segment of its own, under TCP_NODELAY: a 64 KiB file
/// read took a second.) The server reads the client itself
/// ([`Incoming`]).
struct Replies {
    stream: TcpStream,
    out: Vec<u8>,
}

impl gdbstub::conn::Connection for Replies {
    type Error = std::io::Error;

    /// Keeps `byte`, but sends an acknowledgement (`+` where no reply has
    /// begun: a reply starts with `$`) at once, as the client may wait
    /// for it while the command runs.
    fn write(&mut self, byte: u8) -> std::io::Result<()> {
        self.out.push(byte);
        if byte == b'+' && self.out.len() == 1 {
            self.flush()?;
        }
        Ok(())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Write::write_all(&mut self.stream, &self.out)?;
        self.out.clear();
        Ok(())
    }

    fn on_session_start(&mut self) -> std::io::Result<()> {
        self.stream.set_nodelay(true)
    }
}

/// Serves one client until it goes. Errors: gdbstub's (a malformed
/// packet, a failed write) or the session's.
fn serve_client(target: &mut ReplayTarget<'_, '_>, stream: TcpStream) -> Result<ClientEnd> {
    let mut incoming = Incoming { fd: stream.as_raw_fd(), pending: VecDeque::new(), closed: false };
    let mut intercept = Intercept::default();
    target.files.clear();
    let mut replies = stream.try_clone().context("cannot share the client's socket")?;
    let stub = GdbStubBuilder::new(Replies { stream, out: Vec::new() }).packet_buffer_size(PACKET_SIZE).build().context("cannot set up the protocol's buffer")?;
    let mut machine = stub.run_state_machine(target)?;
    // Whether the interrupt came while gdb waited for a stop (else it
    // crossed a stop reply, and is dropped).
    let mut running = false;
    loop {
        machine = match machine {
            GdbStubStateMachine::Idle(gdb) => {
                running = false;
                if let Some(taken) = intercept.take(&mut incoming) {
                    let reply = match &taken {
                        Taken::Tls(args) => target.tls_address(args).map_or_else(|| "E01".to_owned(), |a| format!("{a:x}")),
                        Taken::Kill => "OK".to_owned(),
                        Taken::ShlibInfoAddr => target.debug_slot().map_or_else(|| "E01".to_owned(), |a| format!("{a:x}")),
                    };
                    replies.write_all(&intercept.frame(&reply)).context("answering a packet weft takes")?;
                    if taken == Taken::Kill {
                        return Ok(ClientEnd::Disconnected(DisconnectReason::Kill));
                    }
                    GdbStubStateMachine::Idle(gdb)
                } else {
                    match incoming.next() {
                        Some(byte) => {
                            intercept.passed(byte);
                            target.any_step_thread = intercept.step_thread();
                            gdb.incoming_data(target, byte)?
                        }
                        None => return Ok(ClientEnd::Closed),
                    }
                }
            }
            GdbStubStateMachine::Running(gdb) => {
                running = true;
                match incoming.pending.pop_front() {
                    Some(byte) => {
                        intercept.passed(byte);
                        gdb.incoming_data(target, byte)?
                    }
                    None => {
                        let reason = target.run(&mut || incoming.poll())?;
                        if incoming.closed {
                            return Ok(ClientEnd::Closed);
                        }
                        note_stop(&mut intercept, target, &reason);
                        gdb.report_stop(target, reason)?
                    }
                }
            }
            GdbStubStateMachine::CtrlCInterrupt(gdb) => {
                let reason: Option<MultiThreadStopReason<u64>> = running.then(|| target.interrupted());
                if let Some(reason) = &reason {
                    note_stop(&mut intercept, target, reason);
                }
                gdb.interrupt_handled(target, reason)?
            }
            GdbStubStateMachine::Disconnected(gdb) => return Ok(ClientEnd::Disconnected(gdb.get_reason())),
        };
    }
}

/// A stop is reported: its thread becomes gdb's general thread
/// ([`Intercept::stopped_in`]), which a `bs` after `Hc0` steps.
fn note_stop(intercept: &mut Intercept, target: &mut ReplayTarget<'_, '_>, reason: &MultiThreadStopReason<u64>) {
    if let Some(tid) = stop::thread_of(reason) {
        intercept.stopped_in(tid);
        target.any_step_thread = intercept.step_thread();
    }
}
