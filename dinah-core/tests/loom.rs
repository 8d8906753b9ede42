//! loom model checks of dinah-core's atomics.
//!
//! Built only under `RUSTFLAGS="--cfg dinah_loom"`, which swaps the atomics
//! in `dinah-core/src/sync.rs` for loom's. Run by `cargo xtask ci --lane
//! loom` (release mode, `LOOM_MAX_PREEMPTIONS=2`).
#![cfg(dinah_loom)]

mod loom {
    mod admission;
    mod cancel;
    mod drainers;
    mod mpmc;
    mod queue;
    mod runtime_state;
    mod task_state;
    mod trace;
}
