//! `RuntimeStats`: counts and bytes, never payloads.

use std::fmt;
use std::sync::atomic::Ordering;

use dinah_core::{MetricsSnapshot, Rank, RuntimeState};

use super::Runtime;
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
    /// `deadline_expiries`, or one of [`calls_abandoned`](Self::calls_abandoned);
    /// the rest are [`pending_calls`](Self::pending_calls) (see
    /// [`RuntimeStats::unsettled_calls`]).
    pub metrics: MetricsSnapshot,
    /// Calls waiting for an outcome.
    pub pending_calls: usize,
    /// Action jobs admitted to the domains and not finished.
    pub action_jobs: usize,
    /// Dedup entries (running, completed, cancelled).
    pub dedup_entries: usize,
    /// Remote jobs running.
    pub running_remote: usize,
    /// Requests from peers admitted for execution since the start.
    pub served: u64,
    /// Finished dedup entries evicted before their TTL because the table
    /// was full (each raised its origin's refusal watermark).
    pub dedup_pressure_evictions: u64,
    /// Worker completions not yet handled.
    pub completions: usize,
    /// Cancellations queued for sending.
    pub queued_cancels: usize,
    /// Responses waiting for room in the transport.
    pub queued_responses: usize,
    /// Bytes of retained responses and queued responses.
    pub retained_response_bytes: u64,
    /// The transport handle's counts.
    pub handle: HandleCounts,
    /// The transport driver's counts.
    pub driver: DriverCounts,
    /// Cancellations dropped because their queue was full.
    pub cancels_dropped: u64,
    /// Cancellations received from peers.
    pub cancels_received: u64,
    /// Responses dropped because the outbox was full.
    pub responses_dropped: u64,
    /// Calls whose caller stopped waiting before an outcome arrived (the
    /// future was dropped or its scope ended).
    pub calls_abandoned: u64,
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
    let shared = &runtime.shared;
    RuntimeStats {
        rank: shared.rank,
        state: shared.state.load(),
        metrics: runtime.receiver.counts.read(&shared.metrics),
        pending_calls: shared.calls.pending(),
        action_jobs: shared.domains.in_flight(),
        dedup_entries: runtime.receiver.dedup_len(),
        running_remote: runtime.receiver.running(),
        served: runtime.receiver.served(),
        dedup_pressure_evictions: runtime.receiver.pressure_evictions(),
        completions: shared.completions.len(),
        queued_cancels: shared.cancels.len(),
        queued_responses: runtime.receiver.outbox_len(),
        retained_response_bytes: runtime.receiver.retained_bytes(),
        handle: shared.handle.counts(),
        driver: runtime.driver.counts(),
        cancels_dropped: shared.counters.cancels_dropped.load(Ordering::Relaxed),
        cancels_received: shared.counters.cancels_received.load(Ordering::Relaxed),
        responses_dropped: shared.counters.responses_dropped.load(Ordering::Relaxed),
        calls_abandoned: shared.counters.calls_abandoned.load(Ordering::Relaxed),
    }
}

impl fmt::Display for RuntimeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.metrics;
        write!(
            f,
            "{} {:?}: calls {} ok {} failed {} expired {} abandoned {} | served {} | \
             pending {} jobs {} dedup {} | late {} dup {} rejected {} | sent {} B recv {} B",
            self.rank,
            self.state,
            m.submitted,
            m.completed,
            m.failed,
            m.deadline_expiries,
            self.calls_abandoned,
            self.served,
            self.pending_calls,
            self.action_jobs,
            self.dedup_entries,
            m.late_results_discarded,
            m.duplicates_suppressed,
            m.protocol_rejections,
            self.handle.bytes_sent,
            self.driver.bytes_received,
        )
    }
}
