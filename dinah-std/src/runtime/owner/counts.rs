//! The owner thread's metrics, added to the shared counters once a round.
//!
//! Most of a runtime's events happen on its owner thread: frames received,
//! results completed, duplicates suppressed, responses and cancellations
//! sent. Recording each into the shared [`RuntimeMetrics`] was one atomic
//! read-modify-write per event, several per action, each of which makes
//! the core wait for its earlier writes to reach the cache (a frame just
//! encoded, for one). The owner counts them here in plain integers instead
//! and adds them to the shared counters at the end of each
//! [`Runtime::progress`](crate::Runtime::progress) round, one update per
//! counter that changed. Other threads therefore see the owner's counts
//! when its round ends; the owner's own readings
//! ([`Runtime::stats`](crate::Runtime::stats), the shutdown report) add
//! what is not yet published, so they are exact.
//!
//! The serving side counts its own events (duplicates, responses sent,
//! acknowledged cancellations); the owner adds them here before each
//! publish.

use dinah_core::{MetricsSnapshot, RuntimeMetrics};

use crate::runtime::serve::ServeMetrics;

/// Counts recorded on the owner thread and not yet added to the shared
/// metrics.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnerCounts {
    pending: MetricsSnapshot,
    /// Whether anything was counted since the last publish (most rounds
    /// with one call in flight count nothing, and are told by one load).
    dirty: bool,
}

impl OwnerCounts {
    /// Adds `n` to `field`, saturating like the shared counters.
    fn bump(dirty: &mut bool, field: &mut u64, n: u64) {
        *field = field.saturating_add(n);
        *dirty = true;
    }

    pub(crate) fn completed(&mut self) {
        Self::bump(&mut self.dirty, &mut self.pending.completed, 1);
    }

    pub(crate) fn failed(&mut self) {
        self.failed_calls(1);
    }

    /// `n` calls failed at once (a peer went down, the transport closed,
    /// shutdown cancelled what was waiting).
    pub(crate) fn failed_calls(&mut self, n: usize) {
        if n > 0 {
            Self::bump(&mut self.dirty, &mut self.pending.failed, n as u64);
        }
    }

    pub(crate) fn late_result_discarded(&mut self) {
        Self::bump(&mut self.dirty, &mut self.pending.late_results_discarded, 1);
    }

    /// Adds what the serving side counted since the last time.
    pub(crate) fn add_served(&mut self, served: &ServeMetrics) {
        if *served != ServeMetrics::default() {
            let pending = &mut self.pending;
            Self::bump(
                &mut self.dirty,
                &mut pending.duplicates_suppressed,
                served.duplicates,
            );
            Self::bump(&mut self.dirty, &mut pending.bytes_sent, served.bytes_sent);
            Self::bump(
                &mut self.dirty,
                &mut pending.cancellation_acknowledged,
                served.cancellations_acknowledged,
            );
        }
    }

    pub(crate) fn deadline_expiry(&mut self) {
        Self::bump(&mut self.dirty, &mut self.pending.deadline_expiries, 1);
    }

    pub(crate) fn protocol_rejection(&mut self) {
        Self::bump(&mut self.dirty, &mut self.pending.protocol_rejections, 1);
    }

    pub(crate) fn bytes_sent(&mut self, n: u64) {
        Self::bump(&mut self.dirty, &mut self.pending.bytes_sent, n);
    }

    pub(crate) fn bytes_received(&mut self, n: u64) {
        Self::bump(&mut self.dirty, &mut self.pending.bytes_received, n);
    }

    /// Adds the pending counts to `metrics` and starts again from zero.
    pub(crate) fn publish(&mut self, metrics: &RuntimeMetrics) {
        if self.dirty {
            metrics.add(&self.pending);
            self.pending = MetricsSnapshot::default();
            self.dirty = false;
        }
    }

    /// `metrics` as they will read once the pending counts are published.
    ///
    /// Off the hot path (statistics, the shutdown report): the sum is made
    /// by the counters' own saturating addition, on a scratch copy.
    pub(crate) fn read(&self, metrics: &RuntimeMetrics) -> MetricsSnapshot {
        let sum = RuntimeMetrics::new();
        sum.add(&metrics.snapshot());
        sum.add(&self.pending);
        sum.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reach_the_shared_metrics_when_published_and_reads_include_them_before() {
        let metrics = RuntimeMetrics::new();
        metrics.record_completed();
        let mut counts = OwnerCounts::default();
        counts.completed();
        counts.bytes_received(80);
        counts.bytes_sent(90);
        counts.add_served(&ServeMetrics {
            duplicates: 1,
            bytes_sent: 0,
            cancellations_acknowledged: 1,
        });
        counts.protocol_rejection();
        counts.failed();
        counts.late_result_discarded();
        counts.deadline_expiry();
        assert_eq!(metrics.snapshot().completed, 1, "not published yet");
        let read = counts.read(&metrics);
        assert_eq!(read.completed, 2, "but the owner's reading has it");
        counts.publish(&metrics);
        let published = metrics.snapshot();
        assert_eq!(published, read, "publishing lands exactly what was read");
        assert_eq!((published.bytes_received, published.bytes_sent), (80, 90));
        counts.publish(&metrics);
        assert_eq!(metrics.snapshot(), published, "published once");
        assert_eq!(counts.read(&metrics), published);
    }
}
