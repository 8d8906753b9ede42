//! [`AtomicRuntimeState`]: the runtime state machine in one atomic byte.

use core::fmt;

use super::{RuntimeState, RuntimeTransitionError};
use crate::sync::{AtomicU8, Ordering};

/// A [`RuntimeState`] shared between the runtime's owner thread, client
/// handles and whoever starts a shutdown.
///
/// Every change is a compare-exchange along the legal-transition table;
/// there is no `store`. [`begin_draining`](Self::begin_draining) is the
/// first step of an explicit shutdown: of any number of threads calling it
/// at once, exactly one gets `Ok`, and the others learn the state it left.
///
/// # Memory ordering
///
/// - Successful transitions use `AcqRel`: `Release` publishes what the
///   thread did before changing the state (for example, the owner finished
///   bootstrapping before moving to `Running`), and `Acquire` lets it see
///   what earlier transitions published.
/// - [`load`](Self::load) and the failure side of a transition use
///   `Acquire`, because callers act on the state they read.
/// - All transitions are read-modify-writes of one location, so they form a
///   single order and each one sees the state the previous one left: two
///   threads can never both move `Running → Draining`. Once a thread has
///   observed `Draining` (by winning [`begin_draining`](Self::begin_draining),
///   by loading it, or by synchronising with a thread that did), none of its
///   later loads can return `Running` again (read coherence).
///
/// Checking [`accepts_work`](Self::accepts_work) and then enqueueing is not
/// atomic: a submission that read `Running` just before another thread
/// began draining can still arrive. The shutdown protocol covers that window
/// by draining the queues after it changes the state, instead of relying on
/// the check alone.
///
/// # Examples
///
/// ```
/// use dinah_core::{AtomicRuntimeState, RuntimeState, RuntimeTransitionError};
///
/// let state = AtomicRuntimeState::new(RuntimeState::Created);
/// state.transition(RuntimeState::Created, RuntimeState::Bootstrapping)?;
/// state.transition(RuntimeState::Bootstrapping, RuntimeState::Running)?;
/// assert!(state.accepts_work());
///
/// assert_eq!(state.begin_draining()?, RuntimeState::Running);
/// // A second shutdown finds the first one under way.
/// assert_eq!(
///     state.begin_draining(),
///     Err(RuntimeTransitionError { from: RuntimeState::Draining, to: RuntimeState::Draining })
/// );
/// assert_eq!(state.load(), RuntimeState::Draining);
/// # Ok::<(), RuntimeTransitionError>(())
/// ```
pub struct AtomicRuntimeState {
    bits: AtomicU8,
}

impl AtomicRuntimeState {
    /// A cell holding `state`.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn new(state: RuntimeState) -> Self {
        Self {
            bits: AtomicU8::new(state.to_bits()),
        }
    }

    /// A cell holding `state`.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn new(state: RuntimeState) -> Self {
        Self {
            bits: AtomicU8::new(state.to_bits()),
        }
    }

    /// The current state (`Acquire`).
    #[must_use]
    #[inline]
    pub fn load(&self) -> RuntimeState {
        RuntimeState::from_bits(self.bits.load(Ordering::Acquire))
    }

    /// Does the runtime admit new work right now (is it `Running`)?
    ///
    /// A snapshot: see the type's "Memory ordering" section for the window
    /// between this check and an enqueue.
    #[must_use]
    #[inline]
    pub fn accepts_work(&self) -> bool {
        self.load().accepts_work()
    }

    /// Moves `from → to` if the cell holds `from` and the table allows it.
    ///
    /// # Errors
    ///
    /// - `from → to` is not a legal transition: `RuntimeTransitionError {
    ///   from, to }` with the caller's `from`, and the cell is not touched.
    /// - The cell does not hold `from`: `RuntimeTransitionError { from:
    ///   actual, to }` with the state found. The cell is unchanged.
    pub fn transition(
        &self,
        from: RuntimeState,
        to: RuntimeState,
    ) -> Result<(), RuntimeTransitionError> {
        if !from.can_transition_to(to) {
            return Err(RuntimeTransitionError { from, to });
        }
        self.bits
            .compare_exchange(
                from.to_bits(),
                to.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(|actual| RuntimeTransitionError {
                from: RuntimeState::from_bits(actual),
                to,
            })
    }

    /// Starts a shutdown: `Running → Draining`, returning the previous
    /// state (always `Running`).
    ///
    /// Exactly one of any number of concurrent callers succeeds; after that
    /// the runtime rejects new work.
    ///
    /// # Errors
    ///
    /// `RuntimeTransitionError { from: actual, to: Draining }` if the
    /// runtime was not `Running`: not started yet, already draining (another
    /// caller won), stopped or failed.
    pub fn begin_draining(&self) -> Result<RuntimeState, RuntimeTransitionError> {
        self.transition(RuntimeState::Running, RuntimeState::Draining)
            .map(|()| RuntimeState::Running)
    }

    /// Marks the runtime failed from whichever active state it is in
    /// (`Bootstrapping`, `Running` or `Draining`), returning that state.
    ///
    /// If another thread changes the state concurrently, the attempt is
    /// retried against the new state, so a runtime that is still active
    /// always ends `Failed`.
    ///
    /// # Errors
    ///
    /// `RuntimeTransitionError { from: actual, to: Failed }` if the runtime
    /// is `Created` (nothing to fail) or already terminal (`Stopped` or
    /// `Failed`: a runtime fails at most once).
    pub fn fail(&self) -> Result<RuntimeState, RuntimeTransitionError> {
        let failed = RuntimeState::Failed;
        let mut current = RuntimeState::from_bits(self.bits.load(Ordering::Acquire));
        loop {
            if !current.can_transition_to(failed) {
                return Err(RuntimeTransitionError {
                    from: current,
                    to: failed,
                });
            }
            match self.bits.compare_exchange(
                current.to_bits(),
                failed.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(current),
                // Someone moved the state; every legal move goes forward, so
                // this loops at most once per remaining transition.
                Err(actual) => current = RuntimeState::from_bits(actual),
            }
        }
    }

    /// The state, consuming the cell.
    #[must_use]
    pub fn into_inner(self) -> RuntimeState {
        self.load()
    }
}

