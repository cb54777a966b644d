//! The process tree of a trace, as `weft ps` and `weft dump` show it (rr
//! ps): every recorded process, its parent, the program it ran last, and
//! how it ended, read off the events (spawns without CLONE_THREAD, exec
//! events, exit_group calls, the end).

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
    /// Its exit status, if it called exit_group (or, for the first
    /// process, how the recording ended); `None` when unknown (a signal
    /// killed it).
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
            EventKind::Syscall(s) if s.nr == libc::SYS_exit_group => procs[p].exit = Some((s.args[0] as i32).to_string()),
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
