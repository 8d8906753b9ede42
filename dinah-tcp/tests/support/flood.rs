//! A flood of strangers' connections, from a thread of the test.
//!
//! Each stranger connects and then does one of five things, in turn:
//! stays silent, sends an HTTP request and closes, closes at once, sends
//! the first bytes of something that looks like a hello and stays, or
//! announces a 4 GiB message and stays. Those that stay are held open
//! until [`HELD_AT_ONCE`] newer ones stay too, then closed: the listener
//! sees thousands of connections without the test running out of file
//! descriptors. A flood ends after its number of connections, when told
//! to stop, or after [`FLOOD_LIMIT`].
#![allow(
    dead_code,
    reason = "each test file uses the part of the harness it needs"
)]

use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dinah_core::wire::{MAGIC, PROTOCOL_VERSION};

/// The most strangers' connections held open at once.
pub(crate) const HELD_AT_ONCE: usize = 256;

/// The longest a flood runs.
pub(crate) const FLOOD_LIMIT: Duration = Duration::from_secs(60);

/// How long one stranger's connect may take (a full backlog drops the
/// handshake; the stranger then counts as failed).
const CONNECT_LIMIT: Duration = Duration::from_millis(200);

/// What a flood did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FloodReport {
    /// Connections tried.
    pub(crate) attempted: u64,
    /// Connections made.
    pub(crate) connected: u64,
}

/// A running flood.
pub(crate) struct Flood {
    stop: Arc<AtomicBool>,
    attempted: Arc<AtomicU64>,
    thread: JoinHandle<FloodReport>,
}

impl Flood {
    /// Starts `total` strangers' connections to `targets`, in turn.
    pub(crate) fn start(targets: Vec<SocketAddr>, total: u64) -> Self {
        assert!(!targets.is_empty());
        let stop = Arc::new(AtomicBool::new(false));
        let attempted = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, attempted) = (Arc::clone(&stop), Arc::clone(&attempted));
            thread::spawn(move || run(&targets, total, &stop, &attempted))
        };
        Self {
            stop,
            attempted,
            thread,
        }
    }

    /// Waits until `n` connections were tried (or the flood ended);
    /// returns whether they were.
    pub(crate) fn wait_for(&self, n: u64) -> bool {
        let until = Instant::now() + FLOOD_LIMIT;
        while self.attempted.load(Ordering::Relaxed) < n {
            if self.thread.is_finished() || Instant::now() >= until {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Waits for the flood to send all its connections.
    pub(crate) fn finish(self) -> FloodReport {
        self.thread.join().expect("the flood thread does not panic")
    }

    /// Stops the flood now.
    pub(crate) fn stop(self) -> FloodReport {
        self.stop.store(true, Ordering::Relaxed);
        self.finish()
    }
}

fn run(
    targets: &[SocketAddr],
    total: u64,
    stop: &AtomicBool,
    attempted: &AtomicU64,
) -> FloodReport {
    let until = Instant::now() + FLOOD_LIMIT;
    let mut held = VecDeque::with_capacity(HELD_AT_ONCE);
    let mut report = FloodReport::default();
    for i in 0..total {
        if stop.load(Ordering::Relaxed) || Instant::now() >= until {
            break;
        }
        let target = targets[i as usize % targets.len()];
        report.attempted += 1;
        attempted.store(report.attempted, Ordering::Relaxed);
        let Ok(mut stream) = TcpStream::connect_timeout(&target, CONNECT_LIMIT) else {
            continue;
        };
        report.connected += 1;
        let stays = match i % 5 {
            0 => true,
            1 => {
                let _ = stream.write_all(b"GET / HTTP/1.1\r\nHost: dinah\r\n\r\n");
                false
            }
            2 => false,
            3 => {
                // The first bytes of a hello (magic and version), then
                // nothing.
                let _ = stream.write_all(&MAGIC);
                let _ = stream.write_all(&PROTOCOL_VERSION.to_le_bytes());
                true
            }
            _ => {
                // A length prefix of 4 GiB, then nothing.
                let _ = stream.write_all(&u32::MAX.to_le_bytes());
                true
            }
        };
        if stays {
            if held.len() == HELD_AT_ONCE {
                held.pop_front();
            }
            held.push_back(stream);
        }
    }
    report
}
