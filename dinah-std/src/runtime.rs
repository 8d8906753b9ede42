//! The long-lived runtime: typed remote actions with deadlines,
//! cancellation, at-most-once execution and a reported shutdown.
//!
//! ```
//! use std::time::Duration;
//! use dinah_core::{ProtocolLimits, RuntimeLimits, WorldSize};
//! use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
//! use dinah_std::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};
//!
//! struct Square(u64);
//! impl WireValue for Square {
//!     const SCHEMA_ID: u64 = schema_id("doc.Square/1");
//!     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> { self.0.encode(out) }
//!     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> { u64::decode(input).map(Square) }
//! }
//! impl Action for Square {
//!     const ID: u128 = 0x5157;
//!     type Output = u64;
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = Runtime::builder(7, ProtocolLimits::default(), RuntimeLimits::default())?;
//! builder.register::<Square, _>(|Square(n)| Ok(n * n))?;
//! let hello = builder.hello()?;
//! // One rank over the in-memory transport; TCP and MPI are used the same way.
//! let network = SimNetwork::with_mode(WorldSize::ONE, 1, FaultPlan::new(), SimMode::Threaded)?;
//! let (handle, driver) = network.endpoint(dinah_core::Rank::ZERO, hello.handle)?;
//! let mut runtime = builder.start(handle, driver)?;
//! let client = runtime.client();
//! let nine = runtime.block_on(client.spawn_on(dinah_core::Rank::ZERO, Square(3)))?;
//! assert_eq!(nine, 9);
//! let report = runtime.shutdown(Duration::from_secs(5))?;
//! assert!(report.is_clean());
//! # Ok(())
//! # }
//! ```

mod barrier;
mod builder;
mod caller;
mod client;
mod clock;
mod collective;
mod context;
mod error;
mod frames;
mod hub;
mod job;
mod job_outcome;
mod owner;
mod registry;
mod running;
mod serve;
mod stats;
mod thread;

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

pub use builder::{DEFAULT_DOMAIN, RuntimeBuilder};
pub use caller::{
    Backpressure, CallSet, CallSetFull, RemoteFuture, Scope, ScopedFuture, SpawnOptions,
};
pub(crate) use client::OwnerLink;
pub use client::RuntimeClient;
pub use clock::{SharedClock, StdClock};
pub use context::ActionContext;
pub use error::{BuildError, FailureKind, RuntimeError, Side};
pub use owner::{Progress, ShutdownReport, ShutdownTimeout};
pub use stats::{CancelsDropped, FlowStats, RuntimeStats, ServeStats};
pub use thread::{RuntimeThread, RuntimeThreadError};

use crate::transport::{TransportDriver, TransportEvent, Wakeup};
use caller::CallInfo;
use hub::{Counters, Hub};
use owner::OwnerCounts;
use serve::Server;

/// How long the owner spins before parking when idle: waking a parked
/// thread costs tens of microseconds on small machines, and the next event
/// is often that close.
const IDLE_SPIN: Duration = Duration::from_micros(50);

/// The longest the owner parks at once when idle, so deadlines and dedup
/// expiry are noticed even if nothing wakes it.
const MAX_IDLE: Duration = Duration::from_millis(10);

