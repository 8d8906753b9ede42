//! Explicit shutdown and its report, and what `Drop` does instead.
//!
//! [`Runtime::shutdown`] follows seven steps:
//!
//! 1. atomically enter `Draining`: clients and peers are refused new work;
//! 2. fail every local waiter with `Cancelled` and queue a best-effort
//!    cancellation for each remote one;
//! 3. keep progressing queued and running jobs, completions, cancellations
//!    and responses until all are done or the deadline passes;
//! 4. stop the worker domains and join their threads (within the
//!    deadline);
//! 5. clear the run-scoped dedup state;
//! 6. flush the transport, say goodbye and drain the peers' goodbyes, then
//!    close it;
//! 7. return a [`ShutdownReport`] of everything still held.
//!
//! Success means every count in the report is zero; otherwise the
//! [`ShutdownTimeout`] error carries the exact counts. The steps run inside
//! [`Runtime::poll_shutdown`], so a caller driving several runtimes from
//! one thread (a simulation) can interleave them.

use std::fmt;
use std::task::Poll;
use std::time::Duration;

use dinah_core::{Instant, MetricsSnapshot, RuntimeState};

use crate::domain::ShutdownPolicy;
use crate::runtime::Runtime;
use crate::runtime::error::RuntimeError;
use crate::runtime::hub::Counters;

/// Everything a runtime still held when its shutdown ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Calls still waiting for an outcome.
    pub pending_calls: usize,
    /// Action jobs admitted to a domain and not finished (queued or stuck
    /// in a handler).
    pub action_jobs: usize,
    /// Frames handed to the transport and not completed.
    pub send_tickets: u64,
    /// Dedup entries whose job never finished (finished entries are
    /// cleared in step 5).
    pub dedup_entries: usize,
    /// Events not handled: worker completions, queued cancellations and
    /// responses, frames queued in the transport handle.
    pub pending_events: usize,
    /// Bytes still retained by the runtime and the transport.
    pub retained_bytes: u64,
    /// Peers that neither said goodbye nor went down.
    pub undrained_peers: u32,
    /// Cancellations this rank could not send over the whole run (see
    /// [`CancelsDropped`](crate::CancelsDropped) for the causes).
    pub cancels_dropped: crate::CancelsDropped,
    /// Calls whose caller stopped waiting before an outcome arrived, over
    /// the whole run (see [`RuntimeStats`](crate::RuntimeStats)).
    pub calls_abandoned: u64,
    /// The metrics at the end of the run.
    pub metrics: MetricsSnapshot,
    /// How long the shutdown took, on the runtime's clock.
    pub elapsed: Duration,
}

impl ShutdownReport {
    /// Did the shutdown leave nothing behind? (Every outstanding count is
    /// zero; the run-long totals do not count.)
    pub fn is_clean(&self) -> bool {
        self.pending_calls == 0
            && self.action_jobs == 0
            && self.send_tickets == 0
            && self.dedup_entries == 0
            && self.pending_events == 0
            && self.retained_bytes == 0
            && self.undrained_peers == 0
    }

    /// Issued calls not accounted for by an ending or by
    /// [`pending_calls`](Self::pending_calls), as
    /// [`RuntimeStats::unsettled_calls`](crate::RuntimeStats::unsettled_calls):
    /// zero after a shutdown, which issues and settles nothing more.
    #[must_use]
    pub fn unsettled_calls(&self) -> i128 {
        crate::runtime::stats::unsettled(&self.metrics, self.calls_abandoned, self.pending_calls)
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pending calls {}, action jobs {}, send tickets {}, dedup entries {}, pending events {}, \
             retained bytes {}, undrained peers {} (took {:?})",
            self.pending_calls,
            self.action_jobs,
            self.send_tickets,
            self.dedup_entries,
            self.pending_events,
            self.retained_bytes,
            self.undrained_peers,
            self.elapsed
        )
    }
}

/// The shutdown deadline passed with work outstanding; the report has the
/// exact counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownTimeout {
    /// What was left (boxed: the report is large and errors travel far).
    pub report: Box<ShutdownReport>,
}

impl fmt::Display for ShutdownTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shutdown timed out with {}", self.report)
    }
}

impl std::error::Error for ShutdownTimeout {}

/// Where a shutdown is.
#[derive(Debug)]
pub(crate) struct ShutdownState {
    started: Instant,
    deadline: Instant,
    phase: Phase,
    result: Option<Result<ShutdownReport, ShutdownTimeout>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Step 3: finishing work.
    Draining,
    /// Step 6: goodbyes sent, waiting for the peers'.
    Transport,
    /// Step 7: the report is ready.
    Done,
}

