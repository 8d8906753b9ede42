//! The lifecycle of a long-lived runtime: [`RuntimeState`] (plain value,
//! with the legal-transition table) and [`AtomicRuntimeState`] (the same
//! machine in one atomic byte, shared by the owner thread, client handles
//! and whoever starts a shutdown).

use core::fmt;

mod atomic;

pub use atomic::AtomicRuntimeState;

/// Where a runtime is in its lifecycle.
///
/// A runtime is built ([`Created`](Self::Created)), connects to its peers
/// ([`Bootstrapping`](Self::Bootstrapping)), serves work
/// ([`Running`](Self::Running)), finishes what it accepted while refusing
/// more ([`Draining`](Self::Draining)) and stops. Any of the three active
/// states can instead end in [`Failed`](Self::Failed).
///
/// ```text
/// Created -> Bootstrapping -> Running -> Draining -> Stopped
///                  |             |          |
///                  +-------------+----------+------> Failed
/// ```
///
/// # Legal transitions
///
/// Rows are the current state, columns the requested next state; `✓` is
/// legal, `·` is rejected (including every move to the same state).
///
/// | from \ to         | Created | Bootstrapping | Running | Draining | Stopped | Failed |
/// |-------------------|:-------:|:-------------:|:-------:|:--------:|:-------:|:------:|
/// | **Created**       |    ·    |       ✓       |    ·    |    ·     |    ·    |   ·    |
/// | **Bootstrapping** |    ·    |       ·       |    ✓    |    ·     |    ·    |   ✓    |
/// | **Running**       |    ·    |       ·       |    ·    |    ✓     |    ·    |   ✓    |
/// | **Draining**      |    ·    |       ·       |    ·    |    ·     |    ✓    |   ✓    |
/// | **Stopped**       |    ·    |       ·       |    ·    |    ·     |    ·    |   ·    |
/// | **Failed**        |    ·    |       ·       |    ·    |    ·     |    ·    |   ·    |
///
/// A runtime that was never bootstrapped has nothing to fail: `Created`
/// cannot move to `Failed` (dropping it is enough). Only `Running` accepts
/// new work ([`accepts_work`](Self::accepts_work)).
///
/// # Examples
///
/// ```
/// use dinah_core::{RuntimeState, RuntimeTransitionError};
///
/// let mut state = RuntimeState::Created;
/// state.transition(RuntimeState::Bootstrapping)?;
/// state.transition(RuntimeState::Running)?;
/// assert!(state.accepts_work());
/// state.transition(RuntimeState::Draining)?;
/// assert!(!state.accepts_work());
/// assert_eq!(
///     state.transition(RuntimeState::Running),
///     Err(RuntimeTransitionError { from: RuntimeState::Draining, to: RuntimeState::Running })
/// );
/// # Ok::<(), RuntimeTransitionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuntimeState {
    /// Built and configured; actions registered, not yet connected. The
    /// initial state.
    Created = 0,
    /// Connecting to peers and exchanging the handshake.
    Bootstrapping = 1,
    /// Serving: the only state that accepts new work.
    Running = 2,
    /// Shutting down: new work is rejected while work already accepted is
    /// cancelled or finished.
    Draining = 3,
    /// Terminal: shut down cleanly.
    Stopped = 4,
    /// Terminal: bootstrap, serving or draining failed; the runtime cannot
    /// be used again.
    Failed = 5,
}

impl RuntimeState {
    /// Every state, in declaration order.
    pub const ALL: [Self; 6] = [
        Self::Created,
        Self::Bootstrapping,
        Self::Running,
        Self::Draining,
        Self::Stopped,
        Self::Failed,
    ];

    /// Is `self → to` one of the [legal transitions](Self#legal-transitions)?
    ///
    /// Pure: it neither changes nor synchronises anything.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::RuntimeState;
    ///
    /// assert!(RuntimeState::Running.can_transition_to(RuntimeState::Failed));
    /// assert!(!RuntimeState::Created.can_transition_to(RuntimeState::Failed));
    /// assert!(!RuntimeState::Running.can_transition_to(RuntimeState::Stopped));
    /// ```
    #[must_use]
    pub const fn can_transition_to(self, to: Self) -> bool {
        matches!(
            (self, to),
            (Self::Created, Self::Bootstrapping)
                | (Self::Bootstrapping, Self::Running)
                | (Self::Running, Self::Draining)
                | (Self::Draining, Self::Stopped)
                | (
                    Self::Bootstrapping | Self::Running | Self::Draining,
                    Self::Failed
                )
        )
    }

