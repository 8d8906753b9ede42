//! Running one piece of already-selected work on the caller's thread.
//!
//! [`Executor`] is the smallest execution primitive: it takes a closure
//! that somebody else (a [`Scheduler`](crate::Scheduler), or the caller)
//! has already chosen to run, calls it exactly once on the current thread
//! and hands back its `Result` untouched. It owns no queue, no threads and
//! no policy.

/// Runs one closure on the caller's thread and returns its result unchanged.
///
/// The executor does not classify, wrap or log the outcome: an `Err` from
/// the closure is returned as the same value, so task-level errors stay
/// distinct from anything the scheduler itself reports. Callers who want a
/// stable task-error category can wrap it with
/// [`TaskFailure::returned`](dinah_core::TaskFailure::returned).
///
/// # Panics
///
/// A panic in the closure is not caught: it unwinds through
/// [`execute`](Self::execute) into the caller, with the original payload,
/// exactly as if the caller had called the closure itself.
///
/// # Examples
///
/// ```
/// use dinah_std::Executor;
///
/// let executor = Executor::new();
/// let answer: Result<u32, &str> = executor.execute(|| Ok(6 * 7));
/// assert_eq!(answer, Ok(42));
/// let failure: Result<u32, &str> = executor.execute(|| Err("disk full"));
/// assert_eq!(failure, Err("disk full"));
/// # Ok::<(), std::convert::Infallible>(())
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Executor {
    _private: (),
}

impl Executor {
    /// An executor. It holds no state, so every executor behaves the same.
    #[must_use]
    pub const fn new() -> Self {
        Self { _private: () }
    }

    /// Calls `task` exactly once on the current thread and returns its
    /// result unchanged.
    ///
    /// # Errors
    ///
    /// Whatever `task` returns: the executor adds no error of its own.
    ///
    /// # Panics
    ///
    /// Propagates a panic of `task` to the caller (see the [type
    /// documentation](Self)).
    #[inline]
    pub fn execute<T, E, F>(&self, task: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E>,
    {
        task()
    }
}

#[cfg(test)]
mod tests {
    use super::Executor;

    #[test]
    fn returns_the_closure_result_unchanged() {
        let executor = Executor::new();
        assert_eq!(executor.execute(|| Ok::<_, ()>(7_u8)), Ok(7));
        assert_eq!(executor.execute(|| Err::<(), _>("boom")), Err("boom"));
    }

    #[test]
    fn every_executor_is_equal() {
        assert_eq!(Executor::new(), Executor::default());
    }
}
