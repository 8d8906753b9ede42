//! Waking an idle owner thread when a connection has something to read,
//! or room for a write that waits.
//!
//! The owner reads and writes every socket itself, without blocking,
//! inside `poll`. While it is busy nothing else touches the sockets. Every
//! connection's socket is registered in the driver's one readiness set
//! (see `readiness.rs`), so whether any socket is ready is one question
//! however many peers there are: the owner's idle spin asks exactly that
//! when it has more connections than it reads itself (see
//! `TcpConfig::spin_read_connections`).
//! A socket is ready when it holds data, reaches its end or fails; one
//! whose send buffer was full when the owner last wrote to it
//! ([`Registration::watch`]) is ready when it has room again too, so a
//! large frame's next bytes go out as soon as the peer has read the last
//! ones. Before the owner parks, it arms the driver's [`Watcher`]: one
//! thread that waits on the whole set until a socket is ready, then wakes
//! the owner and disarms itself. The set is level-triggered, so a socket
//! that became ready between the owner's last look and the arming ends
//! the wait at once (no arrival is missed), and readiness takes nothing
//! from a socket (the owner reads every stream whole).
//!
//! A watcher stays armed until it fires; disarmed, it waits on a condition
//! variable, not on the sockets, so a socket the busy owner has not read
//! yet costs nothing. A socket in the set still costs its peer a little on
//! every arrival (the set's wake-up callback runs in the sender's system
//! call), so while the owner's spin reads the sockets itself they step out
//! of the set ([`Registration::leave`]) and rejoin before it parks
//! ([`Registration::join`]). A connection leaves the set for good when its
//! stream ends or it is aborted ([`Registration::cancel`]), so a finished
//! stream never keeps the set readable. Stopping interrupts the thread's
//! wait on the set, so it ends at once, without touching the sockets.

use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};

use dinah_core::Rank;
use dinah_std::transport::{IoOp, Wakeup};

use crate::error::TcpError;
use crate::readiness::{Interest, Set};

/// Stack size of the watcher thread: it only waits.
const WATCHER_STACK: usize = 64 << 10;

/// The owner's side of a driver's watcher thread.
#[derive(Debug)]
pub(crate) struct Watcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    /// Every live connection's socket.
    set: Set,
    flags: Mutex<Flags>,
    changed: Condvar,
}

#[derive(Debug, Default, Clone, Copy)]
struct Flags {
    /// The owner is (about to be) parked: wake it when a socket is
    /// ready.
    armed: bool,
    /// The driver is closing: end the thread.
    stop: bool,
}

