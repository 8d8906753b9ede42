//! `RuntimeStats`: counts and bytes, never payloads.

use std::fmt;

use dinah_core::{MetricsSnapshot, Rank, RuntimeState};

use super::Runtime;
use super::hub::Counters;
use crate::transport::{DriverCounts, HandleCounts};

/// A snapshot of what a runtime holds and has done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeStats {
    /// This rank.
    pub rank: Rank,
    /// The lifecycle state.
    pub state: RuntimeState,
    /// Event counters since the start. For the calls this rank issued,
    /// `submitted` counts them, and each ends exactly once as `completed`
    /// (a result), `failed` (an error from the peer or from this rank's
    /// job, the peer or the transport going down, or shutdown), a
    /// `deadline_expiries` (here, or decided by the target), or one of
    /// [`calls_abandoned`](Self::calls_abandoned); the rest are
    /// [`pending_calls`](Self::pending_calls) (see
    /// [`RuntimeStats::unsettled_calls`]). `duplicates_suppressed` counts
    /// requests from peers found in the dedup table.
    pub metrics: MetricsSnapshot,
    /// Calls waiting for an outcome.
    pub pending_calls: usize,
    /// Calls refused before they were issued (not counted as submitted):
    /// a full bound, a bad deadline, an unknown action or rank, a peer
    /// known to be down, a runtime that is not running.
    pub calls_refused: u64,
    /// Calls whose caller stopped waiting before an outcome arrived (the
    /// future was dropped or its scope ended).
    pub calls_abandoned: u64,
    /// Action jobs admitted to the domains and not finished.
    pub action_jobs: usize,
    /// Worker completions not yet handled.
    pub completions: usize,
    /// Cancellations queued for sending.
    pub queued_cancels: usize,
    /// Cancellations received from peers.
    pub cancels_received: u64,
    /// Best-effort cancellations that were dropped, by cause.
    pub cancels_dropped: CancelsDropped,
    /// The pacing of this rank's calls (see the runtime guide's "flow
    /// control" section).
    pub flow: FlowStats,
    /// The serving side: requests from peers.
    pub serve: ServeStats,
    /// The transport handle's counts.
    pub handle: HandleCounts,
    /// The transport driver's counts.
    pub driver: DriverCounts,
}

/// Best-effort cancellations that were dropped since the start, by cause.
/// None of them lets a call run twice; a dropped cancellation only lets a
/// call run (or finish) that its caller no longer waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelsDropped {
    /// This rank's queue of cancellations to send was full
    /// ([`RuntimeLimits::max_cancellations`](dinah_core::RuntimeLimits::max_cancellations)).
    pub queue_full: u64,
    /// The transport refused it for good: the peer was down or the
    /// transport closed.
    pub undeliverable: u64,
    /// A peer cancelled a request that had not arrived here yet, too far
    /// ahead of the peer's undelivered requests to be recorded.
    pub unrecorded: u64,
}

impl CancelsDropped {
    /// All causes together.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.queue_full + self.undeliverable + self.unrecorded
    }
}

/// How this rank's calls were paced: each keeps at most its share of a
/// target domain's admission capacity in flight, and the calls beyond it
/// wait here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowStats {
    /// Calls waiting for room now (part of
    /// [`RuntimeStats::pending_calls`]).
    pub waiting: usize,
    /// Calls that waited for room since the start.
    pub waited: u64,
    /// Calls refused at once because their lane was full and they asked
    /// to fail fast (part of [`RuntimeStats::calls_refused`]).
    pub refused_busy: u64,
    /// Calls that ended here while their target may still run them (a
    /// deadline, a dropped future), still counted against their lane
    /// until their late response arrives.
    pub owed: usize,
    /// Owed calls whose late response never came: they stopped counting
    /// when as long again as their deadline had passed.
    pub owed_expired: u64,
}

/// What the serving side (requests from peers) holds and has done.
///
/// Of the requests that arrived, each either ran once (`served`), or was
/// answered without running: as a duplicate of one found in the dedup
/// table (`metrics.duplicates_suppressed`), as a stale copy of one whose
/// entry is gone (`stale_refusals`), or refused by a bound
/// (`table_full_refusals`, `ahead_of_window_refusals`,
/// `queue_full_refusals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeStats {
    /// Requests admitted and run (inline) or queued on a worker.
    pub served: u64,
    /// Dedup entries (running and finished requests).
    pub dedup_entries: usize,
    /// Remote jobs admitted and not finished.
    pub running: usize,
    /// Requests that arrived again after their entry was gone: refused,
    /// never run again.
    pub stale_refusals: u64,
    /// Finished entries evicted before their TTL because the table was
    /// full; only their cached responses are lost.
    pub pressure_evictions: u64,
    /// New requests refused because every dedup entry was running.
    pub table_full_refusals: u64,
    /// New requests refused because they arrived too far ahead of their
    /// origin's undelivered ones.
    pub ahead_of_window_refusals: u64,
    /// Requests refused because their domain's queue was full.
    pub queue_full_refusals: u64,
    /// Request and cancel frames whose ID was not addressed to this rank.
    pub misaddressed: u64,
    /// Responses waiting for room in the transport.
    pub responses_waiting: usize,
    /// The most responses that can wait (fixed at start).
    pub outbox_capacity: usize,
    /// The most responses that waited at once.
    pub outbox_peak: usize,
    /// Waiting responses dropped because their caller's deadline had
    /// passed (the caller had already failed the call).
    pub responses_expired: u64,
    /// Bytes of cached and waiting responses.
    pub response_bytes: u64,
    /// Blocks allocated for pooled requests' jobs. The owner writes a job
    /// into the block of one that finished when it can, so in steady state
    /// this stops growing at about the most jobs in flight at once.
    pub job_blocks_allocated: u64,
    /// Pooled requests' jobs written into the block of a finished one.
    pub job_blocks_reused: u64,
}

