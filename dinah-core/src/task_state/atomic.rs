//! [`AtomicTaskState`]: the task state machine in one atomic byte.

use core::fmt;

use super::{InvalidTaskTransition, TaskState};
use crate::sync::{AtomicU8, Ordering};

/// A [`TaskState`] that several threads can drive, one legal transition at
/// a time.
///
/// Every change is a single compare-exchange from the state the caller
/// expects to a state the legal-transition table allows, so when a worker
/// claiming a task ([`try_claim`](Self::try_claim)) races a canceller
/// ([`try_cancel_pending`](Self::try_cancel_pending)) exactly one of them
/// succeeds, and the loser learns the state the winner left behind. There is
/// no `store`: the cell can only move along the table.
///
/// # Memory ordering
///
/// - A successful transition uses `AcqRel`. Its `Release` half publishes
///   everything the winning thread wrote before it (a worker stores the
///   task's result, then moves `Running → Completed`); its `Acquire` half
///   makes the winner see everything the transition it replaced published,
///   so a chain of transitions by different threads is also a chain of
///   happens-before edges.
/// - [`load`](Self::load) and the failure side of a transition use
///   `Acquire`: callers act on the state they read (a thread that reads
///   `Completed` goes on to read the result), so that read must synchronise
///   with the `Release` that wrote it.
///
/// The ordering covers data written before a transition and read after
/// observing it; it is not a lock, and it does not order two transitions of
/// *different* tasks.
///
/// # Examples
///
/// ```
/// use dinah_core::{AtomicTaskState, InvalidTaskTransition, TaskState};
///
/// let state = AtomicTaskState::new(TaskState::Pending);
/// state.try_claim()?;
/// // The canceller lost the race and learns who won.
/// let lost = state.try_cancel_pending().unwrap_err();
/// assert_eq!(lost.from, TaskState::Running);
/// state.transition(TaskState::Running, TaskState::Completed)?;
/// assert_eq!(state.load(), TaskState::Completed);
/// # Ok::<(), InvalidTaskTransition>(())
/// ```
pub struct AtomicTaskState {
    bits: AtomicU8,
}

impl AtomicTaskState {
    /// A cell holding `state`.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn new(state: TaskState) -> Self {
        Self {
            bits: AtomicU8::new(state.to_bits()),
        }
    }

    /// A cell holding `state`.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn new(state: TaskState) -> Self {
        Self {
            bits: AtomicU8::new(state.to_bits()),
        }
    }

    /// The current state (`Acquire`).
    #[must_use]
    pub fn load(&self) -> TaskState {
        TaskState::from_bits(self.bits.load(Ordering::Acquire))
    }

    /// Moves `from → to` if the cell holds `from` and the table allows it.
    ///
    /// A pair the table rejects is refused without touching the cell.
    ///
    /// # Errors
    ///
    /// - `from → to` is not a legal transition: `InvalidTaskTransition {
    ///   from, to }` with the caller's `from`.
    /// - The cell no longer holds `from` (another thread moved it first):
    ///   `InvalidTaskTransition { from: actual, to }`, where `actual` is the
    ///   state found. The cell is unchanged either way.
    pub fn transition(&self, from: TaskState, to: TaskState) -> Result<(), InvalidTaskTransition> {
        if !from.can_transition_to(to) {
            return Err(InvalidTaskTransition { from, to });
        }
        self.bits
            .compare_exchange(
                from.to_bits(),
                to.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(|actual| InvalidTaskTransition {
                from: TaskState::from_bits(actual),
                to,
            })
    }

    /// Claims a pending task for execution: `Pending → Running`.
    ///
    /// Exactly one caller can succeed for a task, whether its rivals are
    /// other workers or [`try_cancel_pending`](Self::try_cancel_pending).
    ///
    /// # Errors
    ///
    /// `InvalidTaskTransition { from: actual, to: Running }` if the task was
    /// not `Pending`: it was already claimed, cancelled or finished.
    pub fn try_claim(&self) -> Result<(), InvalidTaskTransition> {
        self.transition(TaskState::Pending, TaskState::Running)
    }

    /// Cancels a task that has not started: `Pending → Cancelled`.
    ///
    /// To stop a task that is already running, request cancellation through
    /// its [`CancelFlag`](crate::CancelFlag) and let the task acknowledge it
    /// (`Running → Cancelled`).
    ///
    /// # Errors
    ///
    /// `InvalidTaskTransition { from: actual, to: Cancelled }` if the task
    /// was not `Pending` (typically a worker claimed it first).
    pub fn try_cancel_pending(&self) -> Result<(), InvalidTaskTransition> {
        self.transition(TaskState::Pending, TaskState::Cancelled)
    }

    /// The state, consuming the cell.
    #[must_use]
    pub fn into_inner(self) -> TaskState {
        self.load()
    }
}

