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

// A full memory fence, for algorithms whose correctness argument needs the
// single total order of `SeqCst` operations (see `mpmc.rs`).
#[cfg(not(dinah_loom))]
pub(crate) use portable_atomic::fence;

#[cfg(dinah_loom)]
pub(crate) use loom::sync::atomic::fence;

// The busy-wait hint. Under loom it yields to the model's scheduler, so a
// spin loop waiting for another thread lets that thread run.
#[cfg(not(dinah_loom))]
pub(crate) use core::hint::spin_loop;

#[cfg(dinah_loom)]
pub(crate) use loom::hint::spin_loop;

/// A mutual-exclusion lock that spins: `spin::Mutex` normally, loom's
/// `Mutex` under `--cfg dinah_loom`.
///
/// Callers keep critical sections short and never run user code while
/// holding the guard. Like every spin lock, it must not be taken both by
/// an interrupt handler and by the code that handler interrupts: the handler
/// would spin forever on a lock its own core holds.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(not(dinah_loom))]
    inner: spin::Mutex<T>,
    #[cfg(dinah_loom)]
    inner: loom::sync::Mutex<T>,
}

/// The guard [`Mutex::lock`] returns; the lock is released when it drops.
#[cfg(not(dinah_loom))]
pub(crate) type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;

/// The guard [`Mutex::lock`] returns; the lock is released when it drops.
#[cfg(dinah_loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    #[cfg(not(dinah_loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self {
            inner: spin::Mutex::new(value),
        }
    }

    /// An unlocked mutex holding `value`.
    #[cfg(dinah_loom)]
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Waits (spinning) until the lock is free, then takes it.
    #[cfg(not(dinah_loom))]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock()
    }

    /// Waits until the lock is free, then takes it.
    ///
    /// loom's mutex reports poisoning like std's; a poisoned lock is only
    /// possible after a panic inside a model, which already fails the model,
    /// so the guard is recovered rather than panicking a second time.
    #[cfg(dinah_loom)]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
