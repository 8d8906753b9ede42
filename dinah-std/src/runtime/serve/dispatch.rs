//! Dispatch: an admitted request runs inline on the owner thread, or as a
//! job on a worker of its domain.
//!
//! Pooled jobs go through [`job::submit`](crate::runtime::job::submit),
//! the same function calls to this rank use. The owner keeps each running
//! job's block by its dedup slot, to cancel it when its origin asks (or
//! goes down, or the runtime shuts down) and, once its outcome is in, to
//! write the next job into it.

use std::sync::Arc;

use dinah_core::wire::Call;
use dinah_core::{DomainId, Instant, Rank, TaskOutcome};

use crate::domain::{CancelTarget, InlineRunner, JobContext, SpareJobs};
use crate::runtime::RuntimeClient;
use crate::runtime::hub::Hub;
use crate::runtime::job::{self, ActionJob, Refusal, Request};
use crate::runtime::job_outcome::{JobFailure, JobKey, ResultFrame};
use crate::runtime::registry::Entry;
use crate::transport::Frame;

/// The most finished job blocks kept for reuse (fewer when the action
/// queue is shorter): a burst of completions refills the next burst of
/// submissions without the allocator.
const SPARE_JOBS: usize = 1024;

/// How a dispatched request went.
pub(crate) enum Dispatched {
    /// Queued on a worker; its outcome arrives as a completion.
    Pooled,
    /// Ran inline; here is its outcome.
    Inline(TaskOutcome<ResultFrame, JobFailure>),
    /// Not run.
    Refused(Refusal),
}

/// A remote job in flight, by dedup slot: its block and who asked.
struct Running {
    job: Arc<ActionJob>,
    origin: Rank,
    call: Call,
    /// When its caller stops waiting, on this rank's clock.
    until: Instant,
}

/// The dispatching side (see the module docs).
pub(crate) struct Dispatch {
    running: Box<[Option<Running>]>,
    spare: SpareJobs<ActionJob>,
    /// Per domain, its runner of inline handlers (reached without the lock
    /// on the domain list).
    inline: Vec<(DomainId, InlineRunner)>,
    /// The clock as read when the last inline handler finished. The next
    /// inline request starts at the later of this and its progress round's
    /// `now`, which saves a clock read per inline request: between the two
    /// only the runtime's bookkeeping ran, never user code.
    inline_clock: Instant,
    /// The client inline handlers see in their context.
    client: RuntimeClient,
}

impl Dispatch {
    /// For `slots` dedup slots, with the domains' inline runners.
    pub(crate) fn new(hub: &Arc<Hub>, slots: usize) -> Self {
        let mut inline = Vec::new();
        hub.domains
            .each(|id, domain| inline.push((id, domain.inline_runner())));
        let keep = (hub.limits.max_action_queue as usize).min(SPARE_JOBS);
        Self {
            running: (0..slots).map(|_| None).collect(),
            spare: SpareJobs::new(keep),
            inline,
            inline_clock: Instant::ZERO,
            client: RuntimeClient {
                hub: Arc::clone(hub),
            },
        }
    }

    /// Runs the request admitted in dedup slot `slot` (its frame is
    /// `frame`): inline if `entry` says so, else on its domain's workers.
    pub(crate) fn run(
        &mut self,
        hub: &Hub,
        entry: &Entry,
        slot: usize,
        request: Request,
        frame: Frame,
        now: Instant,
    ) -> Dispatched {
        let domain = request.call.domain;
        if entry.inline {
            return self.run_inline(entry, &request, frame, now);
        }
        let key = JobKey::Remote { slot };
        let spare = &mut self.spare;
        let submitted = hub.domains.with(domain, |pool| {
            let completions = hub.completions.of(domain).ok_or(Refusal::NoSuchDomain)?;
            job::submit(pool, completions, key, request, frame, Some(spare))
        });
        match submitted.unwrap_or(Err(Refusal::NoSuchDomain)) {
            Ok(job) => {
                self.running[slot] = Some(Running {
                    job,
                    origin: request.origin,
                    call: request.call,
                    until: request.deadline,
                });
                Dispatched::Pooled
            }
            Err(refusal) => Dispatched::Refused(refusal),
        }
    }

    /// On this thread, inside `progress`: everything is borrowed, and the
    /// job starts now (see `inline_clock`).
    fn run_inline(
        &mut self,
        entry: &Entry,
        request: &Request,
        mut frame: Frame,
        now: Instant,
    ) -> Dispatched {
        let domain = request.call.domain;
        let started = self.inline_clock.max(now);
        let client = &self.client;
        let handler = &*entry.handler;
        let run =
            |job: &JobContext<'_>| job::run(handler, client, request, &mut frame, started, job);
        let outcome = match self.inline.iter().find(|(id, _)| *id == domain) {
            Some((_, runner)) => runner.run(run),
            // The runtime's own actions need no domain.
            None if entry.builtin => Some(crate::domain::run_detached(domain, run)),
            None => return Dispatched::Refused(Refusal::NoSuchDomain),
        };
        let Some(outcome) = outcome else {
            crate::transport::frame_buffers::give_frame(frame);
            return Dispatched::Refused(Refusal::ShuttingDown);
        };
        self.inline_clock = self.client.hub.clock.now();
        // Served: the buffer can carry the next frame encoded on this
        // thread (this response's, often).
        crate::transport::frame_buffers::give_frame(frame);
        Dispatched::Inline(outcome)
    }

    /// The job of dedup slot `slot` delivered its outcome: keeps its block
    /// for the next job and returns who asked (origin, call, and when it
    /// stops waiting).
    pub(crate) fn finished(&mut self, slot: usize) -> Option<(Rank, Call, Instant)> {
        let running = self.running[slot].take()?;
        let asked = (running.origin, running.call, running.until);
        self.spare.give(running.job);
        Some(asked)
    }

    /// How many job blocks were allocated, and how many reused, since the
    /// start.
    pub(crate) fn job_blocks(&self) -> (u64, u64) {
        self.spare.made()
    }

    /// The clock reading at which the last inline handler finished.
    pub(crate) fn inline_clock(&self) -> Instant {
        self.inline_clock
    }

    /// Asks the job of dedup slot `slot` to stop.
    pub(crate) fn cancel(&self, hub: &Hub, slot: usize) {
        if let Some(running) = &self.running[slot] {
            cancel(hub, running);
        }
    }

    /// Asks every job `origin` asked for to stop (it went down: nobody is
    /// left to receive their results).
    pub(crate) fn cancel_from(&self, hub: &Hub, origin: Rank) {
        self.running
            .iter()
            .flatten()
            .filter(|running| running.origin == origin)
            .for_each(|running| cancel(hub, running));
    }

    /// Asks every running job to stop (shutdown).
    pub(crate) fn cancel_all(&self, hub: &Hub) {
        self.running
            .iter()
            .flatten()
            .for_each(|running| cancel(hub, running));
    }
}

/// Requests cancellation of a running job through its domain (which
/// records it when instrumented), or directly once the domain was taken
/// for shutdown.
fn cancel(hub: &Hub, running: &Running) {
    let job: &dyn CancelTarget = &*running.job;
    if hub
        .domains
        .with(running.call.domain, |domain| domain.cancel_job(job))
        .is_none()
    {
        job.cancel_flag().request();
    }
}

#[cfg(test)]
mod tests;
