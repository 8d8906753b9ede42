//! The receiver side: requests from peers, deduplicated, run on worker
//! domains, answered once.

use std::collections::VecDeque;
use std::sync::Arc;

use dinah_core::wire::{Call, Channel, ErrorCode, FrameRef, Header};
use dinah_core::{
    Admission, CancelOutcome, Completion as DedupCompletion, DedupKey, DedupSlot, DedupTable,
    DomainId, Instant, LimitField, Rank, TaskFailureKind, TaskOutcome,
};

use super::RuntimeClient;
use super::frames;
use super::owner_counts::OwnerCounts;
use super::registry::{ActionContext, ErasedHandler};
use super::response_buffers::ResponseBuffers;
use super::shared::{DomainSink, JobFailure, JobKey, JobOutput, Shared, context_client};
use crate::action::SegmentReader;
use crate::domain::{
    Completion, InlineRunner, JobCanceller, JobContext, SpareJobs, TrySubmitError,
};

/// Why a request was not admitted.
enum Refusal {
    /// At or below its origin's eviction watermark.
    Stale,
    /// Every dedup entry is running.
    Full,
}

/// The most finished job blocks a receiver keeps for reuse (fewer when
/// the action queue is shorter): a burst of completions refills the
/// next burst of submissions without the allocator.
const SPARE_JOBS: usize = 1024;

/// Owner-thread state for requests from peers.
pub(crate) struct Receiver {
    dedup: DedupTable<Box<[DedupSlot]>>,
    /// Retained responses, by dedup slot.
    cache: Box<[Option<Vec<u8>>]>,
    /// Buffers of dropped responses, reused for the next copies.
    buffers: ResponseBuffers,
    /// Running jobs, by dedup slot: who asked, and how to cancel.
    running: Box<[Option<(DedupKey, JobCanceller)>]>,
    /// Blocks of finished pooled jobs, reused for the next ones.
    spare_jobs: SpareJobs,
    /// Responses waiting for room in the transport's action lane.
    outbox: VecDeque<(Rank, Vec<u8>)>,
    outbox_capacity: usize,
    /// Requests from peers admitted for execution since the start.
    served: u64,
    /// Per origin rank: the highest request ID whose finished entry was
    /// evicted early because the table was full. Request IDs are
    /// monotonic per origin, so any request at or below it that is not in
    /// the table is refused (never executed): the retained window shrinks
    /// under pressure, but no duplicate ever runs.
    evicted_upto: Box<[u64]>,
    /// Finished entries evicted before their TTL under pressure.
    pressure_evictions: u64,
    /// The clock as read when the last inline handler finished. The next
    /// inline request starts at the later of this and its progress round's
    /// `now`, which saves a clock read per inline request: between the two
    /// only the runtime's bookkeeping ran, never user code.
    inline_clock: Instant,
    /// The client handlers see in their context (inline ones borrow it,
    /// pooled jobs clone it).
    client: RuntimeClient,
    /// Metrics recorded on the owner thread, published once a round.
    pub(crate) counts: OwnerCounts,
    /// Per domain, its runner of inline handlers (reached without the
    /// lock on the domain list).
    inline: Vec<(DomainId, InlineRunner)>,
}

