//! The serving side: requests from peers, admitted, dispatched, answered.
//!
//! Every request goes through three steps, one file each:
//!
//! 1. **admit** (`serve/admit.rs`): the dedup verdict. A request runs only
//!    if it never arrived before; a duplicate gets its first copy's answer;
//!    a full table refuses with a typed resource error.
//! 2. **dispatch** (`serve/dispatch.rs`): the admitted request runs inline
//!    on the owner thread or as a job on its domain's workers.
//! 3. **respond** (`serve/respond.rs`): the answer goes to the transport,
//!    or waits in a bounded outbox; a finished request's response is kept
//!    for its duplicates while its dedup entry lasts.
//!
//! The [`Server`] ties them together on the owner thread, which calls it
//! for each request and cancellation frame and each finished remote job.

mod admit;
mod dispatch;
mod respond;
mod response_buffers;

use std::sync::Arc;

use dinah_core::wire::{Call, ErrorCode, Header};
use dinah_core::{DedupKey, Instant, LimitField, Rank, TaskFailureKind, TaskOutcome};

use admit::{Admit, AdmitRefusal, CancelVerdict, Verdict};
use dispatch::{Dispatch, Dispatched};
use respond::Respond;

pub(crate) use admit::AdmitCounts;
pub(crate) use respond::RespondCounts;

use super::frames;
use super::hub::{Counters, Hub};
use super::job::{Refusal, Request};
use super::job_outcome::{JobFailure, ResultFrame};
use crate::transport::Frame;

/// Events of the serving side not yet added to the runtime's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServeMetrics {
    /// Requests found in the dedup table.
    pub(crate) duplicates: u64,
    /// Bytes of responses handed to the transport.
    pub(crate) bytes_sent: u64,
    /// Remote jobs that ended by acknowledging a cancellation.
    pub(crate) cancellations_acknowledged: u64,
}

/// Counts of the serving side since the start, besides admission's and
/// responding's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServeCounts {
    /// Requests admitted and run (inline) or queued (pooled).
    pub(crate) served: u64,
    /// Requests refused without running because their domain's queue was
    /// full.
    pub(crate) queue_full: u64,
    /// Request and cancel frames whose ID is not in their origin's
    /// sequence to this rank.
    pub(crate) misaddressed: u64,
    /// Cancellations of requests not seen yet that could not be recorded.
    pub(crate) cancels_unrecorded: u64,
    /// Remote jobs that ended by acknowledging a cancellation.
    pub(crate) cancellations_acknowledged: u64,
}

/// The owner thread's state for requests from peers (see the module
/// docs).
pub(crate) struct Server {
    admit: Admit,
    dispatch: Dispatch,
    respond: Respond,
    counts: ServeCounts,
    /// The counts already added to the runtime's metrics.
    published: ServeMetrics,
}

impl Server {
    /// A server for `hub`'s limits; its outbox holds `outbox` responses
    /// (see `serve/respond.rs` for why that bound is never exceeded).
    pub(crate) fn new(hub: &Arc<Hub>, outbox: usize) -> Self {
        let limits = &hub.limits;
        let slots = limits.max_dedup_entries as usize;
        Self {
            admit: Admit::new(limits, hub.rank, hub.world),
            dispatch: Dispatch::new(hub, slots),
            respond: Respond::new(slots, outbox, limits.max_action_queue as usize),
            counts: ServeCounts::default(),
            published: ServeMetrics::default(),
        }
    }

    /// How many frames the owner may read now: each can add one response,
    /// and the outbox must have room for all of them besides one per
    /// running job.
    pub(crate) fn room(&self) -> usize {
        self.respond.room(self.admit.running())
    }

