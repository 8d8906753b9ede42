//! A level-triggered readiness set over every connection's socket: the
//! owner asks it, without blocking, whether any socket is ready (readable:
//! data, its end, or an error; or, for a socket whose write waits for room
//! in its send buffer, writable), and the watcher thread (`watch.rs`) waits
//! on it until one is, or until it is interrupted.
//!
//! The set is a `polling::Poller` (epoll on Linux, kqueue on macOS and the
//! BSDs, IOCP on Windows; `polling`'s event ports on illumos offer only
//! one-shot interest, so a socket cannot join the set there) with every
//! socket registered level-triggered for reading, and for writing too
//! while a write to it waits for room ([`Set::watch`]). The watcher waits in
//! [`Poller::wait`]; [`Set::interrupt`] notifies the poller.
//!
//! The owner's look (when it asks the set rather than reading its few
//! sockets itself) must be one cheap system call and must never stand
//! behind the watcher's wait, and a `Poller` serves one waiting thread at a
//! time and re-arms a timer and a notifier on every wait (a look through
//! it costs several system calls). So on Linux and Android the owner asks
//! the poller's own descriptor instead, with one `poll(2)` of zero timeout
//! (through `rustix`): polling an epoll descriptor checks each of its
//! ready sockets again, so it is readable exactly while one of its sockets
//! is, and asking takes nothing from it. A kqueue descriptor does not check
//! again (it stays readable while an event is queued, even after the data
//! was read, until the next `kevent` call), and Windows has no descriptor
//! at all; elsewhere the owner therefore asks a second poller that holds
//! the same sockets, with a zero timeout.

use std::io;
use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard, PoisonError};

use polling::{Event, Events, PollMode, Poller};

/// The key every socket is registered under: the set only tells whether
/// any socket is ready, never which.
const KEY: usize = 0;

/// What makes a socket of the set ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Data, its end, or an error: every socket, always.
    Read,
    /// That, or room in its send buffer: a socket whose owner has a write
    /// waiting for room.
    ReadOrWrite,
}

impl Interest {
    fn event(self) -> Event {
        match self {
            Self::Read => Event::readable(KEY),
            Self::ReadOrWrite => Event::all(KEY),
        }
    }
}

/// Every connection's socket, level-triggered (see the module docs).
#[derive(Debug)]
pub(crate) struct Set {
    /// Waited on by the watcher; on Unix also looked at by the owner.
    poller: Poller,
    /// Scratch for the watcher's events (one is enough).
    waited: Mutex<Events>,
    /// The owner's own poller and its scratch, where the watcher's cannot
    /// be looked at through its descriptor.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    look: (Poller, Mutex<Events>),
}

fn scratch() -> Mutex<Events> {
    Mutex::new(Events::with_capacity(NonZeroUsize::MIN))
}

