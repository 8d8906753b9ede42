//! A gate that handlers wait at until the test opens it.

use std::sync::{Condvar, Mutex};

/// Closed until [`open`](Self::open); then every [`wait`](Self::wait)
/// returns at once.
#[derive(Default)]
pub(crate) struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    /// Opens the gate for every waiter, present and future.
    pub(crate) fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    /// Waits until the gate is open.
    pub(crate) fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
}
