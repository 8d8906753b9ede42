//! Waking an idle owner thread when a connection has something to read.
//!
//! The owner reads every socket itself, without blocking, inside `poll`.
//! While it is busy nothing else touches the sockets. Before it parks
//! (in `idle_wait`, after a spin that looks at the sockets itself), it
//! arms each connection's [`Watcher`]: a thread that blocks in `peek`
//! until the socket holds data, reaches its end or fails, then wakes the
//! owner and disarms itself. `peek` takes nothing, so the owner's reads
//! see the stream whole, and it returns at once if data came in before
//! the watcher got there, so no arrival between the owner's last read and
//! its park is missed.
//!
//! A watcher stays armed until it fires: an armed watcher whose socket
//! stays quiet costs nothing, and the next park finds it armed already.
//! The cost of a wake-up is paid only by an owner that actually parked
//! (or a socket that got data while the owner was busy, which then wakes
//! it once without a park to end).

use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};

use dinah_core::Rank;
use dinah_core::wire::Channel;
use dinah_std::transport::{IoOp, Wakeup};

use crate::error::TcpError;

/// Stack size of a watcher thread: it only peeks one byte.
const WATCHER_STACK: usize = 64 << 10;

/// The owner's side of one connection's watcher thread.
#[derive(Debug)]
pub(crate) struct Watcher {
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct State {
    flags: Mutex<Flags>,
    changed: Condvar,
}

#[derive(Debug, Default, Clone, Copy)]
struct Flags {
    /// The owner is (about to be) parked: wake it when the socket is
    /// readable.
    armed: bool,
    /// The connection is closing: end the thread.
    stop: bool,
}

impl State {
    fn flags(&self) -> std::sync::MutexGuard<'_, Flags> {
        // The lock guards two booleans and no code that can panic while
        // holding it; a poisoned lock still holds valid flags.
        self.flags.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Watcher {
    /// Starts the watcher of `stream` (`peer`'s `channel` connection),
    /// waking `wakeup`; it starts disarmed.
    ///
    /// # Errors
    ///
    /// [`TcpError::Io`] if the thread cannot be spawned.
    pub(crate) fn start(
        stream: Arc<TcpStream>,
        peer: Rank,
        channel: Channel,
        wakeup: Wakeup,
    ) -> Result<Self, TcpError> {
        let state = Arc::new(State::default());
        let thread = {
            let state = Arc::clone(&state);
            thread::Builder::new()
                .name(format!("dinah-tcp-{}-{channel}", peer.get()))
                .stack_size(WATCHER_STACK)
                .spawn(move || watch(&stream, &state, &wakeup))
                .map_err(|e| TcpError::io(Some(peer), IoOp::Spawn, e))?
        };
        Ok(Self {
            state,
            thread: Some(thread),
        })
    }

    /// Asks the watcher to wake the owner once the socket is readable (at
    /// once if it is already). Cheap when it is armed already.
    pub(crate) fn arm(&self) {
        let mut flags = self.state.flags();
        if !flags.armed && !flags.stop {
            flags.armed = true;
            self.state.changed.notify_one();
        }
    }

    /// Tells the thread to end. A watcher blocked in `peek` ends once the
    /// socket is shut down (the caller does that).
    pub(crate) fn stop(&self) {
        self.state.flags().stop = true;
        self.state.changed.notify_one();
    }

    /// The thread, until joined.
    pub(crate) fn thread(&mut self) -> &mut Option<JoinHandle<()>> {
        &mut self.thread
    }
}

/// The watcher thread: waits to be armed, then for the socket to become
/// readable, then wakes the owner; until stopped.
fn watch(stream: &TcpStream, state: &State, wakeup: &Wakeup) {
    let mut byte = [0u8; 1];
    loop {
        {
            let mut flags = state.flags();
            while !flags.armed && !flags.stop {
                flags = state
                    .changed
                    .wait(flags)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if flags.stop {
                return;
            }
        }
        // Blocks until there is data, the end of the stream or an error;
        // whichever it is, the owner's next read finds out. An interrupted
        // peek wakes the owner too, which re-arms at its next park.
        let _ = stream.peek(&mut byte);
        {
            let mut flags = state.flags();
            flags.armed = false;
            if flags.stop {
                return;
            }
        }
        wakeup.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{Ipv4Addr, Shutdown, TcpListener};
    use std::time::{Duration, Instant};

    use dinah_core::WorldSize;

    use super::*;

    fn pair() -> (Arc<TcpStream>, TcpStream) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (Arc::new(client), server)
    }

    fn peer() -> Rank {
        WorldSize::new(2).unwrap().rank(1).unwrap()
    }

    #[test]
    fn an_armed_watcher_wakes_the_owner_once_per_arrival() {
        let (client, mut server) = pair();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let mut watcher =
            Watcher::start(Arc::clone(&client), peer(), Channel::Action, wakeup.clone()).unwrap();
        // Disarmed: data arriving wakes nobody.
        server.write_all(b"a").unwrap();
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        // Armed with data already there: wakes at once.
        watcher.arm();
        assert!(wakeup.wait(Duration::ZERO, Duration::from_secs(10)));
        // It disarmed itself: the unread byte does not wake again.
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        let mut buf = [0u8; 8];
        assert_eq!(
            crate::socket::recv_nonblocking(&client, &mut buf).unwrap(),
            1
        );
        // Armed on an empty socket: wakes when data arrives later.
        watcher.arm();
        let late = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            server.write_all(b"b").unwrap();
            server
        });
        let start = Instant::now();
        while !wakeup.wait(Duration::ZERO, Duration::from_secs(10)) {
            assert!(start.elapsed() < Duration::from_secs(10), "never woken");
        }
        let server = late.join().unwrap();
        assert_eq!(
            crate::socket::recv_nonblocking(&client, &mut buf).unwrap(),
            1
        );
        // Stopping ends a watcher blocked in `peek` once the socket is shut.
        watcher.arm();
        thread::sleep(Duration::from_millis(10));
        watcher.stop();
        client.shutdown(Shutdown::Both).unwrap();
        watcher.thread().take().unwrap().join().unwrap();
        drop(server);
    }
}
