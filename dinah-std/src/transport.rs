//! The transport contract: a cloneable handle plus an owner-thread driver.
//!
//! A transport (TCP, MPI, the in-memory [`memory`] network) is two parts:
//!
//! - a [`TransportHandle`], `Send + Sync` and cloneable, holding bounded
//!   per-lane send queues, byte budgets, peer status and the owner's
//!   [`Wakeup`]. Runtime clients on any thread queue frames on it;
//! - a [`TransportDriver`], an object-safe trait with **no `Send` bound**
//!   (OpenMPI's handles are not `Send`), owned and polled by the runtime's
//!   owner thread. `poll` never blocks; it moves queued frames toward peers
//!   and reports arrivals and failures as [`TransportEvent`]s.
//!
//! Two lanes ([`Channel`]) keep cancellations apart from action traffic:
//! TCP uses two connections per peer pair, MPI two tags, the in-memory
//! network two queues; a reader stalled by a full action lane never holds
//! up a cancel.
//!
//! A [`Frame`] is one `Vec<u8>` buffer or, for a large payload, a head
//! and segments held apart from it (each a [`Tail`]: bytes, or numbers of
//! one width) that the transports send and receive without joining them;
//! [`frame_buffers`] lets the runtime and the
//! transports reuse small buffers on the thread that frees them instead
//! of going through the allocator per frame.
//!
//! The runtime gives a transport what it needs through [`TransportHello`]
//! (from the runtime builder): the hello template with the registry
//! fingerprint and protocol limits, the handle's sizes and the admission
//! capacity this rank advertises. The transport records what each peer
//! advertises on the handle
//! ([`TransportHandle::peer_admission`]).

mod error;
mod event;
mod frame;
pub mod frame_buffers;
mod handle;
mod liveness;
pub mod memory;
mod refusal;
mod tail;
mod wakeup;

use std::time::Duration;

pub use dinah_core::wire::Channel;
use dinah_core::wire::{Hello, HelloError};
use dinah_core::{Fingerprint, ProtocolLimits, Rank, WorldSize};
pub use error::{DownReason, IoOp, SendErrorKind, TransportError, TrySendError};
pub use event::TransportEvent;
pub use frame::Frame;
pub use handle::{HandleConfig, HandleCounts, Outgoing, PeerStatus, TransportHandle};
pub use liveness::Liveness;
pub use refusal::{KEPT_REFUSALS, Refusal, RefusalCause, Refusals};
pub use tail::{Tail, TailNumber, TailWidth};
pub use wakeup::Wakeup;

/// Counts a driver holds beyond its handle: what a shutdown report needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverCounts {
    /// Frames taken from the handle and not yet completed (written, or
    /// their MPI request finished).
    pub in_flight_frames: u64,
    /// Bytes held by the driver: partially written frames, receive
    /// buffers, frames received and not yet handed to the runtime.
    pub retained_bytes: u64,
    /// Peers not yet drained (no goodbye received, not down).
    pub undrained_peers: u32,
    /// Frames received since the start.
    pub frames_received: u64,
    /// Bytes received since the start.
    pub bytes_received: u64,
    /// Connections refused since the start: strangers during set-up (bad
    /// hellos, another run, a failed proof of the run key, silence), with
    /// the first few, by transports that accept connections (TCP); none
    /// for the others. (The TCP driver also keeps the first 64 as typed
    /// errors: `TcpDriver::rejected`.)
    pub refusals: Refusals,
}

/// The owner-thread side of a transport.
///
/// Implementations never block in [`poll`](Self::poll) and never block
/// without a deadline anywhere; `Drop` releases resources without waiting
/// on peers (no MPI collective, no unbounded join).
pub trait TransportDriver {
    /// Makes progress without blocking: sends queued frames (control lane
    /// first), completes finished sends on the handle, and appends at most
    /// `budget` events (control-lane frames before action-lane frames).
    /// Returns whether anything happened.
    ///
    /// # Errors
    ///
    /// A failure of the transport as a whole (not of one peer: that is a
    /// [`TransportEvent::PeerDown`]).
    fn poll(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError>;

    /// Hands the frames queued on the handle since the last poll to the
    /// wire now, without receiving anything, and appends at most `budget`
    /// events (a frame that cannot be sent, as in `poll`). Returns whether
    /// anything was sent.
    ///
    /// The runtime calls it at the end of a round of progress that may
    /// have queued frames (responses of inline handlers, finished jobs,
    /// cancellations), so they leave in the same round instead of waiting
    /// for the next poll. The default does nothing: the next poll sends
    /// them.
    ///
    /// # Errors
    ///
    /// As for [`poll`](Self::poll).
    fn flush(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        let _ = (budget, events);
        Ok(false)
    }

    /// Blocks for at most `timeout` or until there may be something to
    /// poll. The default waits on the handle's [`Wakeup`], spinning for
    /// `spin` first; transports whose arrivals do not wake the owner (MPI)
    /// override it to return promptly.
    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        self.handle().wakeup().wait(spin, timeout);
    }

    /// Tells the driver, before an [`idle_wait`](Self::idle_wait), whether
    /// jobs admitted to the runtime's domains are running or queued on
    /// worker threads of this process. A driver that checks the network in
    /// a loop while it waits can check without yielding its core for a
    /// while when nothing else of the runtime needs a core, and yield
    /// between checks from the first one when a worker does (the job it
    /// runs may be what the owner waits for). The runtime calls it before
    /// each idle wait. The default ignores it.
    fn set_workers_running(&mut self, running: bool) {
        let _ = running;
    }

    /// The handle this driver serves.
    fn handle(&self) -> &TransportHandle;

    /// Starts a graceful shutdown: after the queued frames, say goodbye to
    /// every live peer (with the count of frames sent to it, so it knows
    /// when it has everything). Idempotent.
    fn begin_shutdown(&mut self);

    /// Has every peer said goodbye (or gone down) with all its announced
    /// frames received, and has every send completed?
    fn is_drained(&self) -> bool;

    /// What the driver holds right now.
    fn counts(&self) -> DriverCounts;

    /// Releases the transport: stops I/O threads, joining each for at most
    /// until `deadline` (a [`std::time::Instant`]); whatever is left is
    /// reported, never waited for.
    fn close(&mut self, deadline: std::time::Instant) -> DriverCounts;
}

/// What a transport needs from the runtime before it connects: the hello
/// every connection starts with (less the rank, world size and lane the
/// transport fills in), the sizes of the handle and the admission capacity
/// to advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportHello {
    /// Identifies the run; peers of another run are refused.
    pub run_id: u64,
    /// Bounds both sides must agree on.
    pub protocol_limits: ProtocolLimits,
    /// Digest of the registered actions.
    pub fingerprint: Fingerprint,
    /// Sizes of the handle's queues and byte budget, and the admission
    /// capacity the hello advertises
    /// ([`HandleConfig::admission_capacity`]).
    pub handle: HandleConfig,
}

impl TransportHello {
    /// The hello `rank` of `world` sends on `channel`, advertising
    /// [`HandleConfig::admission_capacity`] as its
    /// [`admission_capacity`](Hello::admission_capacity).
    ///
    /// # Errors
    ///
    /// As [`Hello::new`]: `rank` outside `world`, or invalid limits.
    pub fn hello(
        &self,
        rank: Rank,
        world: WorldSize,
        channel: Channel,
    ) -> Result<Hello, HelloError> {
        Hello::new(
            u128::from(self.run_id),
            rank,
            world,
            self.protocol_limits,
            self.fingerprint,
            channel,
        )
        .map(|hello| hello.with_admission_capacity(self.handle.admission_capacity))
    }
}