impl Shared {
    fn flags(&self) -> std::sync::MutexGuard<'_, Flags> {
        // The lock guards two booleans and no code that can panic while
        // holding it; a poisoned lock still holds valid flags.
        self.flags.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Watcher {
    /// Starts the watcher of rank `me`'s driver, waking `wakeup`; it
    /// starts disarmed, with no socket in its set.
    ///
    /// # Errors
    ///
    /// [`TcpError::Io`] if the set cannot be created or the thread cannot
    /// be spawned.
    pub(crate) fn start(me: Rank, wakeup: Wakeup) -> Result<Self, TcpError> {
        let io = |e| TcpError::io(None, IoOp::Spawn, e);
        let shared = Arc::new(Shared {
            set: Set::new().map_err(io)?,
            flags: Mutex::new(Flags::default()),
            changed: Condvar::new(),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("dinah-tcp-{}-watch", me.get()))
                .stack_size(WATCHER_STACK)
                .spawn(move || watch(&shared, &wakeup))
                .map_err(io)?
        };
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Adds `stream` (a connection to `peer`) to the set, ready when
    /// readable; it stays there until the returned registration, which
    /// owns the stream from now on, leaves, is cancelled or is dropped.
    ///
    /// # Errors
    ///
    /// [`TcpError::Io`] if the socket cannot be added.
    pub(crate) fn register(&self, stream: TcpStream, peer: Rank) -> Result<Registration, TcpError> {
        let mut registration = Registration {
            shared: Arc::clone(&self.shared),
            stream,
            place: Place::Out,
            interest: Interest::Read,
        };
        registration
            .join()
            .map_err(|e| TcpError::io(Some(peer), IoOp::Configure, e))?;
        Ok(registration)
    }

    /// Is any registered socket ready (data, its end, an error, or room
    /// for a waiting write) right now? One question, whatever the number
    /// of connections.
    pub(crate) fn any_ready(&self) -> bool {
        self.shared.set.any_ready()
    }

    /// Asks the watcher to wake the owner once a registered socket is
    /// ready (at once if one is already). Cheap when it is armed
    /// already.
    pub(crate) fn arm(&self) {
        let mut flags = self.shared.flags();
        if !flags.armed && !flags.stop {
            flags.armed = true;
            self.shared.changed.notify_one();
        }
    }

    /// Tells the thread to end; it does at once, armed or not.
    pub(crate) fn stop(&self) {
        self.shared.flags().stop = true;
        self.shared.changed.notify_one();
        self.shared.set.interrupt();
    }

    /// The thread, until joined.
    pub(crate) fn thread(&mut self) -> &mut Option<JoinHandle<()>> {
        &mut self.thread
    }
}

impl Drop for Watcher {
    /// Stops the thread (without waiting for it).
    fn drop(&mut self) {
        self.stop();
    }
}

/// A connection's socket, owned together with its place in a watcher's
/// set, so that it leaves the set before it closes.
///
/// A registered socket may step out of the set and back in
/// ([`leave`](Self::leave), [`join`](Self::join)): while it is in, every
/// arrival on it runs the set's wake-up callback inside the sender's
/// system call, which a socket the owner reads by itself does not need.
#[derive(Debug)]
pub(crate) struct Registration {
    shared: Arc<Shared>,
    stream: TcpStream,
    /// Where the socket stands with the set.
    place: Place,
    /// What makes it ready there (kept while it is out, for its return).
    interest: Interest,
}

/// Where a registered socket stands with its watcher's set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In the set: an armed watcher wakes the owner when it is ready.
    In,
    /// Out for now; [`Registration::join`] puts it back.
    Out,
    /// Out for good: its stream ended or it was aborted.
    Cancelled,
}

impl Registration {
    /// The socket.
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Makes the socket ready in the set on `interest` from now on (no
    /// system call if that is its interest already, while it is out of
    /// the set, or once cancelled).
    ///
    /// # Errors
    ///
    /// The set's error.
    pub(crate) fn watch(&mut self, interest: Interest) -> std::io::Result<()> {
        if self.place == Place::In && self.interest != interest {
            self.shared.set.watch(&self.stream, interest)?;
        }
        self.interest = interest;
        Ok(())
    }

    /// Is the socket in the set, or out only for now (not cancelled)?
    pub(crate) fn is_watched(&self) -> bool {
        self.place != Place::Cancelled
    }

    /// Takes the socket out of the set until [`join`](Self::join) (no
    /// system call if it is out already, or cancelled).
    pub(crate) fn leave(&mut self) {
        if self.place == Place::In {
            self.shared.set.remove(&self.stream);
            self.place = Place::Out;
        }
    }

    /// Puts a socket that [`left`](Self::leave) back into the set, ready
    /// on its interest (no system call if it is in already, or
    /// cancelled).
    ///
    /// # Errors
    ///
    /// The set's error; the socket stays out.
    pub(crate) fn join(&mut self) -> std::io::Result<()> {
        if self.place == Place::Out {
            // SAFETY: the registration owns the stream and takes it out of
            // the set before it closes (`cancel`, run by `Drop` before the
            // stream field drops); a failed add leaves it in no poller.
            unsafe { self.shared.set.add(&self.stream, self.interest) }?;
            self.place = Place::In;
        }
        Ok(())
    }

    /// Takes the socket out of the set for good (idempotent); it stays
    /// open.
    pub(crate) fn cancel(&mut self) {
        if std::mem::replace(&mut self.place, Place::Cancelled) == Place::In {
            self.shared.set.remove(&self.stream);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The watcher thread: waits to be armed, then for a registered socket to
/// become ready, then wakes the owner; until stopped.
fn watch(shared: &Shared, wakeup: &Wakeup) {
    loop {
        {
            let mut flags = shared.flags();
            while !flags.armed && !flags.stop {
                flags = shared
                    .changed
                    .wait(flags)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if flags.stop {
                return;
            }
        }
        // Blocks until a socket is ready, or an interruption; an
        // interrupted wait just goes round again.
        let ready = shared.set.wait();
        let mut flags = shared.flags();
        if flags.stop {
            return;
        }
        if ready && flags.armed {
            flags.armed = false;
            drop(flags);
            wakeup.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::Shutdown;
    use std::time::{Duration, Instant};

    use dinah_core::WorldSize;

    use super::*;
    use crate::socket::loopback_pair;

    fn rank(n: u32) -> Rank {
        WorldSize::new(4).unwrap().rank(n).unwrap()
    }

    fn woken(wakeup: &Wakeup) -> bool {
        let start = Instant::now();
        while !wakeup.wait(Duration::ZERO, Duration::from_secs(10)) {
            if start.elapsed() > Duration::from_secs(10) {
                return false;
            }
        }
        true
    }

    #[test]
    fn an_armed_watcher_wakes_the_owner_once_per_arrival_on_any_socket() {
        let (first, mut first_peer) = loopback_pair();
        let (second, mut second_peer) = loopback_pair();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let mut watcher = Watcher::start(rank(0), wakeup.clone()).unwrap();
        let first = watcher.register(first, rank(1)).unwrap();
        let second = watcher.register(second, rank(2)).unwrap();
        assert!(!watcher.any_ready());
        // Disarmed: data arriving wakes nobody, but the owner can see it.
        first_peer.write_all(b"a").unwrap();
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        assert!(watcher.any_ready());
        // Armed with data already there: wakes at once.
        watcher.arm();
        assert!(woken(&wakeup));
        // It disarmed itself: the unread byte does not wake again.
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        let mut buf = [0u8; 8];
        assert_eq!(
            crate::socket::recv_nonblocking(first.stream(), &mut buf).unwrap(),
            1
        );
        assert!(!watcher.any_ready());
        // Armed on quiet sockets: wakes when data arrives later, on the
        // other connection this time.
        watcher.arm();
        let late = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            second_peer.write_all(b"b").unwrap();
            second_peer
        });
        assert!(woken(&wakeup), "never woken");
        let second_peer = late.join().unwrap();
        assert_eq!(
            crate::socket::recv_nonblocking(second.stream(), &mut buf).unwrap(),
            1
        );
        // Stopping ends a watcher blocked on quiet sockets, without
        // touching them.
        watcher.arm();
        thread::sleep(Duration::from_millis(10));
        watcher.stop();
        watcher.thread().take().unwrap().join().unwrap();
        drop((first_peer, second_peer));
    }

    #[test]
    fn a_cancelled_registration_no_longer_wakes_the_owner() {
        let (ended, ended_peer) = loopback_pair();
        let (quiet, _quiet_peer) = loopback_pair();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let watcher = Watcher::start(rank(0), wakeup.clone()).unwrap();
        let mut ended_registration = watcher.register(ended, rank(1)).unwrap();
        let _quiet = watcher.register(quiet, rank(2)).unwrap();
        // A stream that ended stays readable (its end) until it leaves the
        // set.
        ended_peer.shutdown(Shutdown::Write).unwrap();
        watcher.arm();
        assert!(woken(&wakeup));
        ended_registration.cancel();
        ended_registration.cancel();
        assert!(!watcher.any_ready());
        watcher.arm();
        assert!(
            !wakeup.wait(Duration::ZERO, Duration::from_millis(50)),
            "a cancelled socket woke the owner"
        );
        drop(watcher);
        drop(ended_peer);
    }

    /// A socket that left the set is not seen by the set or the watcher,
    /// however much waits on it; joining again, it is seen at once, with
    /// the interest it was given while out; a cancelled one never joins.
    #[test]
    fn a_socket_out_of_the_set_is_seen_again_once_it_joins() {
        let (socket, mut socket_peer) = loopback_pair();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let watcher = Watcher::start(rank(0), wakeup.clone()).unwrap();
        let mut registration = watcher.register(socket, rank(1)).unwrap();
        registration.leave();
        registration.leave();
        socket_peer.write_all(b"a").unwrap();
        watcher.arm();
        assert!(
            !wakeup.wait(Duration::ZERO, Duration::from_millis(50)),
            "a socket out of the set woke the owner"
        );
        assert!(!watcher.any_ready());
        assert!(registration.is_watched());
        // The armed watcher sees it as soon as it is back.
        registration.join().unwrap();
        registration.join().unwrap();
        assert!(woken(&wakeup));
        assert!(watcher.any_ready());
        let mut buf = [0u8; 8];
        assert_eq!(
            crate::socket::recv_nonblocking(registration.stream(), &mut buf).unwrap(),
            1
        );
        assert!(!watcher.any_ready());
        // Watched for room while out: an empty send buffer has room, so it
        // is ready the moment it joins.
        registration.leave();
        registration.watch(Interest::ReadOrWrite).unwrap();
        assert!(!watcher.any_ready());
        registration.join().unwrap();
        assert!(watcher.any_ready());
        registration.watch(Interest::Read).unwrap();
        assert!(!watcher.any_ready());
        // Cancelled while out, it stays out.
        registration.leave();
        registration.cancel();
        assert!(!registration.is_watched());
        registration.join().unwrap();
        socket_peer.write_all(b"b").unwrap();
        watcher.arm();
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        assert!(!watcher.any_ready());
    }
}
