//! `weft dump` and `weft ls`: a trace's events, readable or as JSON lines.

use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use weft_record::epochs::{event_class, Epoch};
use weft_record::event::{dump_line, signal_name, Event, EventKind};
use weft_record::{syscalls, Trace};

/// One event as a JSON object (buffers summarized by their length), with
/// the index of its `epoch` and, for a call, its `class`.
fn event_json(index: usize, e: &Event, epoch: usize) -> Value {
    let mut v = json!({ "index": index, "tid": e.tid, "label": e.label, "epoch": epoch });
    let o = v.as_object_mut().expect("object");
    if let Some(class) = event_class(&e.kind) {
        o.insert("class".into(), json!(class.name()));
    }
    match &e.kind {
        EventKind::Syscall(s) => {
            o.insert("kind".into(), json!("syscall"));
            o.insert("syscall".into(), json!(syscalls::name(s.nr)));
            o.insert("nr".into(), json!(s.nr));
            o.insert("args".into(), json!(s.args));
            o.insert("result".into(), json!(s.result));
            o.insert("bytes_in".into(), json!(s.writes.iter().map(|w| w.data.len()).sum::<usize>()));
            if let Some(p) = &s.path {
                o.insert("path".into(), json!(String::from_utf8_lossy(p)));
            }
            if let Some(h) = s.output_hash {
                o.insert("output_hash".into(), json!(format!("{h:016x}")));
            }
            if let Some(f) = &s.file {
                o.insert("file".into(), json!(String::from_utf8_lossy(&f.path)));
            }
            if s.unsupported {
                o.insert("unsupported".into(), json!(true));
            }
        }
        EventKind::Spawn { child, flags } => {
            o.insert("kind".into(), json!("spawn"));
            o.insert("child".into(), json!(child));
            o.insert("flags".into(), json!(flags));
        }
        EventKind::Signal(s) => {
            o.insert("kind".into(), json!("signal"));
            o.insert("signal".into(), json!(signal_name(s.signo)));
            o.insert("code".into(), json!(s.code));
            o.insert("addr".into(), json!(s.addr));
            o.insert("synchronous".into(), json!(s.synchronous));
        }
        EventKind::Rdtsc { tsc, aux, .. } => {
            o.insert("kind".into(), json!("rdtsc"));
            o.insert("tsc".into(), json!(tsc));
            o.insert("aux".into(), json!(aux));
        }
        EventKind::Exec(x) => {
            o.insert("kind".into(), json!("exec"));
            o.insert("argv".into(), json!(x.argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()));
            o.insert("exe".into(), json!(x.files.first().map(|f| String::from_utf8_lossy(&f.path))));
        }
        EventKind::Sync(s) => {
            o.insert("kind".into(), json!("sync"));
            o.insert("op".into(), json!(format!("{:?}", s.op)));
            o.insert("var".into(), json!(s.var));
            o.insert("result".into(), json!(s.result));
        }
        EventKind::End(end) => {
            o.insert("kind".into(), json!("end"));
            o.insert("end".into(), json!(end.to_string()));
        }
    }
    v
}

/// Prints the trace at `dir` to stdout. A damaged tail is reported on
/// stderr after the readable events, and so is a missing End event (a
/// killed recorder); both make the result an error.
pub fn dump(dir: &Path, as_json: bool) -> Result<()> {
    let trace = Trace::open(dir)?;
    if quiet_if_reader_quit(print_trace(dir, &trace, as_json))? {
        return Ok(());
    }
    if let Some(d) = trace.damage {
        return Err(d.into());
    }
    match trace.events.last() {
        Some(Event { kind: EventKind::End(_), .. }) => Ok(()),
        _ => bail!(
            "{}: incomplete trace: no End event after {} events (the recorder was killed?)",
            dir.join("events").display(),
            trace.events.len()
        ),
    }
}

/// Writes `trace`, read from `dir`, to stdout: text or JSON lines.
fn print_trace(dir: &Path, trace: &Trace, as_json: bool) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let epochs = trace.epochs();
    if as_json {
        let m = &trace.meta;
        let meta = json!({
            "meta": {
                "argv": m.argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>(),
                "cwd": String::from_utf8_lossy(&m.cwd),
                "exe": String::from_utf8_lossy(&m.exe),
                "pid": m.pid,
                "cpu": { "model": m.cpu.model, "signature": m.cpu.signature },
                "events": trace.events.len(),
                "epochs": epochs.len(),
            }
        });
        writeln!(out, "{meta}")?;
        for epoch in &epochs {
            for i in epoch.events.clone() {
                writeln!(out, "{}", event_json(i, &trace.events[i], epoch.index))?;
            }
        }
    } else {
        let argv: Vec<_> = trace.meta.argv.iter().map(|a| String::from_utf8_lossy(a)).collect();
        let (pid, events) = (trace.meta.pid, trace.events.len());
        let epochs_n = format!("{} epoch{}", epochs.len(), if epochs.len() == 1 { "" } else { "s" });
        writeln!(out, "trace {}: {} (pid {pid}), {events} events in {epochs_n}", dir.display(), argv.join(" "))?;
        writeln!(out, "recorded on {}", trace.meta.cpu)?;
        let procs = weft_record::tree::processes(trace);
        if procs.len() > 1 {
            writeln!(out, "process tree:")?;
            for line in weft_record::tree::ps_lines(&procs) {
                writeln!(out, "  {line}")?;
            }
        }
        for epoch in &epochs {
            print_epoch(&mut out, trace, epoch)?;
        }
    }
    out.flush()
}

/// Writes `epoch` of `trace` as text: a line saying where it ends and
/// why, then its events.
fn print_epoch(out: &mut impl Write, trace: &Trace, epoch: &Epoch) -> io::Result<()> {
    writeln!(out, "── {}", epoch.summary(&trace.events))?;
    for i in epoch.events.clone() {
        writeln!(out, "{}", dump_line(i, &trace.events[i]))?;
    }
    Ok(())
}

/// `weft ps`: the processes of the trace at `dir`, as `rr ps` lists them.
pub fn ps(dir: &Path) -> Result<()> {
    let trace = Trace::open(dir)?;
    let mut out = std::io::stdout().lock();
    for line in weft_record::tree::ps_lines(&weft_record::tree::processes(&trace)) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// Lists the recorded traces, one line each: directory, events, command.
pub fn ls() -> Result<()> {
    quiet_if_reader_quit(print_list(&weft_record::dirs::list_traces()?))?;
    Ok(())
}

/// Writes one line per trace directory in `dirs` to stdout.
fn print_list(dirs: &[PathBuf]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for dir in dirs {
        match Trace::open(dir) {
            Ok(t) => {
                let argv: Vec<_> = t.meta.argv.iter().map(|a| String::from_utf8_lossy(a)).collect();
                let end = match t.events.last().map(|e| &e.kind) {
                    Some(EventKind::End(end)) => end.to_string(),
                    _ => "incomplete".to_string(),
                };
                writeln!(out, "{}\t{} events\t{}\t{}", dir.display(), t.events.len(), end, argv.join(" "))?;
            }
            Err(e) => writeln!(out, "{}\tunreadable: {e}", dir.display())?,
        }
    }
    out.flush()
}

/// Whether printing stopped because the reader of stdout went away
/// (EPIPE: `weft dump | head` once head has its lines). That ends weft
/// quietly, with status 0, as SIGPIPE silently ends other Unix tools
/// (Rust ignores SIGPIPE, so the write fails instead). Other errors pass.
fn quiet_if_reader_quit(printed: io::Result<()>) -> io::Result<bool> {
    match printed {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(true),
        other => other.map(|()| false),
    }
}
