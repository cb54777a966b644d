//! Helpers for the debugger tests: a `weft replay -s PORT TRACE` server as
//! a child process, gdb and lldb sessions against it, a raw gdb-remote
//! (RSP) client, and subprocesses that are killed after a timeout so a
//! hang fails the test instead of hanging CI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long any one debugger session (gdb, lldb, a scripted `weft replay
/// -- ...`) may take before it is killed and the test fails.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(120);

/// What a finished subprocess printed: stdout and stderr interleaved as
/// written (both go to one file), and how it ended (None: it was killed
/// after its timeout).
pub struct Transcript {
    pub text: String,
    pub status: Option<ExitStatus>,
}

impl Transcript {
    /// The text printed between the marker `@@name` (see `gdb_session`)
    /// and the next marker, or the end. Panics when the marker is missing.
    pub fn section(&self, name: &str) -> &str {
        let marker = format!("@@{name}\n");
        let start = match self.text.find(&marker) {
            Some(i) => i + marker.len(),
            None => panic!("no section @@{name} in the transcript:\n{}", self.text),
        };
        let rest = &self.text[start..];
        let end = rest.find("@@").unwrap_or(rest.len());
        &rest[..end]
    }

    /// The section of an lldb batch transcript that follows the echoed
    /// command `(lldb) CMD` (its `n`th occurrence, from 0), up to the next
    /// echoed command.
    pub fn lldb_output(&self, cmd: &str, n: usize) -> &str {
        let echo = format!("(lldb) {cmd}\n");
        let mut from = 0;
        let mut found = None;
        for _ in 0..=n {
            match self.text[from..].find(&echo) {
                Some(i) => {
                    found = Some(from + i + echo.len());
                    from = from + i + echo.len();
                }
                None => panic!("lldb did not run `{cmd}` {} times:\n{}", n + 1, self.text),
            }
        }
        let rest = &self.text[found.unwrap()..];
        let end = rest.find("(lldb) ").unwrap_or(rest.len());
        &rest[..end]
    }
}

/// Runs `cmd` (in its own process group) with stdout and stderr going to
/// one file, killing its process group after `timeout`.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Transcript {
    let out = scratch_file("transcript");
    let file = std::fs::File::create(&out).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let status = wait_or_kill(&mut child, timeout);
    let text = String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned();
    let _ = std::fs::remove_file(&out);
    Transcript { text, status }
}

/// Waits for `child` (the leader of its own process group) for at most
/// `timeout`, then kills its process group. None when it was killed.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() > deadline {
            kill_group(child.id());
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill_group(pgid: u32) {
    unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
}

/// A new file name in the scratch directory.
pub fn scratch_file(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = super::scratch().join("gdb");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{what}-{}-{n}", std::process::id()))
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Whether some socket listens on 127.0.0.1:port or 0.0.0.0:port (read
/// from /proc/net/tcp, so that looking does not connect: a connection
/// would count as the server's client).
pub fn listening(port: u16) -> bool {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let want = [format!("0100007F:{port:04X}"), format!("00000000:{port:04X}")];
    tcp.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && want.iter().any(|w| w == f[1]) && f[3] == "0A"
    })
}