impl RuntimeStats {
    /// Issued calls not accounted for by an ending or by
    /// [`pending_calls`](Self::pending_calls): zero whenever no call is
    /// being issued or settled at the moment of the reading (the
    /// counters are read one after another). A negative value means more
    /// endings than calls, which only such a moment can show.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
    /// use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
    /// use dinah_std::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};
    ///
    /// struct Double(u64);
    /// impl WireValue for Double {
    ///     const SCHEMA_ID: u64 = schema_id("doc.Double/1");
    ///     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
    ///         self.0.encode(out)
    ///     }
    ///     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
    ///         u64::decode(input).map(Double)
    ///     }
    /// }
    /// impl Action for Double {
    ///     const ID: u128 = 0xd0_0b1e;
    ///     type Output = u64;
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
    /// builder.register::<Double, _>(|Double(x)| Ok(2 * x))?;
    /// let hello = builder.hello()?;
    /// let network = SimNetwork::with_mode(WorldSize::ONE, 1, FaultPlan::new(), SimMode::Threaded)?;
    /// let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle)?;
    /// let mut runtime = builder.start(handle, driver)?;
    /// let client = runtime.client();
    ///
    /// assert_eq!(runtime.block_on(client.spawn_on(Rank::ZERO, Double(21)))?, 42);
    /// drop(client.spawn_on(Rank::ZERO, Double(1))); // the caller gives up
    /// let stats = runtime.stats();
    /// assert_eq!(stats.metrics.submitted, 2);
    /// assert_eq!(stats.calls_abandoned, 1);
    /// assert_eq!(stats.unsettled_calls(), 0);
    /// assert!(runtime.shutdown(Duration::from_secs(5))?.is_clean());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn unsettled_calls(&self) -> i128 {
        unsettled(&self.metrics, self.calls_abandoned, self.pending_calls)
    }
}

/// `submitted` minus every ending and the calls still pending.
pub(crate) fn unsettled(metrics: &MetricsSnapshot, abandoned: u64, pending: usize) -> i128 {
    i128::from(metrics.submitted)
        - i128::from(metrics.completed)
        - i128::from(metrics.failed)
        - i128::from(metrics.deadline_expiries)
        - i128::from(abandoned)
        - pending as i128
}

pub(crate) fn collect(runtime: &Runtime) -> RuntimeStats {
    let hub = &runtime.hub;
    let (serve, admit, respond) = runtime.server.counts();
    RuntimeStats {
        rank: hub.rank,
        state: hub.state.load(),
        metrics: runtime.metrics_now(),
        pending_calls: hub.calls.pending(),
        calls_refused: Counters::read(&hub.counters.calls_refused),
        calls_abandoned: Counters::read(&hub.counters.calls_abandoned),
        action_jobs: hub.domains.in_flight(),
        completions: hub.completions.len(),
        queued_cancels: hub.cancels.len(),
        cancels_received: Counters::read(&hub.counters.cancels_received),
        cancels_dropped: runtime.cancels_dropped(),
        flow: hub.calls.flow_stats(),
        serve: ServeStats {
            served: serve.served,
            dedup_entries: runtime.server.dedup_len(),
            running: runtime.server.running(),
            stale_refusals: admit.stale,
            pressure_evictions: admit.pressure_evictions,
            table_full_refusals: admit.table_full,
            ahead_of_window_refusals: admit.ahead_of_window,
            queue_full_refusals: serve.queue_full,
            misaddressed: serve.misaddressed,
            responses_waiting: runtime.server.waiting(),
            outbox_capacity: runtime.server.outbox_capacity(),
            outbox_peak: respond.outbox_peak,
            responses_expired: respond.expired,
            response_bytes: runtime.server.retained_bytes(),
            job_blocks_allocated: runtime.server.job_blocks().0,
            job_blocks_reused: runtime.server.job_blocks().1,
        },
        handle: hub.handle.counts(),
        driver: runtime.driver.counts(),
    }
}

impl fmt::Display for RuntimeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.metrics;
        write!(
            f,
            "{} {:?}: calls {} ok {} failed {} expired {} abandoned {} refused {} | served {} | \
             pending {} jobs {} dedup {} | late {} dup {} stale {} rejected {} | \
             sent {} B recv {} B strangers refused {}",
            self.rank,
            self.state,
            m.submitted,
            m.completed,
            m.failed,
            m.deadline_expiries,
            self.calls_abandoned,
            self.calls_refused,
            self.serve.served,
            self.pending_calls,
            self.action_jobs,
            self.serve.dedup_entries,
            m.late_results_discarded,
            m.duplicates_suppressed,
            self.serve.stale_refusals,
            m.protocol_rejections,
            self.handle.bytes_sent,
            self.driver.bytes_received,
            self.driver.refusals.total(),
        )
    }
}
