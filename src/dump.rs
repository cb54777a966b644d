//! `weft dump` and `weft ls`: a trace's events, readable or as JSON lines.

use anyhow::Result;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use weft_record::event::{dump_line, signal_name, Event, EventKind};
use weft_record::{syscalls, Trace};

/// One event as a JSON object (buffers summarized by their length).
fn event_json(index: usize, e: &Event) -> Value {
    let mut v = json!({ "index": index, "tid": e.tid, "label": e.label });
    let o = v.as_object_mut().expect("object");
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
        EventKind::End(end) => {
            o.insert("kind".into(), json!("end"));
            o.insert("end".into(), json!(end.to_string()));
        }
    }
    v
}

/// Prints the trace at `dir` to stdout. A damaged tail is reported on
/// stderr after the readable events, and makes the result an error.
pub fn dump(dir: &Path, as_json: bool) -> Result<()> {
    let trace = Trace::open(dir)?;
    let mut out = std::io::stdout().lock();
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
            }
        });
        writeln!(out, "{meta}")?;
        for (i, e) in trace.events.iter().enumerate() {
            writeln!(out, "{}", event_json(i, e))?;
        }
    } else {
        let argv: Vec<_> = trace.meta.argv.iter().map(|a| String::from_utf8_lossy(a)).collect();
        writeln!(out, "trace {}: {} (pid {}), {} events", dir.display(), argv.join(" "), trace.meta.pid, trace.events.len())?;
        writeln!(out, "recorded on {}", trace.meta.cpu)?;
        let procs = weft_record::tree::processes(&trace);
        if procs.len() > 1 {
            writeln!(out, "process tree:")?;
            for line in weft_record::tree::ps_lines(&procs) {
                writeln!(out, "  {line}")?;
            }
        }
        for (i, e) in trace.events.iter().enumerate() {
            writeln!(out, "{}", dump_line(i, e))?;
        }
    }
    out.flush()?;
    match trace.damage {
        Some(d) => Err(d.into()),
        None => Ok(()),
    }
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
    let mut out = std::io::stdout().lock();
    for dir in weft_record::dirs::list_traces()? {
        match Trace::open(&dir) {
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
    Ok(())
}
