//! The bounded hand-over from a connection's reader thread to the owner.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::thread::{self, Thread};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use dinah_std::transport::{DownReason, TransportError, Wakeup};

/// How long a reader waiting for room sleeps before it looks again even
/// without being unparked (a backstop; the owner unparks it).
const ROOM_RECHECK: Duration = Duration::from_millis(50);

/// What a reader hands the owner, in stream order.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A complete, validated frame (header, length table, segments).
    Frame(Vec<u8>),
    /// The peer's goodbye arrived, and exactly the frames it announced
    /// arrived before it.
    Goodbye,
    /// The stream ended; the reader has stopped.
    End(End),
}

/// How a connection's stream ended.
#[derive(Debug)]
pub(crate) enum End {
    /// End of stream after the goodbye: the peer closed its side cleanly.
    Clean,
    /// The connection failed, or ended without a goodbye.
    Down {
        /// Why the peer is down.
        reason: DownReason,
        /// The error every waiter on the peer receives.
        error: TransportError,
    },
}

impl Inbound {
    fn len(&self) -> u64 {
        match self {
            Self::Frame(bytes) => bytes.len() as u64,
            Self::Goodbye | Self::End(_) => 0,
        }
    }
}

/// A bounded single-producer, single-consumer queue of [`Inbound`] items
/// with a byte budget: the reader thread pushes, the owner thread pops.
///
/// A reader that finds no room parks until the owner takes something (or
/// the inbox is closed), and while it waits it reads nothing more from its
/// socket, so TCP flow control pushes back on the peer instead of memory
/// growing here.
///
/// # Memory ordering
///
/// Items travel through `ArrayQueue`, which synchronises their contents.
/// `bytes` is only increased by the reader and decreased by the owner
/// (`AcqRel`), so the reader's admission check cannot overshoot. The
/// waiting handshake is Dekker-style: the reader stores `reader_waiting`
/// then checks for room, the owner pops then loads `reader_waiting`, each
/// with a `SeqCst` fence between, so at least one of them sees the
/// other's write and a pop never misses a parked reader (a timed park
/// backs this up). `closed` is stored `Release` and loaded `Acquire`.
/// `assembling` is a statistic (`Relaxed`).
pub(crate) struct Inbox {
    queue: ArrayQueue<Inbound>,
    bytes: AtomicU64,
    budget: u64,
    assembling: AtomicU64,
    closed: AtomicBool,
    reader_waiting: AtomicBool,
    reader: OnceLock<Thread>,
    wakeup: Wakeup,
}

impl Inbox {
    /// An inbox holding at most `frames` items and `budget` bytes (one
    /// frame of any size is admitted into an empty inbox), waking `wakeup`
    /// when the reader waits for room.
    pub(crate) fn new(frames: usize, budget: u64, wakeup: Wakeup) -> Self {
        Self {
            // One extra slot, so the end marker always fits behind a full
            // load of frames.
            queue: ArrayQueue::new(frames.saturating_add(1)),
            bytes: AtomicU64::new(0),
            budget,
            assembling: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            reader_waiting: AtomicBool::new(false),
            reader: OnceLock::new(),
            wakeup,
        }
    }

    /// Reader side: registers the calling thread as the one to unpark.
    pub(crate) fn bind_reader(&self) {
        let _ = self.reader.set(thread::current());
    }

    /// Reader side: pushes `item`, waiting while there is no room. Returns
    /// `false` (dropping the item) if the inbox was closed.
    pub(crate) fn push(&self, item: Inbound) -> bool {
        let len = item.len();
        let mut item = item;
        loop {
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            if self.has_room(&item, len) {
                match self.queue.push(item) {
                    Ok(()) => {
                        self.bytes.fetch_add(len, Ordering::AcqRel);
                        return true;
                    }
                    Err(back) => item = back,
                }
            }
            self.reader_waiting.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if !self.closed.load(Ordering::Acquire) && !self.has_room(&item, len) {
                // Whatever is queued must be taken before there is room.
                self.wakeup.wake();
                thread::park_timeout(ROOM_RECHECK);
            }
            self.reader_waiting.store(false, Ordering::Relaxed);
        }
    }

