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
    /// Event counters since the start.
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
    }
}

impl fmt::Display for RuntimeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.metrics;
        write!(
            f,
            "{} {:?}: calls {} ok {} failed {} | served {} | pending {} jobs {} dedup {} | \
             late {} dup {} expired {} rejected {} | sent {} B recv {} B",
            self.rank,
            self.state,
            m.submitted,
            m.completed,
            m.failed,
            self.served,
            self.pending_calls,
            self.action_jobs,
            self.dedup_entries,
            m.late_results_discarded,
            m.duplicates_suppressed,
            m.deadline_expiries,
            m.protocol_rejections,
            self.handle.bytes_sent,
            self.driver.bytes_received,
        )
    }
}