    /// A request frame from `origin` (already validated by the decoder),
    /// whose caller stops waiting at `until` on this rank's clock.
    pub(crate) fn on_request(
        &mut self,
        hub: &Hub,
        origin: Rank,
        call: Call,
        until: Instant,
        (header, frame): (Header, Frame),
        now: Instant,
    ) {
        if !hub.state.accepts_work() {
            // Not admitted, so not recorded: the caller may retry elsewhere.
            let code = ErrorCode::ShuttingDown;
            return self.reject(hub, origin, call, until, code, "target is shutting down");
        }
        let key = DedupKey::new(origin, call.request);
        let respond = &mut self.respond;
        let slot = match self.admit.request(key, |slot| respond.forget(slot)) {
            Verdict::Run { slot } => slot,
            verdict => return self.answer_unrun(hub, origin, call, until, verdict),
        };
        let request = Request {
            origin,
            call,
            deadline: until,
            header,
        };
        let refusal = match hub.registry.get(call.action) {
            None => Some((ErrorCode::UnknownAction, "action not registered")),
            Some(entry) if entry.registration.domain != call.domain => {
                Some((ErrorCode::UnknownDomain, "action runs in another domain"))
            }
            Some(entry) => match self.dispatch.run(hub, entry, slot, request, frame, now) {
                Dispatched::Pooled => {
                    self.counts.served += 1;
                    None
                }
                Dispatched::Inline(outcome) => {
                    self.counts.served += 1;
                    let finished = self.dispatch.inline_clock();
                    self.finish(hub, origin, call, until, outcome, finished);
                    None
                }
                Dispatched::Refused(Refusal::QueueFull) => {
                    self.counts.queue_full += 1;
                    let limit = LimitField::MaxActionQueue;
                    Some((ErrorCode::ResourceExhausted { limit }, "action queue full"))
                }
                Dispatched::Refused(Refusal::ShuttingDown) => {
                    Some((ErrorCode::ShuttingDown, "domain is shutting down"))
                }
                Dispatched::Refused(Refusal::NoSuchDomain) => {
                    Some((ErrorCode::UnknownDomain, "no such domain"))
                }
            },
        };
        if let Some((code, text)) = refusal {
            // Admitted but not run: recorded as finished with this answer,
            // so a duplicate gets the same one.
            let failure = JobFailure::new(code, text);
            let outcome = TaskOutcome::Failed(dinah_core::TaskFailure::returned(failure));
            self.finish(hub, origin, call, until, outcome, now);
        }
    }

    /// Answers a request admission did not run.
    fn answer_unrun(
        &mut self,
        hub: &Hub,
        origin: Rank,
        call: Call,
        until: Instant,
        verdict: Verdict,
    ) {
        let (code, text) = match verdict {
            Verdict::Run { .. } | Verdict::Running => return,
            Verdict::Completed { slot, cached: true } => {
                if let Some(response) = self.respond.cached(slot) {
                    self.respond.send(hub, origin, response, until);
                    return;
                }
                (ErrorCode::DuplicateResultUnavailable, "result not retained")
            }
            Verdict::Completed { cached: false, .. } | Verdict::Stale => (
                ErrorCode::DuplicateResultUnavailable,
                "duplicate request; result not retained",
            ),
            Verdict::Cancelled => (ErrorCode::Cancelled, "request was cancelled"),
            Verdict::Refused(AdmitRefusal::TableFull) => (
                ErrorCode::ResourceExhausted {
                    limit: LimitField::MaxDedupEntries,
                },
                "dedup table full of running requests",
            ),
            Verdict::Refused(AdmitRefusal::AheadOfWindow) => (
                ErrorCode::ResourceExhausted {
                    limit: LimitField::MaxPendingCalls,
                },
                "request too far ahead of its origin's undelivered ones",
            ),
            Verdict::Refused(AdmitRefusal::Misaddressed) => {
                self.counts.misaddressed += 1;
                (
                    ErrorCode::ProtocolViolation,
                    "request ID not addressed to this rank",
                )
            }
        };
        self.reject(hub, origin, call, until, code, text);
    }

    fn reject(
        &mut self,
        hub: &Hub,
        origin: Rank,
        call: Call,
        until: Instant,
        code: ErrorCode,
        text: &str,
    ) {
        let frame = frames::error(hub.rank, call, code, text, &hub.protocol);
        self.respond.send(hub, origin, frame, until);
    }

    /// A cancellation from `origin` of its request `call`.
    pub(crate) fn on_cancel(&mut self, hub: &Hub, origin: Rank, call: Call, now: Instant) {
        Counters::bump(&hub.counters.cancels_received);
        let key = DedupKey::new(origin, call.request);
        match self.admit.cancel(key, now) {
            CancelVerdict::Running { slot } => self.dispatch.cancel(hub, slot),
            CancelVerdict::Dropped => self.counts.cancels_unrecorded += 1,
            CancelVerdict::Misaddressed => self.counts.misaddressed += 1,
            CancelVerdict::Settled | CancelVerdict::Remembered => {}
        }
    }

    /// The remote job admitted in dedup slot `slot` finished: its dedup
    /// entry is completed and its response sent (or queued until its
    /// caller stops waiting).
    pub(crate) fn on_completion(
        &mut self,
        hub: &Hub,
        slot: usize,
        outcome: TaskOutcome<ResultFrame, JobFailure>,
        now: Instant,
    ) {
        // The worker let go of the job's block before delivering.
        if let Some((origin, call, until)) = self.dispatch.finished(slot) {
            self.finish(hub, origin, call, until, outcome, now);
        }
    }

