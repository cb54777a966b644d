//! statx_probe.rs: looks up a missing path, then an existing one, with
//! `std::fs::metadata`. After a failed statx, Rust's standard library
//! probes for statx with `statx(0, NULL, 0, STATX_ALL, NULL)`: a replay
//! must read that NULL path as no path, as the kernel does.

fn main() {
    let missing = std::fs::metadata("/nonexistent/weft-statx-probe");
    println!("missing: {}", missing.err().map(|e| e.kind().to_string()).unwrap_or_default());
    let exe = std::fs::metadata("/proc/self/exe").expect("metadata of /proc/self/exe");
    println!("exe: {} bytes, file: {}", exe.len(), exe.is_file());
}
