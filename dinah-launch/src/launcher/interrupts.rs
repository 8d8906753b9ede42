//! [`Interrupts`]: the signals a launcher was sent, handed to a running
//! [`launch_until`](super::launch_until).

use std::sync::{Mutex, PoisonError};

/// Signals sent to the launcher while a run goes on, counted.
///
/// Whoever catches the signals (the `dinah-run` binary, with `signal-hook`)
/// calls [`raise`](Self::raise); the launch loop reads it every tick. On
/// the first interrupt it passes the signal on to every rank's process
/// group and gives the ranks [`LaunchConfig::interrupt_grace`] to exit; on
/// the second it kills them at once, as a second Ctrl-C does under
/// `mpirun`.
///
/// [`LaunchConfig::interrupt_grace`]: super::LaunchConfig#structfield.interrupt_grace
#[derive(Debug, Default)]
pub struct Interrupts {
    /// How many arrived, and the first one's number (0 until one does).
    seen: Mutex<(u32, i32)>,
}

impl Interrupts {
    /// None so far.
    pub const fn new() -> Self {
        Self {
            seen: Mutex::new((0, 0)),
        }
    }

    /// Records one signal, numbered `signal` (`libc::SIGINT`, ...).
    pub fn raise(&self, signal: i32) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.0 == 0 {
            seen.1 = signal;
        }
        seen.0 = seen.0.saturating_add(1);
    }

    /// How many signals arrived, and the first one's number.
    pub fn seen(&self) -> (u32, i32) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_kept_and_every_one_counted() {
        let interrupts = Interrupts::new();
        assert_eq!(interrupts.seen(), (0, 0));
        interrupts.raise(libc::SIGTERM);
        interrupts.raise(libc::SIGINT);
        assert_eq!(interrupts.seen(), (2, libc::SIGTERM));
    }
}
