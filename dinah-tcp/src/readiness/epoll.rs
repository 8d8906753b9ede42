//! The Linux readiness set: the few calls the watcher needs, an `epoll`
//! set of sockets, an `eventfd` to interrupt a wait, and `poll(2)` over
//! both, behind [`Set`].
//!
//! The set is level-triggered and registers each socket for input, peer
//! hang-up and errors: the epoll descriptor itself is readable whenever
//! any registered socket has data, reached its end or failed, so one
//! `poll` on it (plus the eventfd) waits for all of a driver's sockets at
//! once, and one `epoll_wait` with a zero timeout tells whether any of
//! them is ready. Readiness takes nothing from a socket: the owner's reads
//! still see every stream whole.
//!
//! Each call is a thin `unsafe` FFI wrapper with its `SAFETY:` argument;
//! Miri cannot run them (system calls), so the unit tests below and the
//! watcher's and transport's tests exercise them on real sockets.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Every connection's socket in one `epoll` set: the owner asks it with
/// one `epoll_wait` of zero timeout, the watcher waits on it (with
/// `poll(2)` over the set and an `eventfd` that interrupts the wait).
#[derive(Debug)]
pub(crate) struct Set {
    epoll: Epoll,
    signal: EventFd,
}

/// A socket's place in a [`Set`]: its descriptor.
#[derive(Debug)]
pub(crate) struct Entry(RawFd);

impl Set {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            epoll: Epoll::new()?,
            signal: EventFd::new()?,
        })
    }

    /// Adds `socket`. Remove it before it closes: a closed descriptor's
    /// number may be reused.
    pub(crate) fn add(&self, socket: &TcpStream) -> io::Result<Entry> {
        let fd = socket.as_raw_fd();
        self.epoll.add(fd)?;
        Ok(Entry(fd))
    }

    /// Removes a socket. Nothing useful can be done if it fails: the
    /// socket is about to be shut down, and closing it removes it too.
    pub(crate) fn remove(&self, entry: Entry) {
        let _ = self.epoll.remove(entry.0);
    }

    /// Is any socket readable right now? Never blocks.
    pub(crate) fn any_ready(&self) -> bool {
        self.epoll.any_ready()
    }

    /// Blocks until a socket is readable (`true`) or [`interrupt`]
    /// (`false`; the interruption is consumed); a wait interrupted by a
    /// signal of the process also returns `false`.
    ///
    /// [`interrupt`]: Self::interrupt
    pub(crate) fn wait(&self) -> bool {
        let readable = wait_either(&self.epoll, &self.signal, None);
        if readable.second {
            self.signal.reset();
        }
        readable.first
    }

    /// Ends the current (or the next) [`wait`](Self::wait).
    pub(crate) fn interrupt(&self) {
        self.signal.signal();
    }
}

/// An `epoll` set of sockets, watched for input, hang-up and errors.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// What a socket is registered for: readable, the peer hung up, or
/// (always reported) an error or a hang-up of both directions.
const INTEREST: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