/// `weft replay -s PORT TRACE`, running as a child process in its own
/// process group (killed, with everything in that group, when dropped).
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The replayed program's stdout and weft's stderr.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl Server {
    /// Starts the server on a free port and waits (at most 60 s) until it
    /// listens. Panics with weft's stderr if weft exits first.
    pub fn start(trace: &Path) -> Server {
        for _ in 0..3 {
            let port = free_port();
            let stdout = scratch_file("server-stdout");
            let stderr = scratch_file("server-stderr");
            let child = super::weft()
                .args(["replay", "-s", &port.to_string()])
                .arg(trace)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&stdout).unwrap())
                .stderr(std::fs::File::create(&stderr).unwrap())
                .process_group(0)
                .spawn()
                .expect("run weft replay -s");
            let mut server = Server { child, port, stdout, stderr };
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if listening(port) {
                    return server;
                }
                if let Some(st) = server.child.try_wait().unwrap() {
                    let err = server.stderr_text();
                    if err.contains("Address already in use") {
                        break; // someone took the port: try another
                    }
                    panic!("weft replay -s {port} exited ({st}) before listening:\n{err}");
                }
                if Instant::now() > deadline {
                    panic!("weft replay -s {port} did not listen within 60 s:\n{}", server.stderr_text());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("no free port for weft replay -s");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stderr).unwrap_or_default()).into_owned()
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stdout).unwrap_or_default()).into_owned()
    }

    /// Whether weft still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Runs gdb (`gdb -batch -nx`, the executable `exe`) connected to this
    /// server with the commands `cmds` (see `gdb_session`).
    pub fn gdb(&self, exe: &Path, cmds: &[&str]) -> Transcript {
        gdb_session(self.port, exe, cmds)
    }

    /// Runs `lldb-22 EXE --batch` connected to this server with the
    /// commands `cmds`, each echoed as `(lldb) CMD` in the transcript.
    pub fn lldb(&self, exe: &Path, cmds: &[&str]) -> Transcript {
        let mut c = Command::new("lldb-22");
        c.arg(exe).args(["--no-lldbinit", "--batch"]);
        c.arg("-o").arg(format!("gdb-remote 127.0.0.1:{}", self.port));
        for cmd in cmds {
            c.arg("-o").arg(cmd);
        }
        run_with_timeout(&mut c, SESSION_TIMEOUT)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `gdb -batch -nx EXE` with `target remote 127.0.0.1:PORT` and then
/// each of `cmds` as its own `-ex` (so that one failing command, as an
/// expected error, does not end the session). A command `@name` becomes
/// `echo @@name\n`, a marker that `Transcript::section` finds.
pub fn gdb_session(port: u16, exe: &Path, cmds: &[&str]) -> Transcript {
    let mut c = gdb_command(exe);
    c.arg("-ex").arg(format!("target remote 127.0.0.1:{port}"));
    for cmd in cmds {
        c.arg("-ex").arg(gdb_cmd(cmd));
    }
    run_with_timeout(&mut c, SESSION_TIMEOUT)
}

/// `gdb -batch -nx` with the settings every session uses, and `exe`.
pub fn gdb_command(exe: &Path) -> Command {
    let mut c = Command::new("gdb");
    c.args(["-batch", "-nx"])
        .env("DEBUGINFOD_URLS", "")
        .args(["-ex", "set confirm off", "-ex", "set pagination off", "-ex", "set width 0"])
        .arg(exe);
    c
}

/// A script line: `@name` becomes the echo command of marker `@@name`.
pub fn gdb_cmd(cmd: &str) -> String {
    match cmd.strip_prefix('@') {
        Some(name) => format!("echo @@{name}\\n"),
        None => cmd.to_string(),
    }
}

/// Writes `cmds` (markers as in `gdb_session`) to a gdb script file.
pub fn gdb_script(cmds: &[&str]) -> PathBuf {
    let path = scratch_file("script").with_extension("gdb");
    let text: Vec<String> = cmds.iter().map(|c| gdb_cmd(c)).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path
}

/// The value of the last `print` in `text`: what follows `$N = ` on its
/// line. Panics when there is none.
pub fn printed(text: &str) -> String {
    let line = text
        .lines().rfind(|l| l.starts_with('$') && l.contains(" = "))
        .unwrap_or_else(|| panic!("no `$N = value` line in:\n{text}"));
    line.split_once(" = ").unwrap().1.trim().to_string()
}

/// `text` with gdb's value history numbers (`$12 = `) removed, to compare
/// two prints of the same expressions.
pub fn without_history_numbers(text: &str) -> String {
    text.lines()
        .map(|l| match (l.starts_with('$'), l.split_once(" = ")) {
            (true, Some((_, v))) => format!("$ = {v}"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rows of gdb's `info threads`: (current, gdb number, tid, rest of
/// the line). The tid is the number after `Thread ` (the part after the
/// dot in `Thread PID.TID`) or after `LWP `.
pub fn info_threads(text: &str) -> Vec<(bool, u32, u32, String)> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let current = line.starts_with('*');
        let rest = line.trim_start_matches('*').trim_start();
        let Some((num, rest)) = rest.split_once(char::is_whitespace) else { continue };
        let Ok(num) = num.parse::<u32>() else { continue };
        let rest = rest.trim_start();
        let id = if let Some(i) = rest.find("LWP ") {
            &rest[i + 4..]
        } else if let Some(r) = rest.strip_prefix("Thread ") {
            r
        } else {
            continue;
        };
        let id: String = id.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let tid = id.rsplit('.').next().unwrap_or("").parse::<u32>();
        if let Ok(tid) = tid {
            rows.push((current, num, tid, line.to_string()));
        }
    }
    rows
}

/// The event number in the output of `monitor when`: the number after the
/// word "event" if there is one, else the first number.
pub fn event_number(text: &str) -> u64 {
    let lower = text.to_lowercase();
    let digits = |s: &str| -> Option<u64> {
        let d: String = s.chars().skip_while(|c| !c.is_ascii_digit()).take_while(|c| c.is_ascii_digit()).collect();
        d.parse().ok()
    };
    // "event 123", "event: 123", "event #123" on the same line.
    if let Some(i) = lower.find("event") {
        let line = lower[i + 5..].lines().next().unwrap_or("");
        if let Some(n) = digits(line) {
            return n;
        }
    }
    digits(&lower).unwrap_or_else(|| panic!("no event number in `monitor when` output: {text:?}"))
}

/// Every descendant process of `pid` (children, their children...), read
/// from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Some(ppid) = stat_field(p, 1) {
            parent_of.push((p, ppid.parse::<u32>().unwrap_or(0)));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(q) = todo.pop() {
        for &(p, pp) in &parent_of {
            if pp == q && !out.contains(&p) {
                out.push(p);
                todo.push(p);
            }
        }
    }
    out
}

/// Field `n` (0: state, 1: ppid, ...) of /proc/PID/stat after the command
/// name.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n).map(String::from)
}

/// Whether process `pid` exists and is not a zombie.
pub fn process_lives(pid: u32) -> bool {
    matches!(stat_field(pid, 0).as_deref(), Some(s) if s != "Z" && s != "X")
}

/// A minimal gdb-remote (RSP) client, for the tests that need a client
/// gdb would not be: malformed packets, two clients at once.
pub struct Rsp {
    pub stream: TcpStream,
}

impl Rsp {
    pub fn connect(port: u16) -> std::io::Result<Rsp> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Rsp { stream })
    }

    /// Sends raw bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends `$payload#checksum`.
    pub fn send(&mut self, payload: &str) -> std::io::Result<()> {
        let sum = payload.bytes().fold(0u8, |a, b| a.wrapping_add(b));
        self.send_raw(format!("${payload}#{sum:02x}").as_bytes())
    }

    /// Reads the next packet's payload (skipping acks, acknowledging the
    /// packet, expanding run-length encoding). Err on EOF, reset or a 10 s timeout.
    pub fn recv(&mut self) -> std::io::Result<String> {
        let mut byte = [0u8; 1];
        loop {
            self.read1(&mut byte)?;
            if byte[0] == b'$' {
                break;
            }
        }
        let mut payload = Vec::new();
        loop {
            self.read1(&mut byte)?;
            if byte[0] == b'#' {
                break;
            }
            payload.push(byte[0]);
        }
        let mut sum = [0u8; 2];
        self.read1(&mut sum[..1])?;
        self.read1(&mut sum[1..])?;
        self.send_raw(b"+")?;
        // Expand run-length encoding: `X*n` is X repeated n - 29 more times.
        let mut out = Vec::with_capacity(payload.len());
        let mut i = 0;
        while i < payload.len() {
            if payload[i] == b'*' && i + 1 < payload.len() && !out.is_empty() {
                let prev = *out.last().unwrap();
                out.extend(std::iter::repeat_n(prev, payload[i + 1].saturating_sub(29) as usize));
                i += 2;
            } else {
                out.push(payload[i]);
                i += 1;
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Sends a packet and returns the reply's payload.
    pub fn ask(&mut self, payload: &str) -> std::io::Result<String> {
        self.send(payload)?;
        self.recv()
    }

    fn read1(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        match self.stream.read(buf)? {
            0 => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed")),
            _ => Ok(()),
        }
    }
}