/// What a timed-out shutdown could not finish.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stuck {
    /// Jobs still running when their domain's join timed out.
    jobs: usize,
    /// Remote jobs still running when the dedup table was cleared.
    dedup_entries: usize,
}

/// The longest a domain join may wait on the wall clock, even when the
/// runtime's clock is logical (a simulation) and the deadline is far.
const MAX_JOIN: Duration = Duration::from_secs(5);

impl Runtime {
    /// Shuts down within `timeout`:
    ///
    /// 1. atomically enter `Draining`: clients and peers are refused new
    ///    work;
    /// 2. fail every local waiter with `Cancelled` and queue a best-effort
    ///    cancellation for each remote one;
    /// 3. keep progressing queued and running jobs, completions,
    ///    cancellations and responses until all are done or the deadline
    ///    passes;
    /// 4. stop the worker domains and join their threads (within the
    ///    deadline);
    /// 5. clear the run-scoped dedup state;
    /// 6. flush the transport, say goodbye, drain the peers' goodbyes, and
    ///    close it;
    /// 7. return a [`ShutdownReport`] of everything still held.
    ///
    /// Success means every outstanding count in the report is zero. All
    /// ranks should shut down together (step 6 waits for their goodbyes),
    /// after a barrier that keeps serving calls.
    ///
    /// # Errors
    ///
    /// [`ShutdownTimeout`] with the exact outstanding counts if anything
    /// was left when the deadline passed.
    pub fn shutdown(mut self, timeout: Duration) -> Result<ShutdownReport, ShutdownTimeout> {
        self.begin_shutdown(timeout);
        loop {
            if let Poll::Ready(result) = self.poll_shutdown() {
                return result;
            }
            self.idle();
        }
    }

    /// Starts a shutdown that must finish within `timeout` (steps 1 and
    /// 2); [`poll_shutdown`](Self::poll_shutdown) carries it on.
    /// Idempotent.
    pub fn begin_shutdown(&mut self, timeout: Duration) {
        if self.shutdown.is_some() {
            return;
        }
        let hub = &self.hub;
        let started = hub.clock.now();
        let deadline = started.checked_add(timeout).unwrap_or(Instant::MAX);
        // Step 1. A runtime that already failed goes straight on to clean up.
        let _ = hub.state.begin_draining();
        // Step 2.
        let mut failed = Vec::new();
        hub.calls.fail_all(|_| RuntimeError::Cancelled, &mut failed);
        self.counts.failed_calls(failed.len());
        for info in failed {
            hub.queue_cancel(info.peer, info.call);
        }
        self.shutdown = Some(ShutdownState {
            started,
            deadline,
            phase: Phase::Draining,
            result: None,
        });
    }

    /// Progresses the shutdown begun by
    /// [`begin_shutdown`](Self::begin_shutdown); `Ready` once it ended
    /// (successfully or by its deadline). Never blocks, except for joining
    /// idle domain workers.
    pub fn poll_shutdown(&mut self) -> Poll<Result<ShutdownReport, ShutdownTimeout>> {
        let Some(state) = &self.shutdown else {
            self.begin_shutdown(self.hub.limits.shutdown_timeout);
            return Poll::Pending;
        };
        if let Some(result) = &state.result {
            return Poll::Ready(result.clone());
        }
        let (deadline, phase) = (state.deadline, state.phase);
        self.progress();
        let now = self.hub.clock.now();
        let late = now >= deadline;
        match phase {
            Phase::Draining => {
                if self.work_left() == 0 || late {
                    self.stop_domains(deadline);
                    // Step 5. Entries of jobs that never finished are
                    // counted before they go.
                    self.stuck.dedup_entries = self.server.running();
                    self.server.clear();
                    // Step 6.
                    self.driver.begin_shutdown();
                    self.set_phase(Phase::Transport);
                }
            }
            Phase::Transport => {
                let handle = self.hub.handle.counts();
                let flushed =
                    handle.queued_action + handle.queued_control == 0 && handle.in_flight == 0;
                if (self.driver.is_drained() && flushed) || late {
                    let wall_deadline = std::time::Instant::now()
                        + deadline.saturating_duration_since(now).min(MAX_JOIN);
                    self.driver.close(wall_deadline);
                    self.hub.handle.close();
                    self.closed = true;
                    // The owner thread's spare frame buffers go too (its
                    // domain workers took theirs with them).
                    crate::transport::frame_buffers::release();
                    let report = self.report(now);
                    trace_event!(
                        tracing::Level::INFO,
                        rank = self.hub.rank.get(),
                        clean = report.is_clean(),
                        pending_calls = report.pending_calls,
                        action_jobs = report.action_jobs,
                        undrained_peers = report.undrained_peers,
                        elapsed_ms = report.elapsed.as_millis() as u64,
                        "dinah: runtime shut down"
                    );
                    let result = if report.is_clean() {
                        let _ = self
                            .hub
                            .state
                            .transition(RuntimeState::Draining, RuntimeState::Stopped);
                        Ok(report)
                    } else {
                        let _ = self.hub.state.fail();
                        Err(ShutdownTimeout {
                            report: Box::new(report),
                        })
                    };
                    if let Some(state) = &mut self.shutdown {
                        state.phase = Phase::Done;
                        state.result = Some(result.clone());
                    }
                    return Poll::Ready(result);
                }
            }
            Phase::Done => {}
        }
        Poll::Pending
    }