impl Epoll {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: `epoll_create1` takes a flag word and returns a new
        // descriptor or -1; nothing else is touched.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        Ok(Self { fd: owned(fd)? })
    }

    /// Adds `socket` to the set.
    pub(crate) fn add(&self, socket: RawFd) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: INTEREST,
            u64: u64::try_from(socket).unwrap_or(0),
        };
        // SAFETY: both descriptors are open (the caller owns `socket`), and
        // `event` is a valid, initialised `epoll_event` that the call only
        // reads.
        let rc = unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                socket,
                &raw mut event,
            )
        };
        check(rc).map(drop)
    }

    /// Removes `socket` from the set. Removing one that is not (or no
    /// longer) in it is not an error: closing a descriptor removes it too.
    pub(crate) fn remove(&self, socket: RawFd) -> io::Result<()> {
        // SAFETY: the epoll descriptor is open; `EPOLL_CTL_DEL` ignores the
        // event argument, for which a null pointer is allowed since Linux
        // 2.6.9.
        let rc = unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                socket,
                std::ptr::null_mut(),
            )
        };
        match check(rc) {
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOENT | libc::EBADF)) => {
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// Is any socket of the set ready right now? Never blocks.
    pub(crate) fn any_ready(&self) -> bool {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: the epoll descriptor is open and `event` has room for the
        // one event asked for; a zero timeout never blocks.
        let rc = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), &raw mut event, 1, 0) };
        rc > 0
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An `eventfd` counter: one thread signals, another wakes from `poll`.
#[derive(Debug)]
pub(crate) struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A counter at zero, non-blocking.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: `eventfd` takes an initial value and flags and returns a
        // new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        Ok(Self { fd: owned(fd)? })
    }

    /// Makes the counter readable (wakes a `poll` on it).
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: the descriptor is open and `one` is 8 readable bytes, the
        // size an eventfd write takes. A full counter (EAGAIN) is already
        // readable, which is all a signal needs.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&raw const one).cast::<libc::c_void>(),
                size_of::<u64>(),
            )
        };
    }

    /// Resets the counter to zero (nothing to do if it is zero already).
    pub(crate) fn reset(&self) {
        let mut value: u64 = 0;
        // SAFETY: the descriptor is open and `value` has room for the 8
        // bytes an eventfd read writes; the descriptor is non-blocking, so
        // a zero counter returns EAGAIN at once.
        let _ = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&raw mut value).cast::<libc::c_void>(),
                size_of::<u64>(),
            )
        };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Which of the two descriptors [`wait_either`] found readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Readable {
    /// The first descriptor (the epoll set: a socket is ready).
    pub(crate) first: bool,
    /// The second (the eventfd: a signal).
    pub(crate) second: bool,
}

/// Waits until `first` or `second` is readable, or `timeout` (none: no
/// limit) passes; an interrupted wait returns with neither.
pub(crate) fn wait_either(
    first: &impl AsRawFd,
    second: &impl AsRawFd,
    timeout: Option<Duration>,
) -> Readable {
    let mut fds = [
        libc::pollfd {
            fd: first.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: second.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let millis = timeout.map_or(-1, |timeout| {
        // Rounded up, so a short timeout does not become a busy poll.
        let millis = timeout.as_nanos().div_ceil(1_000_000);
        libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: `fds` is a valid array of two initialised `pollfd`s that the
    // call may write (`revents`), and its length is passed with it.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, millis) };
    if rc <= 0 {
        return Readable {
            first: false,
            second: false,
        };
    }
    Readable {
        first: fds[0].revents != 0,
        second: fds[1].revents != 0,
    }
}

/// A new descriptor from a call that returned it or -1.
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    check(fd)?;
    // SAFETY: `fd` was just returned, open, by the system call, and nothing
    // else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The system call's result, or the error it set.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::readiness::tests::set_suite;
    use crate::socket::loopback_pair;

    #[test]
    fn waiting_ends_on_a_ready_socket_a_signal_or_the_timeout() {
        let (a, mut b) = loopback_pair();
        let epoll = Epoll::new().unwrap();
        epoll.add(a.as_raw_fd()).unwrap();
        let event = EventFd::new().unwrap();
        let none = Readable {
            first: false,
            second: false,
        };
        assert_eq!(
            wait_either(&epoll, &event, Some(Duration::from_millis(20))),
            none
        );
        event.signal();
        event.signal();
        let woken = wait_either(&epoll, &event, Some(Duration::from_secs(10)));
        assert_eq!((woken.first, woken.second), (false, true));
        event.reset();
        assert_eq!(
            wait_either(&epoll, &event, Some(Duration::from_millis(20))),
            none,
            "reset clears every signal"
        );
        event.reset();
        b.write_all(b"z").unwrap();
        let woken = wait_either(&epoll, &event, None);
        assert_eq!((woken.first, woken.second), (true, false));
    }

    set_suite!(Set);
}