fn locked(events: &Mutex<Events>) -> MutexGuard<'_, Events> {
    // Only scratch events are behind the lock, cleared before each use; a
    // poisoned lock still holds valid ones.
    events.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Set {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            poller: Poller::new()?,
            waited: scratch(),
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            look: (Poller::new()?, scratch()),
        })
    }

    /// The pollers a socket goes into.
    fn pollers(&self) -> impl Iterator<Item = &Poller> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let look = None;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let look = Some(&self.look.0);
        std::iter::once(&self.poller).chain(look)
    }

    /// Adds `socket`, ready on `interest`. On failure it is in no poller
    /// of the set.
    ///
    /// # Safety
    ///
    /// `socket` must be [`remove`](Self::remove)d before it is closed: a
    /// poller holds its descriptor, whose number the system may give to
    /// another file once it is closed.
    pub(crate) unsafe fn add(&self, socket: &TcpStream, interest: Interest) -> io::Result<()> {
        for poller in self.pollers() {
            // SAFETY: the caller removes `socket` from every poller of the
            // set before closing it; on failure it is deleted from all of
            // them here (deleting a socket a poller does not hold fails
            // harmlessly), while it is still open.
            let added = unsafe { poller.add_with_mode(socket, interest.event(), PollMode::Level) };
            if let Err(error) = added {
                self.remove(socket);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Changes what makes `socket` (in the set) ready.
    ///
    /// # Errors
    ///
    /// The poller's error; the socket's interest in the pollers already
    /// changed stays changed.
    pub(crate) fn watch(&self, socket: &TcpStream, interest: Interest) -> io::Result<()> {
        for poller in self.pollers() {
            poller.modify_with_mode(socket, interest.event(), PollMode::Level)?;
        }
        Ok(())
    }

    /// Takes `socket` (still open) out of the set.
    pub(crate) fn remove(&self, socket: &TcpStream) {
        for poller in self.pollers() {
            // Nothing useful can be done if it fails: the socket is about
            // to be shut down.
            let _ = poller.delete(socket);
        }
    }

    /// Is any socket ready right now? Never blocks: one `poll(2)` of the
    /// epoll descriptor.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn any_ready(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::new(&self.poller, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).is_ok_and(|ready| ready > 0)
    }

    /// Is any socket ready right now? Never blocks.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(crate) fn any_ready(&self) -> bool {
        let (poller, events) = &self.look;
        let mut events = locked(events);
        events.clear();
        poller
            .wait(&mut events, Some(std::time::Duration::ZERO))
            .is_ok_and(|ready| ready > 0)
    }

    /// Blocks until a socket is ready (`true`) or
    /// [`interrupt`](Self::interrupt) (`false`); a failed wait also returns
    /// `false`.
    pub(crate) fn wait(&self) -> bool {
        let mut events = locked(&self.waited);
        events.clear();
        self.poller
            .wait(&mut events, None)
            .is_ok_and(|ready| ready > 0)
    }

    /// Ends the current (or the next) [`wait`](Self::wait).
    pub(crate) fn interrupt(&self) {
        let _ = self.poller.notify();
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::Shutdown;
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::socket::loopback_pair;

    /// Spins until the set is ready, at most 10 s.
    fn until_ready(set: &Set) {
        let start = Instant::now();
        while !set.any_ready() {
            assert!(start.elapsed() < Duration::from_secs(10), "never ready");
        }
    }

    #[test]
    fn the_set_is_ready_while_a_socket_holds_data_or_its_end() {
        let (mut a, mut b) = loopback_pair();
        let (c, _d) = loopback_pair();
        let set = Set::new().unwrap();
        // SAFETY: both are removed before they close, below.
        unsafe { set.add(&a, Interest::Read).unwrap() };
        // SAFETY: as above.
        unsafe { set.add(&c, Interest::Read).unwrap() };
        assert!(!set.any_ready(), "quiet sockets");
        b.write_all(b"xy").unwrap();
        until_ready(&set);
        // Level-triggered: still ready until the data is read, however
        // often the owner looks.
        assert!(set.any_ready());
        assert!(set.any_ready());
        let mut buf = [0u8; 2];
        a.read_exact(&mut buf).unwrap();
        assert!(!set.any_ready(), "read empty again");
        // The peer's end makes the socket ready; removing it quiets the
        // set.
        b.shutdown(Shutdown::Write).unwrap();
        until_ready(&set);
        set.remove(&a);
        assert!(!set.any_ready());
        set.remove(&c);
    }

    #[test]
    fn a_wait_ends_on_a_ready_socket_or_an_interruption() {
        let (a, mut b) = loopback_pair();
        let set = Arc::new(Set::new().unwrap());
        // SAFETY: removed before it closes, at the end.
        unsafe { set.add(&a, Interest::Read).unwrap() };
        set.interrupt();
        assert!(!set.wait(), "interrupted, nothing ready");
        // The owner looks while the watcher waits: the look is answered at
        // once, and takes nothing from the watcher.
        let waiter = {
            let set = Arc::clone(&set);
            thread::spawn(move || set.wait())
        };
        thread::sleep(Duration::from_millis(20));
        assert!(!set.any_ready());
        b.write_all(b"z").unwrap();
        assert!(waiter.join().unwrap(), "woken by the socket");
        assert!(set.any_ready());
        assert!(set.wait(), "still ready: level-triggered");
        set.remove(&a);
    }

    #[test]
    fn a_socket_watched_for_room_is_ready_once_its_full_buffer_drains() {
        let (a, mut b) = loopback_pair();
        let set = Set::new().unwrap();
        // SAFETY: removed before it closes, at the end.
        unsafe { set.add(&a, Interest::Read).unwrap() };
        // Writable but watched for data only: not ready.
        assert!(!set.any_ready(), "room alone does not count");
        set.watch(&a, Interest::ReadOrWrite).unwrap();
        until_ready(&set);
        // Fill the send buffer (and the peer's receive buffer). An
        // acknowledgement arriving after a write was refused can free room
        // again, so fill until the set stays quiet.
        a.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 64 << 10];
        let mut sent = 0;
        let mut full = false;
        for _ in 0..1000 {
            loop {
                match (&a).write(&chunk) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            if !set.any_ready() {
                full = true;
                break;
            }
        }
        assert!(full, "a full buffer has no room");
        // The peer reads everything: room again, and the set says so.
        let mut buf = vec![0u8; 64 << 10];
        let mut got = 0;
        while got < sent {
            got += b.read(&mut buf).unwrap();
        }
        until_ready(&set);
        // Back to data only: the room no longer counts.
        set.watch(&a, Interest::Read).unwrap();
        assert!(!set.any_ready(), "watched for data only again");
        set.remove(&a);
    }

    #[test]
    fn an_interruption_ends_the_wait_and_leaves_nothing_ready() {
        // The notifier lives in the watcher's poller; once the wait has
        // consumed it, the owner's look sees nothing.
        let set = Set::new().unwrap();
        set.interrupt();
        assert!(!set.wait(), "interrupted, nothing ready");
        assert!(!set.any_ready(), "the wait consumed the interruption");
    }
}
