//! The one place atomics and locks come from.
//!
//! Normal builds use `portable-atomic` (native where the target has the
//! width, a fallback otherwise: 64-bit atomics on `thumbv7em` need its
//! `fallback` feature, enabled by this crate, and optionally its
//! `critical-section` backend) and `spin`. Under `--cfg dinah_loom` the same
//! names resolve to loom's types, so the model checker sees every access.
//!
//! loom's types have no `const fn new`; items that are `const` constructible
//! in normal builds provide a non-`const` constructor under loom.

#[cfg(not(dinah_loom))]
pub(crate) use portable_atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

#[cfg(dinah_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
