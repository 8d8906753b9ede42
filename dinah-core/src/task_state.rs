//! The lifecycle of one task: [`TaskState`] (plain value, with the
//! legal-transition table) and [`AtomicTaskState`] (the same machine in one
//! atomic byte, for racing claimers and cancellers).

use core::fmt;

mod atomic;

pub use atomic::AtomicTaskState;

/// Where one task is in its lifecycle.
///
/// A task is accepted as [`Pending`](Self::Pending), starts at most once
/// ([`Running`](Self::Running)) and ends in exactly one of three terminal
/// states. The value is plain data for code that already serialises access
/// (behind a lock, or on one thread): it is not synchronised and does not
/// prove that any task exists. Share a task's state between threads through
/// [`AtomicTaskState`].
///
/// # Legal transitions
///
/// Rows are the current state, columns the requested next state; `✓` is a
/// legal transition, `·` is rejected. Every cell not marked is rejected,
/// including a move to the same state.
///
/// | from \ to     | Pending | Running | Completed | Failed | Cancelled |
/// |---------------|:-------:|:-------:|:---------:|:------:|:---------:|
/// | **Pending**   |    ·    |    ✓    |     ·     |   ·    |     ✓     |
/// | **Running**   |    ·    |    ·    |     ✓     |   ✓    |     ✓     |
/// | **Completed** |    ·    |    ·    |     ·     |   ·    |     ·     |
/// | **Failed**    |    ·    |    ·    |     ·     |   ·    |     ·     |
/// | **Cancelled** |    ·    |    ·    |     ·     |   ·    |     ·     |
///
/// - `Pending → Running`: a worker claimed the task and is starting it.
/// - `Pending → Cancelled`: the task was stopped before it started.
/// - `Running → Completed`: the task returned successfully.
/// - `Running → Failed`: the task returned an error, or a panic was caught.
/// - `Running → Cancelled`: the running task *acknowledged* a cancellation
///   request. A request alone (see [`CancelFlag`](crate::CancelFlag)) never
///   moves the state: the task stays `Running` until it stops on its own.
///
/// The state is lifecycle only. What the task produced (its value, error or
/// panic message) lives in a [`TaskOutcome`](crate::TaskOutcome), and
/// [`TaskOutcome::terminal_state`](crate::TaskOutcome::terminal_state) names
/// the terminal state that goes with it.
///
/// # Examples
///
/// ```
/// use dinah_core::{InvalidTaskTransition, TaskState};
///
/// let mut state = TaskState::Pending;
/// state.transition(TaskState::Running)?;
/// state.transition(TaskState::Completed)?;
/// assert!(state.is_terminal());
///
/// // Terminal states never move, and a rejection leaves the state as it was.
/// let error = state.transition(TaskState::Running).unwrap_err();
/// assert_eq!(error, InvalidTaskTransition { from: TaskState::Completed, to: TaskState::Running });
/// assert_eq!(state, TaskState::Completed);
/// # Ok::<(), InvalidTaskTransition>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TaskState {
    /// Accepted and eligible to run, not started yet. The initial state.
    Pending = 0,
    /// Claimed by a worker: execution has begun. A task enters this state
    /// at most once.
    Running = 1,
    /// Terminal: the task returned successfully.
    Completed = 2,
    /// Terminal: the task returned an error, or its panic was caught and
    /// recorded.
    Failed = 3,
    /// Terminal: the task was stopped before it started, or it was running
    /// and acknowledged a cancellation request.
    Cancelled = 4,
}

impl TaskState {
    /// Every state, in declaration order.
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// Is `self → to` one of the [legal transitions](Self#legal-transitions)?
    ///
    /// Pure: it neither changes nor synchronises anything.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::TaskState;
    ///
    /// assert!(TaskState::Pending.can_transition_to(TaskState::Cancelled));
    /// assert!(!TaskState::Running.can_transition_to(TaskState::Running));
    /// assert!(!TaskState::Failed.can_transition_to(TaskState::Completed));
    /// ```
    #[must_use]
    pub const fn can_transition_to(self, to: Self) -> bool {
        matches!(
            (self, to),
            (Self::Pending, Self::Running | Self::Cancelled)
                | (
                    Self::Running,
                    Self::Completed | Self::Failed | Self::Cancelled
                )
        )
    }

