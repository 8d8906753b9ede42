//! The portable readiness set, on the `polling` crate (epoll on Linux,
//! kqueue on the BSDs and macOS, event ports on illumos, IOCP on Windows).
//!
//! A `polling::Poller` serves one waiting thread at a time (a second
//! thread's wait returns at once, empty), and the owner's look must never
//! stand behind the watcher's wait, so the set is two pollers with every
//! socket in both, level-triggered and for reading: the owner asks one
//! with a zero timeout, the watcher waits on the other, and
//! [`Set::interrupt`] notifies the watcher's.

use std::io;
use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use polling::{Event, Events, PollMode, Poller};

/// The key every socket is registered under: the set only tells whether
/// any socket is ready, never which.
const KEY: usize = 0;

/// Every connection's socket in two pollers (see the module docs).
#[derive(Debug)]
pub(crate) struct Set {
    /// Asked by the owner, never blocking.
    look: Poller,
    /// Waited on by the watcher.
    wait: Poller,
    /// Scratch for each poller's events (one each is enough).
    looked: Mutex<Events>,
    waited: Mutex<Events>,
}

/// A socket's place in a [`Set`]: a handle of its own to the socket, so
/// that the set can take it out of both pollers before it closes.
#[derive(Debug)]
pub(crate) struct Entry(TcpStream);

fn scratch() -> Mutex<Events> {
    Mutex::new(Events::with_capacity(NonZeroUsize::MIN))
}

fn locked(events: &Mutex<Events>) -> MutexGuard<'_, Events> {
    // Only the scratch events are behind the lock, cleared before each
    // use; a poisoned lock still holds valid ones.
    events.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Set {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            look: Poller::new()?,
            wait: Poller::new()?,
            looked: scratch(),
            waited: scratch(),
        })
    }

    /// Adds `socket` (through a handle of the entry's own, so the socket
    /// stays open until the entry is removed).
    pub(crate) fn add(&self, socket: &TcpStream) -> io::Result<Entry> {
        let own = socket.try_clone()?;
        let interest = Event::readable(KEY);
        // SAFETY: `own` is deleted from both pollers before it is closed:
        // only `remove` drops an entry, after deleting it; if it is added
        // to one poller only, it is deleted from that one here first.
        unsafe { self.look.add_with_mode(&own, interest, PollMode::Level)? };
        // SAFETY: as above.
        if let Err(error) = unsafe { self.wait.add_with_mode(&own, interest, PollMode::Level) } {
            let _ = self.look.delete(&own);
            return Err(error);
        }
        Ok(Entry(own))
    }

    /// Removes a socket from both pollers, then closes the entry's handle.
    pub(crate) fn remove(&self, entry: Entry) {
        // Nothing useful can be done if a delete fails: the socket is
        // about to be shut down.
        let _ = self.look.delete(&entry.0);
        let _ = self.wait.delete(&entry.0);
    }

    /// Is any socket readable right now? Never blocks.
    pub(crate) fn any_ready(&self) -> bool {
        let mut events = locked(&self.looked);
        events.clear();
        self.look
            .wait(&mut events, Some(Duration::ZERO))
            .is_ok_and(|ready| ready > 0)
    }

    /// Blocks until a socket is readable (`true`) or
    /// [`interrupt`](Self::interrupt) (`false`); a failed or interrupted
    /// wait also returns `false`.
    pub(crate) fn wait(&self) -> bool {
        let mut events = locked(&self.waited);
        events.clear();
        self.wait
            .wait(&mut events, None)
            .is_ok_and(|ready| ready > 0)
    }

    /// Ends the current (or the next) [`wait`](Self::wait).
    pub(crate) fn interrupt(&self) {
        let _ = self.wait.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readiness::tests::set_suite;

    set_suite!(Set);
}
