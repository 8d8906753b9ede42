//! Opt-in runtime statistics: [`RuntimeMetrics`], saturating event
//! counters, and [`MetricsSnapshot`], one plain reading of them.

use core::fmt;

use crate::sync::{AtomicU64, Ordering};

/// Opt-in runtime statistics: saturating counters of runtime events.
///
/// Counts task lifecycle events, protocol events and bytes moved. Nothing
/// records into it implicitly: the code that observes an event calls the
/// matching `record_*` method, once per event, and the counters change in
/// no other way. A cancellation *request* and its *acknowledgement* are
/// separate counters because they are separate events (many requests are
/// never acknowledged: the work had already finished). Usable from a
/// `static` (the constructor is `const`).
///
/// Every counter stops at `u64::MAX` instead of wrapping, so a reading is a
/// lower bound of the true count, never a small number after an overflow.
///
/// # Memory ordering
///
/// All accesses are `Relaxed`. The counters are statistics: they establish
/// no happens-before relation and must never be used to decide whether
/// other data is ready. Each counter on its own is exact (no increment is
/// lost, and a thread never sees a counter go backwards), but
/// [`snapshot`](Self::snapshot) reads the counters one after another, so
/// under concurrent updates it is not one instant: it may, for example, show
/// a task as `completed` whose `started` increment it missed. Snapshots
/// taken when the recording threads are quiescent (joined, or synchronised
/// with the reader by other means) are exact.
///
/// # Examples
///
/// ```
/// use dinah_core::{MetricsSnapshot, RuntimeMetrics};
///
/// static METRICS: RuntimeMetrics = RuntimeMetrics::new();
/// METRICS.record_submitted();
/// METRICS.record_started();
/// METRICS.record_completed();
/// METRICS.record_bytes_sent(64);
///
/// let snapshot = METRICS.snapshot();
/// assert_eq!(snapshot.completed, 1);
/// assert_eq!(snapshot.bytes_sent, 64);
/// assert_eq!(snapshot.since(&MetricsSnapshot::default()), snapshot);
/// ```
pub struct RuntimeMetrics {
    submitted: AtomicU64,
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    cancellation_requested: AtomicU64,
    cancellation_acknowledged: AtomicU64,
    late_results_discarded: AtomicU64,
    duplicates_suppressed: AtomicU64,
    deadline_expiries: AtomicU64,
    protocol_rejections: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
}

