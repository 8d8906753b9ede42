//! [`Shared`]: explicit, mutex-backed sharing of one value, and
//! [`SynchronizationError`].

use core::fmt;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// A cloneable handle on one mutex-protected value.
///
/// An owner of an `Arc<Mutex<T>>`: every clone points at the same value
/// (cloning is a reference count increment and never copies `T`), and
/// [`lock`](Self::lock) gives exclusive access through a guard. It adds two
/// things over the raw pair: poisoning is a typed [`SynchronizationError`]
/// instead of a guard to recover by hand, and the handle documents intent
/// (state deliberately shared by tasks).
///
/// The lock protects access to the value, nothing more: a sequence of
/// operations is atomic only if it happens under one guard. Keep critical
/// sections short, and never run task callbacks or wait for other tasks
/// while holding a guard. The mutex is [`std::sync::Mutex`]: no fairness
/// and no lock-free progress are promised.
///
/// # Examples
///
/// ```
/// use dinah_std::{Shared, SynchronizationError};
///
/// let hits = Shared::new(0_u64);
/// std::thread::scope(|scope| {
///     for _ in 0..4 {
///         let hits = hits.clone();
///         scope.spawn(move || -> Result<(), SynchronizationError> {
///             *hits.lock()? += 1;
///             Ok(())
///         });
///     }
/// });
/// assert_eq!(*hits.lock()?, 4);
/// # Ok::<(), SynchronizationError>(())
/// ```
pub struct Shared<T> {
    inner: Arc<Mutex<T>>,
}

impl<T> Shared<T> {
    /// Shares `value`; this handle is its first owner.
    #[must_use]
    pub fn new(value: T) -> Self {
        Self {
            inner: Arc::new(Mutex::new(value)),
        }
    }

    /// Blocks until the value is free and returns exclusive access to it.
    ///
    /// The lock is not reentrant: locking again on a thread that holds a
    /// guard of the same value deadlocks or panics (as
    /// [`Mutex::lock`](std::sync::Mutex::lock) does).
    ///
    /// # Errors
    ///
    /// [`SynchronizationError::Poisoned`] if a thread panicked while holding
    /// a guard: the value may be half-updated, and the caller decides what
    /// to do (see [`clear_poison`](Self::clear_poison)). The handle never
    /// guesses that the value is fine.
    pub fn lock(&self) -> Result<MutexGuard<'_, T>, SynchronizationError> {
        self.inner
            .lock()
            .map_err(|_| SynchronizationError::Poisoned)
    }

    /// Returns exclusive access if the value is free right now, `Ok(None)`
    /// if another guard holds it. Never blocks.
    ///
    /// # Errors
    ///
    /// [`SynchronizationError::Poisoned`], as for [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_std::{Shared, SynchronizationError};
    ///
    /// let shared = Shared::new(String::from("idle"));
    /// let guard = shared.lock()?;
    /// assert!(shared.try_lock()?.is_none(), "held by `guard`");
    /// drop(guard);
    /// assert_eq!(shared.try_lock()?.as_deref().map(String::as_str), Some("idle"));
    /// # Ok::<(), SynchronizationError>(())
    /// ```
    pub fn try_lock(&self) -> Result<Option<MutexGuard<'_, T>>, SynchronizationError> {
        match self.inner.try_lock() {
            Ok(guard) => Ok(Some(guard)),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Poisoned(_)) => Err(SynchronizationError::Poisoned),
        }
    }

    /// Is the value poisoned (did a thread panic while holding a guard)?
    ///
    /// A snapshot: another thread may poison the value right after.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.inner.is_poisoned()
    }

    /// Declares the value consistent again after a poisoning, so that
    /// [`lock`](Self::lock) succeeds.
    ///
    /// This is the caller's explicit decision (for example after checking
    /// that the panicking code could not have left the value half-updated);
    /// the handle never makes it on its own.
    pub fn clear_poison(&self) {
        self.inner.clear_poison();
    }

    /// The number of handles (this one included) sharing the value.
    ///
    /// A snapshot: other threads may clone or drop handles concurrently.
    #[must_use]
    pub fn strong_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// Do `self` and `other` share the same value?
    #[must_use]
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The value, if this is the last handle (like [`Arc::into_inner`]);
    /// `None` if other handles exist (this handle is dropped either way).
    ///
    /// # Errors
    ///
    /// `Some(Err(SynchronizationError::Poisoned))` if this was the last
    /// handle but the value is poisoned; the value is dropped (clear the
    /// poison first to keep it).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_std::Shared;
    ///
    /// let first = Shared::new(vec![1, 2]);
    /// let second = first.clone();
    /// assert_eq!(first.into_inner(), None, "another handle exists");
    /// assert_eq!(second.into_inner(), Some(Ok(vec![1, 2])));
    /// ```
    #[must_use]
    pub fn into_inner(self) -> Option<Result<T, SynchronizationError>> {
        let mutex = Arc::into_inner(self.inner)?;
        Some(
            mutex
                .into_inner()
                .map_err(|_| SynchronizationError::Poisoned),
        )
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

/// Prints the value if it can be locked right now (without blocking), as
/// [`Mutex`]'s `Debug` does.
impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("value", &self.inner)
            .finish()
    }
}

/// Access to a [`Shared`] value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SynchronizationError {
    /// A thread panicked while holding a guard, so the value may be in an
    /// inconsistent state.
    Poisoned,
}

impl fmt::Display for SynchronizationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Poisoned => {
                f.write_str("shared value is poisoned: a thread panicked while holding its lock")
            }
        }
    }
}

impl core::error::Error for SynchronizationError {}

#[cfg(test)]
mod tests {
    use super::{Shared, SynchronizationError};

    fn poison(shared: &Shared<u32>) {
        let clone = shared.clone();
        let outcome = std::thread::spawn(move || {
            let _guard = clone.lock();
            panic!("poisoning on purpose");
        })
        .join();
        assert!(outcome.is_err());
    }

    #[test]
    fn poisoning_is_reported_until_cleared() {
        let shared = Shared::new(5_u32);
        poison(&shared);
        assert!(shared.is_poisoned());
        assert_eq!(shared.lock().err(), Some(SynchronizationError::Poisoned));
        assert_eq!(
            shared.try_lock().err(),
            Some(SynchronizationError::Poisoned)
        );
        shared.clear_poison();
        assert_eq!(shared.lock().as_deref().copied(), Ok(5));
    }

    #[test]
    fn last_handle_gives_the_value_back() {
        let shared = Shared::new(3_u32);
        let clone = shared.clone();
        assert!(shared.ptr_eq(&clone));
        assert!(!shared.ptr_eq(&Shared::new(3)));
        assert_eq!(shared.strong_count(), 2);
        assert_eq!(shared.into_inner(), None);
        assert_eq!(clone.strong_count(), 1);
        assert_eq!(clone.into_inner(), Some(Ok(3)));
    }

    #[test]
    fn poisoned_last_handle_reports_poison() {
        let shared = Shared::new(1_u32);
        poison(&shared);
        assert_eq!(
            shared.into_inner(),
            Some(Err(SynchronizationError::Poisoned))
        );
    }

    #[test]
    fn debug_and_display() {
        let shared = Shared::from(7_u8);
        assert!(format!("{shared:?}").contains('7'));
        assert_eq!(
            SynchronizationError::Poisoned.to_string(),
            "shared value is poisoned: a thread panicked while holding its lock"
        );
    }
}