    /// Records how an admitted request ended and answers its caller.
    ///
    /// The response is sent even when the caller cancelled meanwhile: it
    /// may have been sent before the cancellation (the caller then counts
    /// it as late and discards it), and it costs the caller nothing.
    fn finish(
        &mut self,
        hub: &Hub,
        origin: Rank,
        call: Call,
        until: Instant,
        outcome: TaskOutcome<ResultFrame, JobFailure>,
        now: Instant,
    ) {
        let frame = match outcome {
            TaskOutcome::Completed(frame) => frame,
            TaskOutcome::Failed(failure) => {
                let (code, text) = match failure.kind() {
                    TaskFailureKind::Cancelled => {
                        self.counts.cancellations_acknowledged += 1;
                        (ErrorCode::Cancelled, String::from("cancelled"))
                    }
                    TaskFailureKind::Panicked => (
                        ErrorCode::HandlerPanicked,
                        failure.panic_message().unwrap_or("panicked").to_owned(),
                    ),
                    _ => match failure.into_error() {
                        Some(JobFailure { code, text }) => (code, text),
                        None => (ErrorCode::UserFailure, String::new()),
                    },
                };
                frames::error(hub.rank, call, code, &text, &hub.protocol)
            }
        };
        let key = DedupKey::new(origin, call.request);
        if let Some(retention) = self.admit.finish(key, now, frame.len() as u64) {
            if retention.retain() {
                self.respond.retain(retention.slot(), &frame);
            }
        }
        self.respond.send(hub, origin, frame, until);
    }

    /// `peer` went down: cancel the jobs it asked for (nobody is left to
    /// receive their results) and drop responses waiting for it.
    pub(crate) fn on_peer_down(&mut self, hub: &Hub, peer: Rank) {
        self.dispatch.cancel_from(hub, peer);
        self.respond.forget_peer(peer);
    }

    /// Hands waiting responses to the transport (at most `max`).
    pub(crate) fn flush(&mut self, hub: &Hub, max: usize, now: Instant) -> usize {
        self.respond.flush(hub, max, now)
    }

    /// Drops dedup entries past their TTL (at most `max`).
    pub(crate) fn expire(&mut self, now: Instant, max: usize) -> usize {
        let respond = &mut self.respond;
        self.admit.expire(now, max, |slot| respond.forget(slot))
    }

    /// Shutdown step 5: forgets all run-scoped dedup state. Running entries
    /// must be gone (their jobs finished) for this to leave nothing.
    pub(crate) fn clear(&mut self) {
        self.admit.clear();
        self.respond.clear();
    }

    /// Requests cancellation of every running remote job (shutdown).
    pub(crate) fn cancel_running(&self, hub: &Hub) {
        self.dispatch.cancel_all(hub);
    }

    /// Job blocks allocated and reused for pooled requests.
    pub(crate) fn job_blocks(&self) -> (u64, u64) {
        self.dispatch.job_blocks()
    }

    /// Entries in the dedup table.
    pub(crate) fn dedup_len(&self) -> usize {
        self.admit.len()
    }

    /// Remote jobs admitted and not finished.
    pub(crate) fn running(&self) -> usize {
        self.admit.running()
    }

    /// Responses waiting for the transport.
    pub(crate) fn waiting(&self) -> usize {
        self.respond.waiting()
    }

    /// The most responses that can wait at once.
    pub(crate) fn outbox_capacity(&self) -> usize {
        self.respond.capacity()
    }

    /// Bytes held: retained responses and the outbox.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.admit.retained_bytes() + self.respond.waiting_bytes()
    }

    /// When the next dedup entry expires.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.admit.next_expiry()
    }

    /// The events counted since the last call, for the runtime's metrics.
    pub(crate) fn take_metrics(&mut self) -> ServeMetrics {
        let duplicates = self.admit.counts().duplicates;
        let acknowledged = self.counts.cancellations_acknowledged;
        let fresh = ServeMetrics {
            duplicates: duplicates - self.published.duplicates,
            bytes_sent: self.respond.take_bytes_sent(),
            cancellations_acknowledged: acknowledged - self.published.cancellations_acknowledged,
        };
        self.published.duplicates = duplicates;
        self.published.cancellations_acknowledged = acknowledged;
        fresh
    }

    /// Events counted and not yet taken by
    /// [`take_metrics`](Self::take_metrics), without taking them.
    pub(crate) fn unpublished(&self) -> ServeMetrics {
        ServeMetrics {
            duplicates: self.admit.counts().duplicates - self.published.duplicates,
            bytes_sent: self.respond.unpublished_bytes(),
            cancellations_acknowledged: self.counts.cancellations_acknowledged
                - self.published.cancellations_acknowledged,
        }
    }

    /// The serving side's counts.
    pub(crate) fn counts(&self) -> (ServeCounts, AdmitCounts, RespondCounts) {
        (self.counts, self.admit.counts(), self.respond.counts())
    }
}
