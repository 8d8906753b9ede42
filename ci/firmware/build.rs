//! Puts `memory.x` where the linker script of `cortex-m-rt` finds it, and
//! links the firmware with that script (here rather than in rustflags, so
//! that a `RUSTFLAGS` in the environment cannot drop it).

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy("memory.x", out.join("memory.x")).expect("memory.x is copied");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed=memory.x");
}