impl Default for AtomicTaskState {
    /// A cell holding [`TaskState::Pending`].
    fn default() -> Self {
        Self::new(TaskState::Pending)
    }
}

impl From<TaskState> for AtomicTaskState {
    fn from(state: TaskState) -> Self {
        Self::new(state)
    }
}

impl fmt::Debug for AtomicTaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AtomicTaskState")
            .field(&self.load())
            .finish()
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::super::tests::LEGAL;
    use super::*;
    use TaskState::{Cancelled, Completed, Pending, Running};

    extern crate std;

    #[test]
    fn every_cell_when_the_cell_holds_from() {
        for from in TaskState::ALL {
            for to in TaskState::ALL {
                let cell = AtomicTaskState::new(from);
                let result = cell.transition(from, to);
                if LEGAL.contains(&(from, to)) {
                    assert_eq!(result, Ok(()), "{from} -> {to}");
                    assert_eq!(cell.load(), to);
                } else {
                    assert_eq!(result, Err(InvalidTaskTransition { from, to }));
                    assert_eq!(cell.load(), from);
                }
            }
        }
    }

    #[test]
    fn a_stale_from_reports_the_actual_state() {
        for actual in TaskState::ALL {
            for (from, to) in LEGAL {
                if actual == from {
                    continue;
                }
                let cell = AtomicTaskState::new(actual);
                assert_eq!(
                    cell.transition(from, to),
                    Err(InvalidTaskTransition { from: actual, to }),
                    "cell {actual}, asked {from} -> {to}"
                );
                assert_eq!(cell.load(), actual);
            }
        }
    }

    #[test]
    fn an_illegal_pair_is_refused_whatever_the_cell_holds() {
        let cell = AtomicTaskState::new(Running);
        // Running -> Completed would be legal from the actual state, but the
        // caller asked for Pending -> Completed, which never is.
        assert_eq!(
            cell.transition(Pending, Completed),
            Err(InvalidTaskTransition {
                from: Pending,
                to: Completed
            })
        );
        assert_eq!(cell.load(), Running);
    }

    #[test]
    fn claim_and_cancel_are_mutually_exclusive() {
        let cell = AtomicTaskState::default();
        assert_eq!(cell.try_claim(), Ok(()));
        assert_eq!(
            cell.try_claim(),
            Err(InvalidTaskTransition {
                from: Running,
                to: Running
            })
        );
        assert_eq!(
            cell.try_cancel_pending(),
            Err(InvalidTaskTransition {
                from: Running,
                to: Cancelled
            })
        );

        let cell = AtomicTaskState::from(Pending);
        assert_eq!(cell.try_cancel_pending(), Ok(()));
        assert_eq!(
            cell.try_claim(),
            Err(InvalidTaskTransition {
                from: Cancelled,
                to: Running
            })
        );
        assert_eq!(cell.into_inner(), Cancelled);
    }

    #[test]
    fn usable_from_a_static() {
        static CELL: AtomicTaskState = AtomicTaskState::new(Pending);
        assert_eq!(CELL.try_claim(), Ok(()));
        assert_eq!(std::format!("{CELL:?}"), "AtomicTaskState(Running)");
    }

    #[test]
    fn racing_claimers_and_cancellers_have_one_winner() {
        use std::sync::Barrier;
        use std::vec::Vec;

        const THREADS: usize = if cfg!(miri) { 4 } else { 16 };
        let rounds = if cfg!(miri) { 2 } else { 64 };
        for _ in 0..rounds {
            let cell = AtomicTaskState::new(Pending);
            let barrier = Barrier::new(THREADS);
            let wins: Vec<(usize, bool)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|index| {
                        let (cell, barrier) = (&cell, &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            let won = if index % 2 == 0 {
                                cell.try_claim().is_ok()
                            } else {
                                cell.try_cancel_pending().is_ok()
                            };
                            (index, won)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("racer panicked"))
                    .collect()
            });
            let winners: Vec<usize> = wins
                .iter()
                .filter(|(_, won)| *won)
                .map(|(index, _)| *index)
                .collect();
            assert_eq!(winners.len(), 1, "exactly one winner: {winners:?}");
            let expected = if winners[0] % 2 == 0 {
                Running
            } else {
                Cancelled
            };
            assert_eq!(cell.load(), expected);
        }
    }
}