    fn set_phase(&mut self, phase: Phase) {
        if let Some(state) = &mut self.shutdown {
            state.phase = phase;
        }
    }

    /// Step 3's remaining work: jobs, completions, queued cancellations and
    /// responses.
    fn work_left(&self) -> usize {
        let hub = &self.hub;
        hub.domains.in_flight()
            + hub.completions.len()
            + hub.cancels.len()
            + usize::from(self.cancel_retry.is_some())
            + self.server.waiting()
            + self.server.running()
    }

    /// Step 4: stops the domains, cancelling whatever is still queued, and
    /// joins their workers within the deadline (bounded by [`MAX_JOIN`]).
    fn stop_domains(&mut self, deadline: Instant) {
        self.server.cancel_running(&self.hub);
        let now = self.hub.clock.now();
        let budget = deadline.saturating_duration_since(now).min(MAX_JOIN);
        for (_, domain) in self.hub.domains.take() {
            if let Err(timeout) = domain.shutdown(ShutdownPolicy::CancelAll, budget) {
                self.stuck.jobs += timeout.running;
            }
        }
        // Completions of jobs cancelled just now.
        let budget = self.hub.completions.len();
        let now = self.hub.clock.now();
        for _ in 0..budget {
            let Some(completion) = self.hub.completions.pop() else {
                break;
            };
            self.route(completion, now);
        }
    }

    /// Step 7.
    fn report(&self, now: Instant) -> ShutdownReport {
        let hub = &self.hub;
        let handle = hub.handle.counts();
        let driver = self.driver.counts();
        let started = self.shutdown.as_ref().map_or(now, |s| s.started);
        ShutdownReport {
            pending_calls: hub.calls.pending(),
            action_jobs: hub.domains.in_flight() + self.stuck.jobs,
            send_tickets: handle.in_flight + driver.in_flight_frames,
            dedup_entries: self.server.dedup_len() + self.stuck.dedup_entries,
            pending_events: hub.completions.len()
                + hub.cancels.len()
                + usize::from(self.cancel_retry.is_some())
                + self.server.waiting()
                + handle.queued_action
                + handle.queued_control,
            retained_bytes: handle.retained_bytes
                + driver.retained_bytes
                + self.server.retained_bytes(),
            undrained_peers: driver.undrained_peers,
            cancels_dropped: self.cancels_dropped(),
            calls_abandoned: Counters::read(&hub.counters.calls_abandoned),
            metrics: self.metrics_now(),
            elapsed: now.saturating_duration_since(started),
        }
    }
}

/// What dropping a runtime that was not shut down does: refuse new work,
/// fail local waiters, ask handlers to stop, close the transport with a
/// short deadline. Never waits on peers or for handlers.
pub(crate) fn abandon(runtime: &mut Runtime) {
    let hub = &runtime.hub;
    let _ = hub.state.begin_draining();
    let _ = hub.state.fail();
    let failed = hub
        .calls
        .fail_all(|_| RuntimeError::Cancelled, &mut Vec::new());
    runtime.counts.failed_calls(failed);
    runtime.server.cancel_running(hub);
    hub.handle.close();
    // Domains dropped here cancel their queued jobs without joining.
    let _ = hub.domains.take();
    runtime
        .driver
        .close(std::time::Instant::now() + Duration::from_millis(100));
    runtime.closed = true;
}
