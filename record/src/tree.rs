//! The process tree of a trace, as `weft ps` and `weft dump` show it (rr
//! ps): every recorded process, its parent, the program it ran last, and
//! how it ended, read off the events (spawns without CLONE_THREAD, exec
//! events, exit_group calls, the statuses its parent's waits collected,
//! the end).

use crate::event::{is_new_process, End, EventKind, Tid};
use crate::Trace;
use std::collections::HashMap;

/// One recorded process.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    /// Its recorded pid.
    pub pid: Tid,
    /// The recorded pid of the process that forked it (`None`: the first).
    pub parent: Option<Tid>,
    /// The argv of the last program it exec'd (its parent's, if it never
    /// exec'd).
    pub argv: Vec<Vec<u8>>,
    /// How many times it exec'd.
    pub execs: usize,
    /// How it ended: its exit status, or `-SIGNO` for the signal that
    /// killed it, as a wait of its parent's collected it (else as it
    /// called exit_group, or, for the first process, as the recording
    /// ended); `None` when unknown.
    pub exit: Option<String>,
}

/// The processes of `trace`, in the order they were created.
pub fn processes(trace: &Trace) -> Vec<Process> {
    let meta = &trace.meta;
    let mut procs = vec![Process { pid: meta.pid, parent: None, argv: meta.argv.clone(), execs: 0, exit: None }];
    // The process of each thread, by recorded tid.
    let mut of: HashMap<Tid, usize> = HashMap::from([(meta.pid, 0)]);
    for e in &trace.events {
        let Some(&p) = of.get(&e.tid) else { continue };
        match &e.kind {
            EventKind::Spawn { child, flags } if is_new_process(*flags) => {
                let argv = procs[p].argv.clone();
                of.insert(*child, procs.len());
                procs.push(Process { pid: *child, parent: Some(procs[p].pid), argv, execs: 0, exit: None });
            }
            EventKind::Spawn { child, .. } => {
                of.insert(*child, p);
            }
            EventKind::Exec(x) => {
                procs[p].argv = x.argv.clone();
                procs[p].execs += 1;
            }
            // The kernel keeps the low 8 bits (exit_group(2)).
            EventKind::Syscall(s) if s.nr == libc::SYS_exit_group => procs[p].exit = Some((s.args[0] & 0xff).to_string()),
            EventKind::Syscall(s) => {
                if let Some((child, how)) = waited(trace, s) {
                    if let Some(q) = procs.iter_mut().find(|q| q.pid == child) {
                        q.exit = Some(how);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(EventKind::End(end)) = trace.events.last().map(|e| &e.kind) {
        procs[0].exit = Some(match end {
            End::Exited(code) => code.to_string(),
            End::Killed { signo, .. } => format!("-{signo}"),
        });
    }
    procs
}

/// The child and how it ended (`N`, or `-SIGNO`) that a wait4 or waitid
/// `s` collected, from the status it wrote (wait(2)): `None` for a wait
/// that collected no end (a stop, WNOHANG with none, a failure).
fn waited(trace: &Trace, s: &crate::event::Syscall) -> Option<(Tid, String)> {
    let written = |addr: u64| s.writes.iter().find(|w| w.addr == addr && addr != 0).and_then(|w| trace.contents(&w.data).ok());
    let word = |b: &[u8], at: usize| Some(i32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    match s.nr {
        libc::SYS_wait4 if s.result > 0 => {
            let status = word(&written(s.args[1])?, 0)?;
            let how = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status).to_string()
            } else if libc::WIFSIGNALED(status) {
                format!("-{}", libc::WTERMSIG(status))
            } else {
                return None;
            };
            Some((s.result as Tid, how))
        }
        libc::SYS_waitid if s.result == 0 => {
            // siginfo_t: si_code at 8; for SIGCHLD, si_pid at 16 and
            // si_status at 24.
            let info = written(s.args[2])?;
            let (code, pid, status) = (word(&info, 8)?, word(&info, 16)?, word(&info, 24)?);
            match code {
                libc::CLD_EXITED => Some((pid, status.to_string())),
                libc::CLD_KILLED | libc::CLD_DUMPED => Some((pid, format!("-{status}"))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `PID PPID EXIT CMD` lines, as `rr ps` prints them (a process killed
/// by a signal shows `-SIGNO` when the trace knows it, else `?`).
pub fn ps_lines(procs: &[Process]) -> Vec<String> {
    let mut lines = vec!["PID\tPPID\tEXIT\tCMD".to_string()];
    for p in procs {
        let argv: Vec<_> = p.argv.iter().map(|a| String::from_utf8_lossy(a)).collect();
        let parent = p.parent.map_or("--".to_string(), |q| q.to_string());
        lines.push(format!("{}\t{}\t{}\t{}", p.pid, parent, p.exit.as_deref().unwrap_or("?"), argv.join(" ")));
    }
    lines
}