/// Adds `n` to `counter`, stopping at `u64::MAX`.
///
/// A compare-exchange loop (a plain `fetch_add` would wrap). Once the
/// counter is saturated it returns after one load.
#[inline]
fn saturating_add(counter: &AtomicU64, n: u64) {
    let mut current = counter.load(Ordering::Relaxed);
    loop {
        let next = current.saturating_add(n);
        if next == current {
            return;
        }
        match counter.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

macro_rules! metrics_new {
    () => {
        Self {
            submitted: AtomicU64::new(0),
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancellation_requested: AtomicU64::new(0),
            cancellation_acknowledged: AtomicU64::new(0),
            late_results_discarded: AtomicU64::new(0),
            duplicates_suppressed: AtomicU64::new(0),
            deadline_expiries: AtomicU64::new(0),
            protocol_rejections: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
        }
    };
}

impl RuntimeMetrics {
    /// All counters at zero.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn new() -> Self {
        metrics_new!()
    }

    /// All counters at zero.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn new() -> Self {
        metrics_new!()
    }

    /// A task was accepted for execution.
    #[inline]
    pub fn record_submitted(&self) {
        saturating_add(&self.submitted, 1);
    }

    /// A task started running.
    #[inline]
    pub fn record_started(&self) {
        saturating_add(&self.started, 1);
    }

    /// A task returned successfully.
    #[inline]
    pub fn record_completed(&self) {
        saturating_add(&self.completed, 1);
    }

    /// A task failed (returned an error or panicked).
    #[inline]
    pub fn record_failed(&self) {
        saturating_add(&self.failed, 1);
    }

    /// Cancellation of a task was requested (whether or not it takes
    /// effect).
    #[inline]
    pub fn record_cancellation_requested(&self) {
        saturating_add(&self.cancellation_requested, 1);
    }

    /// A task acknowledged cancellation and ended `Cancelled`.
    #[inline]
    pub fn record_cancellation_acknowledged(&self) {
        saturating_add(&self.cancellation_acknowledged, 1);
    }

    /// A result arrived for a request nobody waits for any more (cancelled,
    /// timed out or dropped) and was discarded.
    #[inline]
    pub fn record_late_result_discarded(&self) {
        saturating_add(&self.late_results_discarded, 1);
    }

    /// A duplicate request was recognised and not executed again.
    #[inline]
    pub fn record_duplicate_suppressed(&self) {
        saturating_add(&self.duplicates_suppressed, 1);
    }

    /// A request's deadline passed before its result arrived.
    #[inline]
    pub fn record_deadline_expiry(&self) {
        saturating_add(&self.deadline_expiries, 1);
    }

    /// An incoming message was rejected as malformed or not allowed by the
    /// protocol.
    #[inline]
    pub fn record_protocol_rejection(&self) {
        saturating_add(&self.protocol_rejections, 1);
    }

    /// `n` bytes were handed to the transport.
    #[inline]
    pub fn record_bytes_sent(&self, n: u64) {
        saturating_add(&self.bytes_sent, n);
    }

    /// `n` bytes were received from the transport.
    #[inline]
    pub fn record_bytes_received(&self, n: u64) {
        saturating_add(&self.bytes_received, n);
    }

    /// Adds counts recorded elsewhere, field by field (each saturating at
    /// `u64::MAX`); a zero field costs a comparison, not an atomic update.
    ///
    /// For a thread that records many events in a row: it can count them
    /// in a plain [`MetricsSnapshot`] and add them here at once, paying
    /// one atomic update per counter that changed instead of one per
    /// event. Readers see such counts when they are added, not before.
    ///
    /// ```
    /// use dinah_core::{MetricsSnapshot, RuntimeMetrics};
    ///
    /// let metrics = RuntimeMetrics::new();
    /// metrics.record_completed();
    /// let batch = MetricsSnapshot { completed: 2, bytes_received: 96, ..MetricsSnapshot::default() };
    /// metrics.add(&batch);
    /// assert_eq!(metrics.snapshot().completed, 3);
    /// assert_eq!(metrics.snapshot().bytes_received, 96);
    /// ```
    pub fn add(&self, counts: &MetricsSnapshot) {
        let MetricsSnapshot {
            submitted,
            started,
            completed,
            failed,
            cancellation_requested,
            cancellation_acknowledged,
            late_results_discarded,
            duplicates_suppressed,
            deadline_expiries,
            protocol_rejections,
            bytes_sent,
            bytes_received,
        } = *counts;
        let pairs = [
            (&self.submitted, submitted),
            (&self.started, started),
            (&self.completed, completed),
            (&self.failed, failed),
            (&self.cancellation_requested, cancellation_requested),
            (&self.cancellation_acknowledged, cancellation_acknowledged),
            (&self.late_results_discarded, late_results_discarded),
            (&self.duplicates_suppressed, duplicates_suppressed),
            (&self.deadline_expiries, deadline_expiries),
            (&self.protocol_rejections, protocol_rejections),
            (&self.bytes_sent, bytes_sent),
            (&self.bytes_received, bytes_received),
        ];
        for (counter, n) in pairs {
            if n > 0 {
                saturating_add(counter, n);
            }
        }
    }

    /// Reads every counter (`Relaxed`, one after another).
    ///
    /// Not one atomic instant under concurrent updates: see the type's
    /// [memory ordering](Self#memory-ordering) section.
    #[must_use]
    pub fn snapshot(&self) -> MetricsSnapshot {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MetricsSnapshot {
            submitted: read(&self.submitted),
            started: read(&self.started),
            completed: read(&self.completed),
            failed: read(&self.failed),
            cancellation_requested: read(&self.cancellation_requested),
            cancellation_acknowledged: read(&self.cancellation_acknowledged),
            late_results_discarded: read(&self.late_results_discarded),
            duplicates_suppressed: read(&self.duplicates_suppressed),
            deadline_expiries: read(&self.deadline_expiries),
            protocol_rejections: read(&self.protocol_rejections),
            bytes_sent: read(&self.bytes_sent),
            bytes_received: read(&self.bytes_received),
        }
    }
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RuntimeMetrics")
            .field(&self.snapshot())
            .finish()
    }
}

