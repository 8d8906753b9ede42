//! Waking the owner thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Wakes the runtime's owner thread when something it must handle arrives:
/// a frame from a transport I/O thread, a worker completion, a client's
/// request from another thread.
///
/// The owner binds itself once ([`Wakeup::bind_current`]); anyone holding a
/// clone may call [`Wakeup::wake`]. A wake before the owner waits is not
/// lost: it is remembered and the next [`Wakeup::wait`] returns at once.
///
/// # Memory ordering
///
/// `notified` is set with `Release` by wakers and consumed with `Acquire`
/// (a swap) by the owner, so whatever a waker wrote before waking (a frame
/// pushed into a queue) is visible to the owner after `wait` returns.
#[derive(Clone, Debug, Default)]
pub struct Wakeup {
    inner: Arc<WakeupInner>,
}

#[derive(Debug, Default)]
struct WakeupInner {
    owner: OnceLock<Thread>,
    notified: AtomicBool,
}

impl Wakeup {
    /// A wakeup with no owner bound yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds the calling thread as the owner. Returns `false` (and changes
    /// nothing) if another thread was bound before.
    pub fn bind_current(&self) -> bool {
        let me = thread::current();
        let bound = self.inner.owner.get_or_init(|| me.clone());
        bound.id() == me.id()
    }

    /// Marks the owner as notified and unparks it if it is bound.
    pub fn wake(&self) {
        if !self.inner.notified.swap(true, Ordering::Release) {
            if let Some(owner) = self.inner.owner.get() {
                owner.unpark();
            }
        }
    }

    /// Consumes a pending notification without waiting.
    pub fn take(&self) -> bool {
        self.inner.notified.swap(false, Ordering::Acquire)
    }

    /// Waits until woken or `timeout` passes: spins for up to `spin` first
    /// (a wake-up across cores costs tens of microseconds on small VMs; a
    /// brief spin catches events that are about to arrive), then parks.
    /// Returns whether a notification was consumed.
    pub fn wait(&self, spin: Duration, timeout: Duration) -> bool {
        if self.take() {
            return true;
        }
        let start = Instant::now();
        let spin = spin.min(timeout);
        while start.elapsed() < spin {
            if self.take() {
                return true;
            }
            // Yield rather than spin on the core: the thread that will wake
            // us (a reader, a worker, the peer's owner) may need this core.
            thread::yield_now();
        }
        let left = timeout.saturating_sub(start.elapsed());
        if !left.is_zero() {
            thread::park_timeout(left);
        }
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_before_the_wait_is_remembered() {
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        wakeup.wake();
        assert!(wakeup.wait(Duration::ZERO, Duration::from_secs(60)));
        assert!(!wakeup.take());
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_wait() {
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let remote = wakeup.clone();
        let waker = thread::spawn(move || remote.wake());
        // Waits until the wake lands (an hour is only a backstop).
        while !wakeup.wait(Duration::ZERO, Duration::from_secs(3600)) {}
        waker.join().unwrap();
    }

    #[test]
    fn only_one_owner_binds() {
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let other = wakeup.clone();
        assert!(!thread::spawn(move || other.bind_current()).join().unwrap());
        assert!(wakeup.bind_current());
    }
}