/// One rank's runtime: owns the transport driver and progresses every call
/// issued or served here.
///
/// Build it with [`Runtime::builder`], register actions, exchange the hello
/// through a transport, then [`start`](RuntimeBuilder::start) it. The thread
/// that starts it is its **owner**: the only thread that calls
/// [`progress`](Self::progress), [`block_on`](Self::block_on),
/// [`scope`](Self::scope) and [`shutdown`](Self::shutdown) (the type is not
/// `Send`, because an MPI driver must stay on its thread). Other threads
/// issue calls through a [`RuntimeClient`].
///
/// Correct programs end with [`shutdown`](Self::shutdown). Dropping a
/// running runtime never blocks indefinitely and never runs a collective:
/// it refuses new work, fails local waiters with `Cancelled`, asks running
/// handlers to stop and closes the transport with a short deadline.
pub struct Runtime {
    hub: Arc<Hub>,
    driver: Box<dyn TransportDriver>,
    /// The serving side: requests from peers.
    server: Server,
    /// Metrics the owner recorded this round, published at its end.
    counts: OwnerCounts,
    /// How frames from each rank are checked (indexed by rank; the
    /// channel is set per frame), built once: the limits are validated.
    contexts: Box<[dinah_core::wire::DecodeContext]>,
    events: Vec<TransportEvent>,
    expired: Vec<CallInfo>,
    /// Calls to this rank released from waiting, being submitted.
    released: Vec<caller::LocalRelease>,
    /// A cancellation taken from the queue that did not fit the control
    /// lane yet.
    cancel_retry: Option<(dinah_core::Rank, dinah_core::wire::Call)>,
    /// `block_on`'s waker. In an `Rc` (the runtime is not `Send` anyway)
    /// so each `block_on` takes it with a plain increment instead of the
    /// waker's atomic one.
    waker: Rc<Waker>,
    peers_drained: Vec<bool>,
    shutdown: Option<owner::ShutdownState>,
    /// Jobs a timed-out domain join left running, and the remote ones
    /// among them still in the dedup table when it was cleared.
    stuck: owner::Stuck,
    closed: bool,
}

/// Wakes the owner thread (used as the waker of `block_on` and of the
/// completion queue).
struct OwnerWaker(Wakeup);

impl Wake for OwnerWaker {
    fn wake(self: Arc<Self>) {
        self.0.wake();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake();
    }
}

impl Runtime {
    /// A builder for a runtime of run `run_id` with these limits.
    ///
    /// # Errors
    ///
    /// [`BuildError::Limits`] if a limit is invalid (it names the field).
    pub fn builder(
        run_id: u64,
        protocol_limits: dinah_core::ProtocolLimits,
        runtime_limits: dinah_core::RuntimeLimits,
    ) -> Result<RuntimeBuilder, BuildError> {
        RuntimeBuilder::new(run_id, protocol_limits, runtime_limits)
    }

    /// A client for issuing calls from any thread.
    pub fn client(&self) -> RuntimeClient {
        RuntimeClient {
            hub: Arc::clone(&self.hub),
        }
    }