/// The counters of a [`RuntimeMetrics`] at one reading: plain numbers.
///
/// `Display` prints one compact line, for logs and shutdown reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MetricsSnapshot {
    /// Tasks accepted for execution.
    pub submitted: u64,
    /// Tasks that started running.
    pub started: u64,
    /// Tasks that returned successfully.
    pub completed: u64,
    /// Tasks that failed (returned an error or panicked).
    pub failed: u64,
    /// Cancellation requests made.
    pub cancellation_requested: u64,
    /// Cancellations acknowledged by the task.
    pub cancellation_acknowledged: u64,
    /// Results that arrived after nobody waited for them, discarded.
    pub late_results_discarded: u64,
    /// Duplicate requests recognised and not executed again.
    pub duplicates_suppressed: u64,
    /// Deadlines that passed before the result arrived.
    pub deadline_expiries: u64,
    /// Incoming messages rejected by the protocol checks.
    pub protocol_rejections: u64,
    /// Bytes handed to the transport.
    pub bytes_sent: u64,
    /// Bytes received from the transport.
    pub bytes_received: u64,
}

impl MetricsSnapshot {
    /// The counts between `earlier` and `self`, field by field (saturating
    /// at zero, for a pair taken out of order).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::RuntimeMetrics;
    ///
    /// let metrics = RuntimeMetrics::new();
    /// metrics.record_submitted();
    /// let before = metrics.snapshot();
    /// metrics.record_submitted();
    /// metrics.record_bytes_received(10);
    /// let delta = metrics.snapshot().since(&before);
    /// assert_eq!((delta.submitted, delta.bytes_received), (1, 10));
    /// ```
    #[must_use]
    pub const fn since(&self, earlier: &Self) -> Self {
        Self {
            submitted: self.submitted.saturating_sub(earlier.submitted),
            started: self.started.saturating_sub(earlier.started),
            completed: self.completed.saturating_sub(earlier.completed),
            failed: self.failed.saturating_sub(earlier.failed),
            cancellation_requested: self
                .cancellation_requested
                .saturating_sub(earlier.cancellation_requested),
            cancellation_acknowledged: self
                .cancellation_acknowledged
                .saturating_sub(earlier.cancellation_acknowledged),
            late_results_discarded: self
                .late_results_discarded
                .saturating_sub(earlier.late_results_discarded),
            duplicates_suppressed: self
                .duplicates_suppressed
                .saturating_sub(earlier.duplicates_suppressed),
            deadline_expiries: self
                .deadline_expiries
                .saturating_sub(earlier.deadline_expiries),
            protocol_rejections: self
                .protocol_rejections
                .saturating_sub(earlier.protocol_rejections),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tasks: submitted={} started={} completed={} failed={} \
             cancel_requested={} cancel_acknowledged={}; \
             requests: late_discarded={} duplicates_suppressed={} \
             deadline_expiries={} protocol_rejections={}; \
             bytes: sent={} received={}",
            self.submitted,
            self.started,
            self.completed,
            self.failed,
            self.cancellation_requested,
            self.cancellation_acknowledged,
            self.late_results_discarded,
            self.duplicates_suppressed,
            self.deadline_expiries,
            self.protocol_rejections,
            self.bytes_sent,
            self.bytes_received,
        )
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    extern crate std;
    use std::string::ToString;
    use std::vec::Vec;

    #[test]
    fn added_counts_land_in_their_own_counters_and_saturate() {
        let metrics = RuntimeMetrics::new();
        let batch = MetricsSnapshot {
            submitted: 1,
            started: 2,
            completed: 3,
            failed: 4,
            cancellation_requested: 5,
            cancellation_acknowledged: 6,
            late_results_discarded: 7,
            duplicates_suppressed: 8,
            deadline_expiries: 9,
            protocol_rejections: 10,
            bytes_sent: 11,
            bytes_received: 12,
        };
        metrics.add(&batch);
        assert_eq!(metrics.snapshot(), batch);
        metrics.add(&MetricsSnapshot::default());
        assert_eq!(metrics.snapshot(), batch, "adding nothing changes nothing");
        metrics.add(&MetricsSnapshot {
            bytes_sent: u64::MAX,
            ..MetricsSnapshot::default()
        });
        let after = metrics.snapshot();
        assert_eq!(after.bytes_sent, u64::MAX, "saturates instead of wrapping");
        assert_eq!(after.bytes_received, 12);
    }

    /// Each recorder, paired with the snapshot field it must move (by 1,
    /// or by 7 for the byte counters).
    type Recorder = fn(&RuntimeMetrics);
    type Field = fn(&MetricsSnapshot) -> u64;
    const EVENTS: [(Recorder, Field, u64); 12] = [
        (RuntimeMetrics::record_submitted, |s| s.submitted, 1),
        (RuntimeMetrics::record_started, |s| s.started, 1),
        (RuntimeMetrics::record_completed, |s| s.completed, 1),
        (RuntimeMetrics::record_failed, |s| s.failed, 1),
        (
            RuntimeMetrics::record_cancellation_requested,
            |s| s.cancellation_requested,
            1,
        ),
        (
            RuntimeMetrics::record_cancellation_acknowledged,
            |s| s.cancellation_acknowledged,
            1,
        ),
        (
            RuntimeMetrics::record_late_result_discarded,
            |s| s.late_results_discarded,
            1,
        ),
        (
            RuntimeMetrics::record_duplicate_suppressed,
            |s| s.duplicates_suppressed,
            1,
        ),
        (
            RuntimeMetrics::record_deadline_expiry,
            |s| s.deadline_expiries,
            1,
        ),
        (
            RuntimeMetrics::record_protocol_rejection,
            |s| s.protocol_rejections,
            1,
        ),
        (|m| m.record_bytes_sent(7), |s| s.bytes_sent, 7),
        (|m| m.record_bytes_received(7), |s| s.bytes_received, 7),
    ];

    #[test]
    fn each_event_moves_only_its_counter() {
        for (index, (record, _, _)) in EVENTS.iter().enumerate() {
            let metrics = RuntimeMetrics::new();
            record(&metrics);
            let snapshot = metrics.snapshot();
            for (other, (_, field, step)) in EVENTS.iter().enumerate() {
                let expected = if other == index { *step } else { 0 };
                assert_eq!(field(&snapshot), expected, "event {index}, field {other}");
            }
        }
    }

    #[test]
    fn counters_saturate_at_max() {
        let metrics = RuntimeMetrics::new();
        metrics.record_bytes_sent(u64::MAX - 1);
        metrics.record_bytes_sent(5);
        metrics.record_bytes_sent(1);
        assert_eq!(metrics.snapshot().bytes_sent, u64::MAX);

        // A unit counter one step from the top.
        saturating_add(&metrics.submitted, u64::MAX - 1);
        metrics.record_submitted();
        assert_eq!(metrics.snapshot().submitted, u64::MAX);
        metrics.record_submitted();
        assert_eq!(metrics.snapshot().submitted, u64::MAX);
        metrics.record_bytes_received(0);
        assert_eq!(metrics.snapshot().bytes_received, 0);
    }

    #[test]
    fn snapshot_display_and_since() {
        let metrics = RuntimeMetrics::default();
        for (record, _, _) in EVENTS {
            record(&metrics);
        }
        let snapshot = metrics.snapshot();
        assert_eq!(
            snapshot.to_string(),
            "tasks: submitted=1 started=1 completed=1 failed=1 cancel_requested=1 \
             cancel_acknowledged=1; requests: late_discarded=1 duplicates_suppressed=1 \
             deadline_expiries=1 protocol_rejections=1; bytes: sent=7 received=7"
        );
        assert_eq!(snapshot.since(&snapshot), MetricsSnapshot::default());
        assert_eq!(
            MetricsSnapshot::default().since(&snapshot),
            MetricsSnapshot::default()
        );
        assert_eq!(snapshot.since(&MetricsSnapshot::default()), snapshot);
        assert!(std::format!("{metrics:?}").starts_with("RuntimeMetrics(MetricsSnapshot {"));
    }

    #[test]
    fn usable_from_a_static() {
        static METRICS: RuntimeMetrics = RuntimeMetrics::new();
        METRICS.record_failed();
        assert_eq!(METRICS.snapshot().failed, 1);
    }

    #[test]
    fn concurrent_increments_are_not_lost() {
        const THREADS: u64 = if cfg!(miri) { 3 } else { 8 };
        const PER_THREAD: u64 = if cfg!(miri) { 20 } else { 10_000 };
        let metrics = RuntimeMetrics::new();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let metrics = &metrics;
                    scope.spawn(move || {
                        for _ in 0..PER_THREAD {
                            metrics.record_submitted();
                            metrics.record_cancellation_requested();
                            metrics.record_bytes_sent(3);
                        }
                    })
                })
                .collect();
            for handle in handles {
                handle.join().expect("recorder panicked");
            }
        });
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.submitted, THREADS * PER_THREAD);
        assert_eq!(snapshot.cancellation_requested, THREADS * PER_THREAD);
        assert_eq!(snapshot.cancellation_acknowledged, 0);
        assert_eq!(snapshot.bytes_sent, 3 * THREADS * PER_THREAD);
    }
}