    /// Moves to `to` if that is a [legal transition](Self#legal-transitions).
    ///
    /// # Errors
    ///
    /// [`InvalidTaskTransition`] naming the current state and `to` if the
    /// transition is not legal; `self` is then unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{InvalidTaskTransition, TaskState};
    ///
    /// let mut state = TaskState::Pending;
    /// assert!(state.transition(TaskState::Completed).is_err());
    /// assert_eq!(state, TaskState::Pending);
    /// state.transition(TaskState::Cancelled)?;
    /// assert_eq!(state, TaskState::Cancelled);
    /// # Ok::<(), InvalidTaskTransition>(())
    /// ```
    pub const fn transition(&mut self, to: Self) -> Result<(), InvalidTaskTransition> {
        if self.can_transition_to(to) {
            *self = to;
            Ok(())
        } else {
            Err(InvalidTaskTransition { from: *self, to })
        }
    }

    /// Is this a terminal state (`Completed`, `Failed` or `Cancelled`)?
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The lowercase name used by `Display`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The byte stored by [`AtomicTaskState`].
    pub(crate) const fn to_bits(self) -> u8 {
        self as u8
    }

    /// The inverse of [`to_bits`](Self::to_bits).
    ///
    /// Only ever called on bytes written by `to_bits`, so every other value
    /// is unreachable.
    pub(crate) const fn from_bits(bits: u8) -> Self {
        match bits {
            0 => Self::Pending,
            1 => Self::Running,
            2 => Self::Completed,
            3 => Self::Failed,
            4 => Self::Cancelled,
            _ => panic!("task state cell holds a byte no TaskState encodes"),
        }
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A task state transition was rejected.
///
/// From [`TaskState::transition`], `from` is the state the task was in and
/// the pair is not in the legal-transition table. From
/// [`AtomicTaskState::transition`], `from` is the state the cell actually
/// held: when it differs from the `from` the caller expected, another thread
/// moved the task first (and `from → to` may well be legal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InvalidTaskTransition {
    /// The state the task was in when the transition was attempted.
    pub from: TaskState,
    /// The state that was requested.
    pub to: TaskState,
}

impl fmt::Display for InvalidTaskTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task transition from {} to {} rejected",
            self.from, self.to
        )
    }
}

impl core::error::Error for InvalidTaskTransition {}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskState::{Cancelled, Completed, Failed, Pending, Running};

    /// The table from the type docs, written out cell by cell.
    pub(super) const LEGAL: [(TaskState, TaskState); 5] = [
        (Pending, Running),
        (Pending, Cancelled),
        (Running, Completed),
        (Running, Failed),
        (Running, Cancelled),
    ];

    #[test]
    fn every_cell_of_the_table() {
        let mut legal_seen = 0;
        for from in TaskState::ALL {
            for to in TaskState::ALL {
                let legal = LEGAL.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
                let mut state = from;
                let result = state.transition(to);
                if legal {
                    legal_seen += 1;
                    assert_eq!(result, Ok(()));
                    assert_eq!(state, to);
                } else {
                    assert_eq!(result, Err(InvalidTaskTransition { from, to }));
                    assert_eq!(state, from, "a rejection must not move the state");
                }
            }
        }
        assert_eq!(legal_seen, LEGAL.len());
    }

    #[test]
    fn terminal_states_have_no_exit_and_others_do() {
        for state in TaskState::ALL {
            let has_exit = TaskState::ALL.iter().any(|&to| state.can_transition_to(to));
            assert_eq!(state.is_terminal(), !has_exit, "{state}");
        }
        assert!(!Pending.is_terminal());
        assert!(!Running.is_terminal());
    }

    #[test]
    fn bits_round_trip() {
        for state in TaskState::ALL {
            assert_eq!(TaskState::from_bits(state.to_bits()), state);
        }
    }

    #[test]
    #[should_panic(expected = "task state cell holds a byte no TaskState encodes")]
    fn foreign_bits_are_a_bug() {
        let _ = TaskState::from_bits(5);
    }

    #[test]
    fn display_is_lowercase() {
        extern crate std;
        use std::string::ToString;
        let names: std::vec::Vec<_> = TaskState::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            ["pending", "running", "completed", "failed", "cancelled"]
        );
        assert_eq!(
            InvalidTaskTransition {
                from: Completed,
                to: Running
            }
            .to_string(),
            "task transition from completed to running rejected"
        );
    }

    #[test]
    fn const_evaluable() {
        const STATE: TaskState = {
            let mut state = Pending;
            match state.transition(Running) {
                Ok(()) => state,
                Err(_) => panic!("pending -> running is legal"),
            }
        };
        assert_eq!(STATE, Running);
    }
}