impl Receiver {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        let entries = shared.limits.max_dedup_entries as usize;
        let storage: Box<[DedupSlot]> = vec![DedupSlot::EMPTY; entries].into_boxed_slice();
        let dedup = DedupTable::from_limits(storage, &shared.limits)
            .expect("validated limits size the dedup table");
        let outbox_capacity = shared.limits.completion_capacity().unwrap_or(u32::MAX) as usize
            + shared.limits.max_send_tickets as usize;
        Self {
            dedup,
            cache: (0..entries).map(|_| None).collect(),
            buffers: ResponseBuffers::new(shared.limits.max_action_queue as usize),
            running: (0..entries).map(|_| None).collect(),
            spare_jobs: SpareJobs::new((shared.limits.max_action_queue as usize).min(SPARE_JOBS)),
            outbox: VecDeque::with_capacity(outbox_capacity.min(1 << 16)),
            outbox_capacity,
            served: 0,
            evicted_upto: vec![0; shared.world.get() as usize].into_boxed_slice(),
            pressure_evictions: 0,
            inline_clock: Instant::ZERO,
            client: RuntimeClient {
                shared: Arc::clone(shared),
            },
            counts: OwnerCounts::default(),
            inline: shared.domains.inline_runners(),
        }
    }

    /// Finished dedup entries evicted before their TTL because the table
    /// was full.
    pub(crate) fn pressure_evictions(&self) -> u64 {
        self.pressure_evictions
    }

    /// Admits `key`, evicting the oldest finished entry when the table is
    /// full (raising that origin's watermark), and refusing a request at
    /// or below its origin's watermark.
    fn admit(&mut self, key: DedupKey) -> Result<Admission, Refusal> {
        loop {
            match self.dedup.begin(key) {
                Ok(Admission::Execute { slot })
                    if key.id.get() <= self.evicted_upto[key.origin.index()] =>
                {
                    // Not in the table but at or below the watermark: it may
                    // have run already. Never execute it.
                    let _ = self.dedup.rollback(key);
                    let _ = slot;
                    return Err(Refusal::Stale);
                }
                Ok(admission) => return Ok(admission),
                Err(_) => {
                    let Some(evicted) = self.dedup.pop_expired(Instant::MAX) else {
                        // Every entry is running: a true concurrency limit.
                        return Err(Refusal::Full);
                    };
                    self.forget_response(evicted.slot);
                    let mark = &mut self.evicted_upto[evicted.key.origin.index()];
                    *mark = (*mark).max(evicted.key.id.get());
                    self.pressure_evictions += 1;
                }
            }
        }
    }

    /// Requests from peers admitted for execution since the start.
    pub(crate) fn served(&self) -> u64 {
        self.served
    }

    /// Entries in the dedup table.
    pub(crate) fn dedup_len(&self) -> usize {
        self.dedup.len()
    }

    /// Responses waiting to be sent.
    pub(crate) fn outbox_len(&self) -> usize {
        self.outbox.len()
    }

    /// Bytes held: retained responses and the outbox.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.dedup.retained_bytes() + self.outbox.iter().map(|(_, f)| f.len() as u64).sum::<u64>()
    }

    /// Running remote jobs.
    pub(crate) fn running(&self) -> usize {
        self.dedup.running()
    }

    /// When the next dedup entry expires.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.dedup.next_expiry()
    }

    /// Sends `frame` to `to` on the action lane, or keeps it in the outbox
    /// when the lane is full.
    fn respond(&mut self, shared: &Shared, to: Rank, frame: Vec<u8>) {
        if !self.outbox.is_empty() {
            self.enqueue(shared, to, frame);
            return;
        }
        let len = frame.len() as u64;
        match shared.send_from_owner(to, Channel::Action, frame) {
            Ok(()) => self.counts.bytes_sent(len),
            Err(refused) => match refused.kind() {
                crate::transport::SendErrorKind::QueueFull { .. }
                | crate::transport::SendErrorKind::RetainedBytes { .. } => {
                    self.enqueue(shared, to, refused.into_inner());
                }
                // The peer is gone or the transport closed: nobody to answer.
                _ => {}
            },
        }
    }

    fn enqueue(&mut self, shared: &Shared, to: Rank, frame: Vec<u8>) {
        if self.outbox.len() < self.outbox_capacity {
            self.outbox.push_back((to, frame));
        } else {
            super::shared::Counters::bump(&shared.counters.responses_dropped);
        }
    }

    /// Retries queued responses; returns how many went out.
    pub(crate) fn flush(&mut self, shared: &Shared, max: usize) -> usize {
        let mut sent = 0;
        while sent < max {
            let Some((to, frame)) = self.outbox.pop_front() else {
                break;
            };
            let len = frame.len() as u64;
            match shared.send_from_owner(to, Channel::Action, frame) {
                Ok(()) => {
                    self.counts.bytes_sent(len);
                    sent += 1;
                }
                Err(refused) => {
                    if matches!(
                        refused.kind(),
                        crate::transport::SendErrorKind::QueueFull { .. }
                            | crate::transport::SendErrorKind::RetainedBytes { .. }
                    ) {
                        self.outbox.push_front((to, refused.into_inner()));
                        break;
                    }
                }
            }
        }
        sent
    }

    fn reject(&mut self, shared: &Shared, origin: Rank, call: Call, code: ErrorCode, text: &str) {
        let frame = frames::error(shared.rank, call, code, text, &shared.protocol);
        self.respond(shared, origin, frame);
    }

    /// A request frame from `origin` (already validated by the decoder).
    pub(crate) fn on_request(
        &mut self,
        shared: &Arc<Shared>,
        origin: Rank,
        call: Call,
        deadline: Instant,
        (header, bytes): (Header, Vec<u8>),
        now: Instant,
    ) {
        let key = DedupKey::new(origin, call.request);
        if !shared.state.accepts_work() {
            // Not admitted, so not recorded: the caller may retry elsewhere.
            self.reject(
                shared,
                origin,
                call,
                ErrorCode::ShuttingDown,
                "target is shutting down",
            );
            return;
        }
        let slot = match self.admit(key) {
            Ok(Admission::Execute { slot }) => slot,
            Ok(Admission::DuplicateRunning { .. }) => {
                self.counts.duplicate_suppressed();
                return;
            }
            Ok(Admission::DuplicateCompleted { slot, cached }) => {
                self.counts.duplicate_suppressed();
                match self.cache.get(slot).and_then(Option::as_ref) {
                    Some(response) if cached => {
                        let response = response.clone();
                        self.respond(shared, origin, response);
                    }
                    _ => self.reject(
                        shared,
                        origin,
                        call,
                        ErrorCode::DuplicateResultUnavailable,
                        "duplicate request; result not retained",
                    ),
                }
                return;
            }
            Ok(Admission::DuplicateCancelled { .. }) => {
                self.counts.duplicate_suppressed();
                self.reject(
                    shared,
                    origin,
                    call,
                    ErrorCode::Cancelled,
                    "request was cancelled",
                );
                return;
            }
            Err(Refusal::Stale) => {
                self.counts.duplicate_suppressed();
                let code = ErrorCode::DuplicateResultUnavailable;
                self.reject(
                    shared,
                    origin,
                    call,
                    code,
                    "request older than the retained window",
                );
                return;
            }
            Err(Refusal::Full) => {
                let code = ErrorCode::ResourceExhausted {
                    limit: LimitField::MaxDedupEntries,
                };
                self.reject(
                    shared,
                    origin,
                    call,
                    code,
                    "dedup table full of running requests",
                );
                return;
            }
        };
        let Some(entry) = shared.registry.get(call.action) else {
            self.finish_now(
                shared,
                key,
                origin,
                call,
                ErrorCode::UnknownAction,
                "action not registered",
                now,
            );
            return;
        };
        if entry.registration.domain != call.domain {
            self.finish_now(
                shared,
                key,
                origin,
                call,
                ErrorCode::UnknownDomain,
                "action runs in another domain",
                now,
            );
            return;
        }
        let request = Request {
            origin,
            call,
            deadline,
            header,
        };
        if entry.inline {
            // On this thread, inside `progress`: everything is borrowed.
            // The job starts now (see `inline_clock`).
            let started = self.inline_clock.max(now);
            let client = &self.client;
            let handler = &*entry.handler;
            let runner = self
                .inline
                .iter()
                .find(|(id, _)| *id == call.domain)
                .map(|(_, runner)| runner);
            match runner.map(|runner| {
                runner.run(|job| serve(shared, handler, client, &request, &bytes, started, job))
            }) {
                Some(Some(outcome)) => {
                    self.served += 1;
                    let finished = shared.clock.now();
                    self.inline_clock = finished;
                    // Served: the buffer can carry the next frame encoded
                    // on this thread (this response's, often).
                    crate::transport::frame_buffers::give(bytes);
                    self.on_completion(shared, origin, call, slot, outcome, finished);
                }
                Some(None) => {
                    let _ = self.dedup.rollback(key);
                    self.reject(
                        shared,
                        origin,
                        call,
                        ErrorCode::ShuttingDown,
                        "domain is shutting down",
                    );
                }
                None => self.finish_now(
                    shared,
                    key,
                    origin,
                    call,
                    ErrorCode::UnknownDomain,
                    "no such domain",
                    now,
                ),
            }
            return;
        }
        // On a worker: the job owns what it needs and reads the clock when
        // it starts. The registry never changes after start, so the worker
        // finds the handler again instead of the job holding a reference.
        let sink = DomainSink {
            domain: call.domain,
        };
        let job = move |job: &JobContext<'_>| -> Result<JobOutput, JobFailure> {
            let Some(client) = context_client(job.drain_context()) else {
                crate::transport::frame_buffers::give(bytes);
                return Err(JobFailure {
                    code: ErrorCode::ShuttingDown,
                    text: "the runtime is gone".into(),
                });
            };
            let shared = &client.shared;
            let started = shared.clock.now();
            let Some(entry) = shared.registry.get(request.call.action) else {
                return Err(JobFailure {
                    code: ErrorCode::UnknownAction,
                    text: "action not registered".into(),
                });
            };
            let output = serve(
                shared,
                &*entry.handler,
                client,
                &request,
                &bytes,
                started,
                job,
            );
            crate::transport::frame_buffers::give(bytes);
            output
        };
        let spare_jobs = &mut self.spare_jobs;
        let submitted = shared.completions.of(call.domain).and_then(|completions| {
            shared.domains.with(call.domain, |domain| {
                // The refused job is dropped here; only whether the domain
                // was full matters.
                domain
                    .try_submit_to_sink(
                        completions,
                        sink,
                        JobKey::Remote { origin, call, slot },
                        job,
                        Some(spare_jobs),
                    )
                    .map_err(|refusal| {
                        matches!(
                            refusal,
                            TrySubmitError::Full(_) | TrySubmitError::CompletionsFull(_)
                        )
                    })
            })
        });
        match submitted {
            Some(Ok(canceller)) => {
                self.served += 1;
                self.running[slot] = Some((key, canceller));
            }
            Some(Err(full)) => {
                // User code never ran: undo the admission so a retry can run.
                let _ = self.dedup.rollback(key);
                let code = if full {
                    ErrorCode::ResourceExhausted {
                        limit: LimitField::MaxActionQueue,
                    }
                } else {
                    ErrorCode::ShuttingDown
                };
                self.reject(shared, origin, call, code, "action queue full");
            }
            None => self.finish_now(
                shared,
                key,
                origin,
                call,
                ErrorCode::UnknownDomain,
                "no such domain",
                now,
            ),
        }
    }

    /// Answers an admitted request with an error without running it, and
    /// records it completed so duplicates get the same answer.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site per error; a struct would only rename them"
    )]
    fn finish_now(
        &mut self,
        shared: &Shared,
        key: DedupKey,
        origin: Rank,
        call: Call,
        code: ErrorCode,
        text: &str,
        now: Instant,
    ) {
        let frame = frames::error(shared.rank, call, code, text, &shared.protocol);
        self.record(key, now, &frame);
        self.respond(shared, origin, frame);
    }

    /// Marks `key` completed with `frame` as its response, retaining it if
    /// the budget allows.
    ///
    /// The response is sent even when the caller cancelled meanwhile: it
    /// may have been sent before the cancellation (the caller then counts
    /// it as late and discards it), and it costs the caller nothing.
    fn record(&mut self, key: DedupKey, now: Instant, frame: &[u8]) {
        if let Ok(DedupCompletion::Retained { slot, .. }) =
            self.dedup.complete(key, now, frame.len() as u64)
        {
            self.cache[slot] = Some(self.buffers.copy(frame));
        }
    }

    /// Drops the response retained in dedup slot `slot`, handing its
    /// buffer back for the next copy.
    fn forget_response(&mut self, slot: usize) {
        if let Some(buffer) = self.cache[slot].take() {
            self.buffers.recycle(buffer);
        }
    }

    /// A cancellation from `origin` of its request `call`.
    pub(crate) fn on_cancel(&mut self, shared: &Shared, origin: Rank, call: Call, now: Instant) {
        let key = DedupKey::new(origin, call.request);
        super::shared::Counters::bump(&shared.counters.cancels_received);
        if !shared.state.accepts_work() && !self.dedup.contains(key) {
            // Draining: no request is admitted any more, so a tombstone
            // would guard nothing (and would outlive the cleared table).
            return;
        }
        match self.dedup.cancel(key, now) {
            Ok(CancelOutcome::Requested { slot }) => {
                if let Some((_, canceller)) = &self.running[slot] {
                    canceller.cancel();
                }
            }
            Ok(_) => {}
            // The tombstone could not be kept: the request, if it arrives,
            // will run; the caller already gave up on it.
            Err(_) => super::shared::Counters::bump(&shared.counters.cancels_dropped),
        }
    }

    /// A remote job finished.
    pub(crate) fn on_completion(
        &mut self,
        shared: &Shared,
        origin: Rank,
        call: Call,
        slot: usize,
        outcome: TaskOutcome<JobOutput, JobFailure>,
        now: Instant,
    ) {
        let key = DedupKey::new(origin, call.request);
        if let Some((_, canceller)) = self.running[slot].take() {
            // The worker let go of the job's block before delivering.
            self.spare_jobs.give(canceller.into_block());
        }
        let frame = match outcome {
            TaskOutcome::Completed(JobOutput::Frame(frame)) => frame,
            TaskOutcome::Completed(JobOutput::Value(_)) => frames::error(
                shared.rank,
                call,
                ErrorCode::ProtocolViolation,
                "unexpected local output",
                &shared.protocol,
            ),
            TaskOutcome::Failed(failure) => {
                let (code, text) = match failure.kind() {
                    TaskFailureKind::Cancelled => {
                        self.counts.cancellation_acknowledged();
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
                frames::error(shared.rank, call, code, &text, &shared.protocol)
            }
        };
        self.record(key, now, &frame);
        self.respond(shared, origin, frame);
    }

    /// `peer` went down: cancel the jobs it asked for (nobody is left to
    /// receive their results) and drop responses queued for it.
    pub(crate) fn on_peer_down(&mut self, peer: Rank) {
        for (key, canceller) in self.running.iter().flatten() {
            if key.origin == peer {
                canceller.cancel();
            }
        }
        self.outbox.retain(|(to, _)| *to != peer);
    }

    /// Drops dedup entries past their TTL (at most `max`).
    pub(crate) fn expire(&mut self, now: Instant, max: usize) -> usize {
        let mut count = 0;
        while count < max {
            let Some(expired) = self.dedup.pop_expired(now) else {
                break;
            };
            self.forget_response(expired.slot);
            count += 1;
        }
        count
    }

    /// Shutdown step 5: forgets all run-scoped dedup state. Running entries
    /// must be gone (their jobs finished) for this to leave nothing.
    pub(crate) fn clear(&mut self) {
        self.dedup.clear();
        self.cache.iter_mut().for_each(|c| *c = None);
        self.buffers.clear();
    }

    /// Requests cancellation of every running remote job (shutdown).
    pub(crate) fn cancel_running(&self) {
        for (_, canceller) in self.running.iter().flatten() {
            canceller.cancel();
        }
    }
}

/// A request admitted for execution, as its job sees it.
struct Request {
    origin: Rank,
    call: Call,
    /// When the caller stops waiting (by this rank's clock).
    deadline: Instant,
    /// The frame's header, validated when it arrived.
    header: Header,
}

/// Runs `handler` on the request `frame` (unless its deadline passed
/// before `started`) and encodes the result frame: the body of every remote
/// job, inline or pooled.
fn serve(
    shared: &Shared,
    handler: &dyn ErasedHandler,
    client: &RuntimeClient,
    request: &Request,
    frame: &[u8],
    started: Instant,
    job: &JobContext<'_>,
) -> Result<JobOutput, JobFailure> {
    let call = request.call;
    if started > request.deadline {
        return Err(JobFailure {
            code: ErrorCode::DeadlineExceeded,
            text: "deadline passed before start".into(),
        });
    }
    let ctx = ActionContext {
        origin: request.origin,
        request: call.request,
        action: call.action,
        domain: call.domain,
        job: Some(job),
        client,
    };
    // Validated when it arrived; only viewed again here.
    let frame = FrameRef::from_decoded(request.header, frame).ok_or_else(|| JobFailure {
        code: ErrorCode::ProtocolViolation,
        text: "request frame changed length".into(),
    })?;
    crate::action::with_scratch_writer(|output| {
        match handler.run_wire(SegmentReader::from_frame(frame.segments()), &ctx, output) {
            Ok(()) => frames::with_payload(
                shared.rank,
                dinah_core::wire::Message::Result { call },
                output,
                &shared.protocol,
            )
            .map(JobOutput::Frame)
            .map_err(|error| JobFailure {
                code: ErrorCode::ResourceExhausted {
                    limit: limit_of(&frames::encode_error(error)),
                },
                text: "result does not fit the protocol limits".into(),
            }),
            Err(error) => Err(JobFailure::from(error)),
        }
    })
}

fn limit_of(error: &super::error::RuntimeError) -> LimitField {
    match error {
        super::error::RuntimeError::ResourceExhausted { limit, .. } => *limit,
        _ => LimitField::MaxFrameBytes,
    }
}

/// Routes one completion to the receiver or to the local caller.
pub(crate) fn route_completion(
    receiver: &mut Receiver,
    shared: &Shared,
    completion: Completion<JobKey, JobOutput, JobFailure>,
    now: Instant,
) {
    match completion.key {
        JobKey::Remote { origin, call, slot } => {
            receiver.on_completion(shared, origin, call, slot, completion.outcome, now);
        }
        JobKey::Local { request } => {
            let outcome = completion.outcome;
            let counts = &mut receiver.counts;
            let result = shared.calls.complete(request, |info| {
                let outcome = local_outcome(*info, outcome);
                match &outcome {
                    super::calls::CallOutcome::Failed(_) => counts.failed(),
                    _ => counts.completed(),
                }
                outcome
            });
            if result.is_err() {
                receiver.counts.late_result_discarded();
            }
        }
    }
}

fn local_outcome(
    info: super::calls::CallInfo,
    outcome: TaskOutcome<JobOutput, JobFailure>,
) -> super::calls::CallOutcome {
    let call = info.call;
    use super::calls::CallOutcome;
    use super::error::{FailureKind, RuntimeError};
    match outcome {
        TaskOutcome::Completed(JobOutput::Value(value)) => CallOutcome::Local(value),
        TaskOutcome::Completed(JobOutput::Frame(_)) => CallOutcome::Failed(RuntimeError::Cancelled),
        TaskOutcome::Failed(failure) => CallOutcome::Failed(match failure.kind() {
            TaskFailureKind::Cancelled => RuntimeError::Cancelled,
            TaskFailureKind::Panicked => RuntimeError::Remote {
                kind: FailureKind::Panicked,
                text: failure.panic_message().unwrap_or("panicked").to_owned(),
            },
            _ => match failure.into_error() {
                Some(JobFailure { code, text }) => RuntimeError::from_wire(
                    code,
                    &text,
                    call.action,
                    call.domain,
                    info.deadline_after,
                ),
                None => RuntimeError::Remote {
                    kind: FailureKind::Returned,
                    text: String::new(),
                },
            },
        }),
    }
}
