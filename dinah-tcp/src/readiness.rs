//! A level-triggered readiness set over every connection's socket: the
//! owner asks it, without blocking, whether any socket is readable (data,
//! its end, or an error), and the watcher thread (`watch.rs`) waits on it
//! until one is, or until it is interrupted.
//!
//! Two backends share this interface: on Linux and Android, `epoll.rs`,
//! hand-written on `epoll` and an `eventfd`, where the owner's look is one
//! `epoll_wait` system call; everywhere else (and on Linux with the
//! `portable-poller` feature), `portable.rs`, on the `polling` crate,
//! whose look costs several system calls on Linux (it re-arms a timer and
//! a notifier on every wait). `docs/tcp.md` has what the difference costs.
//! Both run the same tests on Linux.

#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    any(not(feature = "portable-poller"), test)
))]
mod epoll;
#[cfg(any(
    not(any(target_os = "linux", target_os = "android")),
    feature = "portable-poller",
    test
))]
mod portable;

#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    not(feature = "portable-poller")
))]
pub(crate) use epoll::{Entry, Set};
#[cfg(any(
    not(any(target_os = "linux", target_os = "android")),
    feature = "portable-poller"
))]
pub(crate) use portable::{Entry, Set};

#[cfg(test)]
pub(crate) mod tests {
    /// The tests every backend's `Set` passes.
    macro_rules! set_suite {
        ($set:ty) => {
            #[test]
            fn the_set_is_ready_while_a_socket_holds_data_or_its_end() {
                use std::io::{Read, Write};
                let (mut a, mut b) = crate::socket::loopback_pair();
                let (c, _d) = crate::socket::loopback_pair();
                let set = <$set>::new().unwrap();
                let entry_a = set.add(&a).unwrap();
                let _entry_c = set.add(&c).unwrap();
                assert!(!set.any_ready(), "quiet sockets");
                b.write_all(b"xy").unwrap();
                let start = std::time::Instant::now();
                while !set.any_ready() {
                    assert!(start.elapsed() < std::time::Duration::from_secs(10));
                }
                // Level-triggered: still ready until the data is read.
                assert!(set.any_ready());
                let mut buf = [0u8; 2];
                a.read_exact(&mut buf).unwrap();
                assert!(!set.any_ready(), "read empty again");
                // The peer's end makes the socket ready; removing it
                // quiets the set.
                b.shutdown(std::net::Shutdown::Write).unwrap();
                let start = std::time::Instant::now();
                while !set.any_ready() {
                    assert!(start.elapsed() < std::time::Duration::from_secs(10));
                }
                set.remove(entry_a);
                assert!(!set.any_ready());
            }

            #[test]
            fn a_wait_ends_on_a_ready_socket_or_an_interruption() {
                use std::io::Write;
                let (a, mut b) = crate::socket::loopback_pair();
                let set = std::sync::Arc::new(<$set>::new().unwrap());
                let _entry = set.add(&a).unwrap();
                set.interrupt();
                assert!(!set.wait(), "interrupted, nothing ready");
                // The owner looks while the watcher waits: the look is
                // answered at once.
                let waiter = {
                    let set = std::sync::Arc::clone(&set);
                    std::thread::spawn(move || set.wait())
                };
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert!(!set.any_ready());
                b.write_all(b"z").unwrap();
                assert!(waiter.join().unwrap(), "woken by the socket");
                assert!(set.any_ready());
                assert!(set.wait(), "still ready: level-triggered");
            }
        };
    }

    pub(crate) use set_suite;
}
