//! The action job: one call's handler, run for a peer or for this rank.
//!
//! A call to this rank and a request from a peer are the same job: a
//! request frame (encoded by the caller, or received), decoded by the
//! handler's codec, answered with a result frame. [`submit`] is the one
//! way either reaches a worker domain; [`run`] is the body both run,
//! pooled or inline. The job is a typed block ([`ActionJob`]) that the
//! domain queues and the submitter keeps to cancel it (and, on the owner
//! thread, to reuse once it finished). It reaches the runtime through the
//! domain's [`Context`], never through a counted reference of its own.

use std::fmt;
use std::sync::Arc;

use dinah_core::wire::{Call, ErrorCode, Header, Message};
use dinah_core::{CancelFlag, Instant, Rank, TaskFailure, TaskId, TaskOutcome};

use super::RuntimeClient;
use super::context::ActionContext;
use super::frames;
use super::job_outcome::{Completions, JobFailure, JobKey, ResultFrame};
use super::registry::ErasedHandler;
use crate::action::FrameKind;
use crate::domain::{
    CancelTarget, Completion, Context, Domain, DomainShared, JobContext, JobCore, QueuedJob,
    SpareJobs, SubmitRefusal, Work, execute,
};
use crate::transport::Frame;

/// A call as its job sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    /// Who called.
    pub(crate) origin: Rank,
    pub(crate) call: Call,
    /// When the caller stops waiting, on this rank's clock.
    pub(crate) deadline: Instant,
    /// The request frame's header, as validated or encoded.
    pub(crate) header: Header,
}

/// Why [`submit`] refused a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The domain's queue (or its completion queue) is full.
    QueueFull,
    /// The domain is shutting down.
    ShuttingDown,
    /// The runtime has no such domain (any more).
    NoSuchDomain,
}

/// What an action job needs, taken by whoever runs it.
struct Parts {
    key: JobKey,
    request: Request,
    frame: Frame,
}

/// One action job: the block the domain queues and the submitter keeps.
pub(crate) struct ActionJob {
    core: JobCore,
    work: Work<Parts>,
}

impl fmt::Debug for ActionJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionJob")
            .field("task", &self.core.task)
            .finish_non_exhaustive()
    }
}

impl CancelTarget for ActionJob {
    fn cancel_flag(&self) -> &CancelFlag {
        &self.core.cancel
    }

    fn task_id(&self) -> TaskId {
        self.core.task
    }
}

impl QueuedJob for ActionJob {
    fn run(self: Arc<Self>, domain: &DomainShared, context: Context<'_>) {
        let Parts {
            key,
            request,
            mut frame,
        } = self.work.take();
        let task = self.core.task;
        let Some(client) = context else {
            // The runtime is gone: nobody is left to answer.
            crate::transport::frame_buffers::give_frame(frame);
            return;
        };
        let hub = &*client.hub;
        let outcome = execute(domain, task, &self.core.cancel, |job| {
            let Some(entry) = hub.registry.get(request.call.action) else {
                return Err(JobFailure::new(
                    ErrorCode::UnknownAction,
                    "action not registered",
                ));
            };
            let started = hub.clock.now();
            run(&*entry.handler, client, &request, &mut frame, started, job)
        });
        // Served: the buffer can carry the next frame encoded on this
        // worker.
        crate::transport::frame_buffers::give_frame(frame);
        // Let go of the block before delivering: the submitter, who
        // allocated it, is then usually the one who frees or reuses it.
        drop(self);
        deliver(client, request, Completion { key, task, outcome });
    }

    fn cancel(self: Arc<Self>, domain: &DomainShared, context: Context<'_>) {
        let Parts {
            key,
            request,
            frame,
        } = self.work.take();
        crate::transport::frame_buffers::give_frame(frame);
        let task = self.core.task;
        domain.cancelled_by_shutdown(task, Some(&self.core.cancel));
        drop(self);
        if let Some(client) = context {
            let outcome = TaskOutcome::Failed(TaskFailure::cancelled());
            deliver(client, request, Completion { key, task, outcome });
        }
    }
}

/// Pushes a finished job's outcome into its domain's completion queue,
/// where its admission reserved a slot.
fn deliver(
    client: &RuntimeClient,
    request: Request,
    completion: Completion<JobKey, ResultFrame, JobFailure>,
) {
    if let Some(queue) = client.hub.completions.of(request.call.domain) {
        Completions::deliver(queue, completion);
    }
}

/// Submits the job of `request` (its frame is `frame`) to `pool`, whose
/// completion queue is `completions`: the one way an action job reaches a
/// worker, for calls from peers and calls to this rank alike. With
/// `spare`, the job is written into a finished block kept there.
///
/// Returns the queued job, through which it is cancelled.
///
/// # Errors
///
/// A [`Refusal`] if the domain or its completion queue is full, or the
/// domain is shutting down; the job never ran.
pub(crate) fn submit(
    pool: &Domain,
    completions: &Completions,
    key: JobKey,
    request: Request,
    frame: Frame,
    mut spare: Option<&mut SpareJobs<ActionJob>>,
) -> Result<Arc<ActionJob>, Refusal> {
    let work = Parts {
        key,
        request,
        frame,
    };
    let queued = pool.try_submit_job(completions, |core| {
        let job = ActionJob {
            core,
            work: Work::new(work),
        };
        match spare.as_deref_mut() {
            Some(spare) => spare.make(job),
            None => Arc::new(job),
        }
    });
    queued.map_err(|refused| {
        crate::transport::frame_buffers::give_frame(refused.job.work.take().frame);
        if let Some(spare) = spare {
            spare.give(refused.job);
        }
        match refused.reason {
            SubmitRefusal::Full | SubmitRefusal::CompletionsFull => Refusal::QueueFull,
            SubmitRefusal::ShuttingDown => Refusal::ShuttingDown,
        }
    })
}

/// Runs `handler` on the request in `frame` (unless its deadline passed
/// before `started`) and encodes the result frame: the body of every
/// action job, pooled or inline.
pub(crate) fn run(
    handler: &dyn ErasedHandler,
    client: &RuntimeClient,
    request: &Request,
    frame: &mut Frame,
    started: Instant,
    job: &JobContext<'_>,
) -> Result<ResultFrame, JobFailure> {
    let hub = &*client.hub;
    let call = request.call;
    if started > request.deadline {
        return Err(JobFailure::new(
            ErrorCode::DeadlineExceeded,
            "deadline passed before start",
        ));
    }
    let ctx = ActionContext {
        origin: request.origin,
        request: call.request,
        action: call.action,
        domain: call.domain,
        trace: call.trace,
        deadline: request.deadline,
        job: Some(job),
        client,
    };
    // Validated when it arrived (or encoded here); only viewed again.
    let input = frames::payload(request.header, frame).ok_or_else(|| {
        JobFailure::new(ErrorCode::ProtocolViolation, "request frame changed length")
    })?;
    crate::action::with_frame_writer(
        call.action.get(),
        FrameKind::Result,
        |output| {
            handler
                .run_wire(input, &ctx, output)
                .map_err(JobFailure::from)
        },
        |output| {
            let message = Message::Result { call };
            frames::with_payload(hub.rank, message, output, &hub.protocol).map_err(|error| {
                let limit = frames::limit_of(error);
                JobFailure::new(
                    ErrorCode::ResourceExhausted { limit },
                    "result does not fit the protocol limits",
                )
            })
        },
    )
}
