//! Builds the in-process recording runtime (runtime/weft_runtime.c and
//! runtime/weft_stdio.c) into
//! a shared library that the recorder embeds and injects with LD_PRELOAD.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("libweft_runtime.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // The variadic stdio calls, with vector registers (weft_stdio.c).
    let stdio = out.join("weft_stdio.o");
    let status = Command::new(&cc)
        .args(["-O2", "-g0", "-fPIC", "-c", "-Wall", "-Wextra", "-fno-stack-protector", "-fno-builtin", "-o"])
        .arg(&stdio)
        .arg("runtime/weft_stdio.c")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` to build the in-process runtime: {e}"));
    assert!(status.success(), "building runtime/weft_stdio.c failed");
    let status = Command::new(&cc)
        .args(["-O2", "-g0", "-fPIC", "-shared", "-Wall", "-Wextra", "-fno-stack-protector"])
        // No vector registers in the runtime's code, and its loops stay
        // loops, not libc calls (weft_runtime.c, copy_bytes); no red zone,
        // since its inline assembly calls the syscall sites (a call pushes
        // its return address where a leaf function keeps its red zone).
        .args(["-mgeneral-regs-only", "-fno-tree-loop-distribute-patterns", "-mno-red-zone"])
        .args(["-Wl,-z,now", "-Wl,--hash-style=both", "-o"])
        .arg(&so)
        .arg("runtime/weft_runtime.c")
        .arg(&stdio)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` to build the in-process runtime: {e}"));
    assert!(status.success(), "building runtime/weft_runtime.c failed");
    println!("cargo:rerun-if-changed=runtime/weft_runtime.c");
    println!("cargo:rerun-if-changed=runtime/weft_runtime.h");
    println!("cargo:rerun-if-changed=runtime/weft_stdio.c");
    println!("cargo:rerun-if-env-changed=CC");
}