impl Default for AtomicRuntimeState {
    /// A cell holding [`RuntimeState::Created`].
    fn default() -> Self {
        Self::new(RuntimeState::Created)
    }
}

impl From<RuntimeState> for AtomicRuntimeState {
    fn from(state: RuntimeState) -> Self {
        Self::new(state)
    }
}

impl fmt::Debug for AtomicRuntimeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AtomicRuntimeState")
            .field(&self.load())
            .finish()
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::super::tests::LEGAL;
    use super::*;
    use RuntimeState::{Bootstrapping, Created, Draining, Failed, Running, Stopped};

    extern crate std;

    #[test]
    fn every_cell_when_the_cell_holds_from() {
        for from in RuntimeState::ALL {
            for to in RuntimeState::ALL {
                let cell = AtomicRuntimeState::new(from);
                let result = cell.transition(from, to);
                if LEGAL.contains(&(from, to)) {
                    assert_eq!(result, Ok(()), "{from} -> {to}");
                    assert_eq!(cell.load(), to);
                } else {
                    assert_eq!(result, Err(RuntimeTransitionError { from, to }));
                    assert_eq!(cell.load(), from);
                }
            }
        }
    }

    #[test]
    fn a_stale_from_reports_the_actual_state() {
        for actual in RuntimeState::ALL {
            for (from, to) in LEGAL {
                if actual == from {
                    continue;
                }
                let cell = AtomicRuntimeState::new(actual);
                assert_eq!(
                    cell.transition(from, to),
                    Err(RuntimeTransitionError { from: actual, to })
                );
                assert_eq!(cell.load(), actual);
            }
        }
    }

    #[test]
    fn begin_draining_only_from_running() {
        for state in RuntimeState::ALL {
            let cell = AtomicRuntimeState::new(state);
            if state == Running {
                assert_eq!(cell.begin_draining(), Ok(Running));
                assert_eq!(cell.load(), Draining);
                assert!(!cell.accepts_work());
            } else {
                assert_eq!(
                    cell.begin_draining(),
                    Err(RuntimeTransitionError {
                        from: state,
                        to: Draining
                    })
                );
                assert_eq!(cell.load(), state);
            }
        }
    }

    #[test]
    fn fail_from_every_state() {
        for state in RuntimeState::ALL {
            let cell = AtomicRuntimeState::new(state);
            match state {
                Bootstrapping | Running | Draining => {
                    assert_eq!(cell.fail(), Ok(state));
                    assert_eq!(cell.load(), Failed);
                }
                Created | Stopped | Failed => {
                    assert_eq!(
                        cell.fail(),
                        Err(RuntimeTransitionError {
                            from: state,
                            to: Failed
                        })
                    );
                    assert_eq!(cell.load(), state);
                }
            }
        }
    }

    #[test]
    fn usable_from_a_static_and_debug() {
        static STATE: AtomicRuntimeState = AtomicRuntimeState::new(Created);
        assert_eq!(STATE.transition(Created, Bootstrapping), Ok(()));
        assert_eq!(
            std::format!("{STATE:?}"),
            "AtomicRuntimeState(Bootstrapping)"
        );
        assert_eq!(AtomicRuntimeState::default().into_inner(), Created);
        assert_eq!(AtomicRuntimeState::from(Stopped).into_inner(), Stopped);
    }

    #[test]
    fn racing_shutdowns_have_one_winner() {
        use std::sync::Barrier;
        use std::vec::Vec;

        const THREADS: usize = if cfg!(miri) { 4 } else { 16 };
        let rounds = if cfg!(miri) { 2 } else { 64 };
        for _ in 0..rounds {
            let cell = AtomicRuntimeState::new(Running);
            let barrier = Barrier::new(THREADS);
            let results: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        let (cell, barrier) = (&cell, &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            let result = cell.begin_draining();
                            // Whoever won, this thread's own RMW has now
                            // observed the drain; it cannot read Running.
                            assert_eq!(cell.load(), Draining);
                            result
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("racer panicked"))
                    .collect()
            });
            let winners = results.iter().filter(|result| result.is_ok()).count();
            assert_eq!(winners, 1);
            for result in results {
                if let Err(error) = result {
                    assert_eq!(
                        error,
                        RuntimeTransitionError {
                            from: Draining,
                            to: Draining
                        }
                    );
                }
            }
        }
    }
}