    /// Moves to `to` if that is a [legal transition](Self#legal-transitions).
    ///
    /// # Errors
    ///
    /// [`RuntimeTransitionError`] naming the current state and `to` if the
    /// transition is not legal; `self` is then unchanged.
    pub const fn transition(&mut self, to: Self) -> Result<(), RuntimeTransitionError> {
        if self.can_transition_to(to) {
            *self = to;
            Ok(())
        } else {
            Err(RuntimeTransitionError { from: *self, to })
        }
    }

    /// Is this a terminal state (`Stopped` or `Failed`)?
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Stopped | Self::Failed)
    }

    /// Does a runtime in this state admit new work? Only `Running` does.
    #[must_use]
    pub const fn accepts_work(self) -> bool {
        matches!(self, Self::Running)
    }

    /// The lowercase name used by `Display`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Bootstrapping => "bootstrapping",
            Self::Running => "running",
            Self::Draining => "draining",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
        }
    }

    /// The byte stored by [`AtomicRuntimeState`].
    pub(crate) const fn to_bits(self) -> u8 {
        self as u8
    }

    /// The inverse of [`to_bits`](Self::to_bits).
    ///
    /// Only ever called on bytes written by `to_bits`, so every other value
    /// is unreachable.
    pub(crate) const fn from_bits(bits: u8) -> Self {
        match bits {
            0 => Self::Created,
            1 => Self::Bootstrapping,
            2 => Self::Running,
            3 => Self::Draining,
            4 => Self::Stopped,
            5 => Self::Failed,
            _ => panic!("runtime state cell holds a byte no RuntimeState encodes"),
        }
    }
}

impl fmt::Display for RuntimeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime state transition was rejected.
///
/// `from` is the state the runtime was in when the transition was tried
/// (for [`AtomicRuntimeState`], the state actually found, which differs from
/// the caller's expectation when another thread moved it first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuntimeTransitionError {
    /// The state the runtime was in.
    pub from: RuntimeState,
    /// The state that was requested.
    pub to: RuntimeState,
}

impl fmt::Display for RuntimeTransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "runtime transition from {} to {} rejected",
            self.from, self.to
        )
    }
}

impl core::error::Error for RuntimeTransitionError {}

#[cfg(test)]
mod tests {
    use super::*;
    use RuntimeState::{Bootstrapping, Created, Draining, Failed, Running, Stopped};

    extern crate std;
    use std::string::ToString;

    /// The table from the type docs, written out cell by cell.
    pub(super) const LEGAL: [(RuntimeState, RuntimeState); 7] = [
        (Created, Bootstrapping),
        (Bootstrapping, Running),
        (Running, Draining),
        (Draining, Stopped),
        (Bootstrapping, Failed),
        (Running, Failed),
        (Draining, Failed),
    ];

    #[test]
    fn every_cell_of_the_table() {
        let mut cells = 0;
        for from in RuntimeState::ALL {
            for to in RuntimeState::ALL {
                cells += 1;
                let legal = LEGAL.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
                let mut state = from;
                let result = state.transition(to);
                if legal {
                    assert_eq!(result, Ok(()));
                    assert_eq!(state, to);
                } else {
                    assert_eq!(result, Err(RuntimeTransitionError { from, to }));
                    assert_eq!(state, from, "a rejection must not move the state");
                }
            }
        }
        assert_eq!(cells, 36);
    }

    #[test]
    fn terminal_and_admission() {
        for state in RuntimeState::ALL {
            let has_exit = RuntimeState::ALL
                .iter()
                .any(|&to| state.can_transition_to(to));
            assert_eq!(state.is_terminal(), !has_exit, "{state}");
            assert_eq!(state.accepts_work(), state == Running, "{state}");
        }
    }

    #[test]
    fn bits_round_trip() {
        for state in RuntimeState::ALL {
            assert_eq!(RuntimeState::from_bits(state.to_bits()), state);
        }
    }

    #[test]
    #[should_panic(expected = "runtime state cell holds a byte no RuntimeState encodes")]
    fn foreign_bits_are_a_bug() {
        let _ = RuntimeState::from_bits(6);
    }

    #[test]
    fn display_is_lowercase() {
        let names: std::vec::Vec<_> = RuntimeState::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "created",
                "bootstrapping",
                "running",
                "draining",
                "stopped",
                "failed"
            ]
        );
        assert_eq!(
            RuntimeTransitionError {
                from: Stopped,
                to: Running
            }
            .to_string(),
            "runtime transition from stopped to running rejected"
        );
    }
}