    fn has_room(&self, item: &Inbound, len: u64) -> bool {
        let frames_left = self.queue.len() + 1 < self.queue.capacity();
        match item {
            // The end marker uses the reserved slot.
            Inbound::End(_) => !self.queue.is_full(),
            _ => {
                let bytes = self.bytes.load(Ordering::Acquire);
                frames_left && (bytes == 0 || bytes.saturating_add(len) <= self.budget)
            }
        }
    }

    /// Owner side: takes the oldest item, unparking a reader that waits
    /// for room.
    pub(crate) fn pop(&self) -> Option<Inbound> {
        let item = self.queue.pop()?;
        self.bytes.fetch_sub(item.len(), Ordering::AcqRel);
        fence(Ordering::SeqCst);
        if self.reader_waiting.load(Ordering::Relaxed) {
            if let Some(reader) = self.reader.get() {
                reader.unpark();
            }
        }
        Some(item)
    }

    /// Owner side: refuses further pushes and releases a waiting reader.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(reader) = self.reader.get() {
            reader.unpark();
        }
    }

    /// Reader side: the bytes of the frame being assembled.
    pub(crate) fn set_assembling(&self, bytes: u64) {
        self.assembling.store(bytes, Ordering::Relaxed);
    }

    /// Bytes held: queued frames plus the frame being assembled.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire) + self.assembling.load(Ordering::Relaxed)
    }

    /// The owner's wakeup.
    pub(crate) fn wakeup(&self) -> &Wakeup {
        &self.wakeup
    }
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("items", &self.queue.len())
            .field("retained_bytes", &self.retained_bytes())
            .field("closed", &self.closed.load(Ordering::Acquire))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn frames_and_bytes_are_bounded_and_the_end_always_fits() {
        let inbox = Inbox::new(2, 10, Wakeup::new());
        assert!(inbox.push(Inbound::Frame(vec![0; 4])));
        assert!(inbox.push(Inbound::Frame(vec![0; 6])));
        assert_eq!(inbox.retained_bytes(), 10);
        // Full on both counts; the end marker still fits.
        assert!(!inbox.has_room(&Inbound::Frame(vec![0]), 1));
        let end = Inbound::End(End::Clean);
        assert!(inbox.has_room(&end, 0));
        assert!(inbox.push(end));
        assert!(matches!(inbox.pop(), Some(Inbound::Frame(f)) if f.len() == 4));
        assert!(matches!(inbox.pop(), Some(Inbound::Frame(f)) if f.len() == 6));
        assert!(matches!(inbox.pop(), Some(Inbound::End(End::Clean))));
        assert!(inbox.pop().is_none());
        assert_eq!(inbox.retained_bytes(), 0);
    }

    #[test]
    fn an_oversized_frame_enters_an_empty_inbox() {
        let inbox = Inbox::new(4, 10, Wakeup::new());
        assert!(inbox.push(Inbound::Frame(vec![0; 100])));
        assert!(!inbox.has_room(&Inbound::Frame(vec![0]), 1));
    }

    #[test]
    fn a_full_reader_waits_until_the_owner_takes_something() {
        let inbox = Arc::new(Inbox::new(1, 1 << 20, Wakeup::new()));
        assert!(inbox.push(Inbound::Frame(vec![1])));
        let reader = {
            let inbox = Arc::clone(&inbox);
            thread::spawn(move || {
                inbox.bind_reader();
                inbox.push(Inbound::Frame(vec![2]))
            })
        };
        // Whenever the owner pops, the waiting reader gets its turn.
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match inbox.pop() {
                Some(Inbound::Frame(bytes)) => seen.push(bytes[0]),
                Some(other) => panic!("{other:?}"),
                None => thread::yield_now(),
            }
        }
        assert!(reader.join().unwrap());
        assert_eq!(seen, [1, 2]);
    }

    #[test]
    fn closing_releases_a_waiting_reader() {
        let inbox = Arc::new(Inbox::new(1, 1 << 20, Wakeup::new()));
        assert!(inbox.push(Inbound::Frame(vec![1])));
        let reader = {
            let inbox = Arc::clone(&inbox);
            thread::spawn(move || {
                inbox.bind_reader();
                inbox.push(Inbound::Frame(vec![2]))
            })
        };
        inbox.close();
        assert!(!reader.join().unwrap(), "a closed inbox refuses");
    }
}