    /// This rank.
    pub fn rank(&self) -> dinah_core::Rank {
        self.hub.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> dinah_core::WorldSize {
        self.hub.world
    }

    /// The lifecycle state.
    pub fn state(&self) -> dinah_core::RuntimeState {
        self.hub.state.load()
    }

    /// Drives `future` to completion on the owner thread: polls it, runs
    /// bounded [`progress`](Self::progress) between polls, and after a
    /// round that did nothing or finished what it found (see
    /// [`Progress::unfinished`]) waits on the transport (spinning first,
    /// then parking briefly) until anything arrives. Not a general async
    /// executor: it drives one future and this runtime.
    ///
    /// When the first poll finds the future pending, the frames already
    /// queued (the request of a call spawned just before) go to the
    /// transport at once, ahead of the first progress round. A future
    /// ready at its first poll returns without sending anything: a caller
    /// collecting the answers of many calls in flight spawns their
    /// successors in between, and those requests leave together in the
    /// next round.
    ///
    /// # Panics
    ///
    /// A panic inside `future` propagates to the caller (the runtime stays
    /// usable).
    pub fn block_on<F: Future>(&mut self, future: F) -> F::Output {
        let waker = Rc::clone(&self.waker);
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        self.send_queued();
        loop {
            let progress = self.progress();
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            // A round that finished what it found leaves nothing that the
            // wait would not see: it returns at once on an arrival, a
            // client's frame or a worker's completion, so a second round
            // would only find nothing (and, on a shared core, keep a
            // worker that was just handed a job from starting it).
            if !progress.did_work() || !progress.unfinished {
                self.idle();
            }
        }
    }

    /// Hands the transport the frames queued on the handle, if any (the
    /// sending part of a round alone).
    fn send_queued(&mut self) {
        if self.hub.handle.has_queued() {
            let now = self.hub.clock.now();
            let budget = self.hub.limits.max_progress_events as usize;
            self.flush(budget, now);
        }
    }

    /// Waits, progressing this rank, until every rank of the world has
    /// called `barrier`, or fails after `timeout`: see
    /// [`RuntimeClient::barrier`], which this drives with
    /// [`block_on`](Self::block_on).
    ///
    /// # Errors
    ///
    /// As [`RuntimeClient::barrier`].
    pub fn barrier(&mut self, timeout: Duration) -> Result<(), RuntimeError> {
        let client = self.client();
        self.block_on(client.barrier(timeout))
    }

    /// Gives every rank the value of rank `root`, progressing the runtime
    /// meanwhile: see [`RuntimeClient::broadcast`].
    ///
    /// # Errors
    ///
    /// As [`RuntimeClient::broadcast`].
    pub fn broadcast<T: crate::WireValue>(
        &mut self,
        root: dinah_core::Rank,
        value: Option<T>,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        let client = self.client();
        self.block_on(client.broadcast(root, value, timeout))
    }

    /// Combines every rank's value at rank `root`, progressing the runtime
    /// meanwhile: see [`RuntimeClient::reduce`].
    ///
    /// # Errors
    ///
    /// As [`RuntimeClient::reduce`].
    pub fn reduce<T: crate::WireValue>(
        &mut self,
        root: dinah_core::Rank,
        value: T,
        op: impl Fn(T, T) -> T,
        timeout: Duration,
    ) -> Result<Option<T>, RuntimeError> {
        let client = self.client();
        self.block_on(client.reduce(root, value, op, timeout))
    }

    /// Combines every rank's value and gives every rank the result,
    /// progressing the runtime meanwhile: see
    /// [`RuntimeClient::all_reduce`].
    ///
    /// # Errors
    ///
    /// As [`RuntimeClient::all_reduce`].
    pub fn all_reduce<T: crate::WireValue>(
        &mut self,
        value: T,
        op: impl Fn(T, T) -> T,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        let client = self.client();
        self.block_on(client.all_reduce(value, op, timeout))
    }

    /// Waits on the driver until something may have happened, at most until
    /// the next deadline (or [`MAX_IDLE`]).
    fn idle(&mut self) {
        let now = self.hub.clock.now();
        let next = [
            self.hub.calls.next_deadline(),
            self.server.next_expiry(),
            self.hub.barriers.deadline(),
            self.hub.collectives.deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = next.map_or(MAX_IDLE, |at| {
            at.saturating_duration_since(now).min(MAX_IDLE)
        });
        let running = self.hub.domains.in_flight() > 0;
        self.driver.set_workers_running(running);
        self.driver.idle_wait(IDLE_SPIN.min(timeout), timeout);
    }

    /// Counts and bytes held right now (never payloads).
    pub fn stats(&self) -> RuntimeStats {
        stats::collect(self)
    }

    /// The metrics as they will read once this round's counts are
    /// published (exact on the owner thread).
    fn metrics_now(&self) -> dinah_core::MetricsSnapshot {
        let mut counts = self.counts.clone();
        counts.add_served(&self.server.unpublished());
        counts.read(&self.hub.metrics)
    }

    /// Cancellations dropped so far, by cause.
    fn cancels_dropped(&self) -> CancelsDropped {
        let counters = &self.hub.counters;
        CancelsDropped {
            queue_full: Counters::read(&counters.cancels_queue_full),
            undeliverable: Counters::read(&counters.cancels_undeliverable),
            unrecorded: self.server.counts().0.cancels_unrecorded,
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.closed {
            owner::abandon(self);
        }
        // Clients may outlive the runtime and read its metrics.
        self.publish_counts();
    }
}
