//! `RuntimeClient`: issuing calls from any thread.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use dinah_core::wire::{Call, Channel, ErrorCode, RelativeDeadline, TraceId};
use dinah_core::{ActionId, LimitField, Rank, RuntimeState, WorldSize};

use super::RemoteFuture;
use super::calls::{CallInfo, Ticket};
use super::error::{RuntimeError, Side};
use super::frames;
use super::registry::ActionContext;
use super::shared::{DomainSink, JobFailure, JobKey, JobOutput, Shared, context_client};
use crate::action::Action;
use crate::domain::TrySubmitError;
use crate::transport::{DownReason, PeerStatus, SendErrorKind, TransportError};

/// Options of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// How long the call may take; `None` uses
    /// [`RuntimeLimits::default_deadline`](dinah_core::RuntimeLimits::default_deadline).
    /// Must be non-zero.
    pub deadline: Option<Duration>,
    /// A correlation ID echoed in the result, for tracing across ranks.
    pub trace: Option<TraceId>,
}

impl SpawnOptions {
    /// Options with this deadline.
    pub fn deadline(deadline: Duration) -> Self {
        Self {
            deadline: Some(deadline),
            trace: None,
        }
    }

    /// These options with a trace ID.
    pub fn with_trace(mut self, trace: TraceId) -> Self {
        self.trace = Some(trace);
        self
    }
}

/// Issues calls on a runtime; cloneable, `Send + Sync`, usable from any
/// thread including inside handlers.
///
/// Calls made here are progressed by the runtime's owner thread
/// ([`Runtime::progress`](super::Runtime::progress) /
/// [`block_on`](super::Runtime::block_on)); a client never blocks.
#[derive(Clone)]
pub struct RuntimeClient {
    pub(crate) shared: Arc<Shared>,
}

impl RuntimeClient {
    /// This rank.
    pub fn rank(&self) -> Rank {
        self.shared.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.shared.world
    }

    /// The runtime's event counters (readable from any thread).
    ///
    /// Events on other threads (calls issued, their bytes) are counted as
    /// they happen. The owner thread counts its own events (frames
    /// received, results, duplicates, responses sent) during a round of
    /// [`Runtime::progress`](crate::Runtime::progress) and publishes them
    /// when the round ends, so a reading from another thread may miss the
    /// events of a round still running. [`Runtime::stats`](crate::Runtime::stats)
    /// on the owner thread, and the shutdown report, include them.
    pub fn metrics(&self) -> dinah_core::MetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// Cancellations this rank has received from peers since the start
    /// (for calls queued, running or not yet seen here).
    pub fn cancels_received(&self) -> u64 {
        self.shared
            .counters
            .cancels_received
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Calls `action` on `rank` with the default deadline.
    ///
    /// The call is issued now (and fails fast, through the future, if a
    /// bound is full or the target is unreachable); its result arrives
    /// through the returned future. Dropping the future cancels the call.
    pub fn spawn_on<A: Action>(&self, rank: Rank, action: A) -> RemoteFuture<A::Output> {
        self.spawn_on_with(rank, action, SpawnOptions::default())
    }

    /// Calls `action` on `rank` with `options`.
    pub fn spawn_on_with<A: Action>(
        &self,
        rank: Rank,
        action: A,
        options: SpawnOptions,
    ) -> RemoteFuture<A::Output> {
        match self.issue(rank, action, options) {
            Ok(ticket) => RemoteFuture::pending(Arc::clone(&self.shared), ticket),
            Err(error) => RemoteFuture::failed(error),
        }
    }

    fn issue<A: Action>(
        &self,
        rank: Rank,
        action: A,
        options: SpawnOptions,
    ) -> Result<Ticket, RuntimeError> {
        let shared = &*self.shared;
        let state = shared.state.load();
        if state != RuntimeState::Running {
            return Err(RuntimeError::State { state });
        }
        if !shared.world.contains(rank) {
            return Err(RuntimeError::NoSuchRank { rank });
        }
        let action_id = ActionId::new(A::ID).map_err(|_| RuntimeError::UnknownAction {
            action: ActionId::MIN,
        })?;
        let Some(entry) = shared.registry.get(action_id) else {
            return Err(RuntimeError::UnknownAction { action: action_id });
        };
        let after = options.deadline.unwrap_or(shared.limits.default_deadline);
        let relative =
            RelativeDeadline::from_duration(after).ok_or(RuntimeError::InvalidDeadline)?;
        let deadline = shared
            .clock
            .now()
            .checked_add(after)
            .ok_or(RuntimeError::InvalidDeadline)?;
        let request =
            shared
                .request_ids
                .allocate()
                .map_err(|_| RuntimeError::ResourceExhausted {
                    limit: LimitField::MaxPendingCalls,
                    side: Side::Local,
                })?;
        let call = Call {
            request,
            action: action_id,
            domain: entry.registration.domain,
            trace: options.trace,
        };
        let info = CallInfo {
            peer: rank,
            call,
            deadline_after: after,
        };
        if rank == shared.rank {
            return self.issue_local(info, deadline, action);
        }
        if shared.handle.peer_status(rank) == PeerStatus::Down {
            return Err(transport_down(shared, rank));
        }
        let frame = crate::action::with_scratch_writer(|input| {
            action.encode(input).map_err(RuntimeError::Codec)?;
            frames::request(shared.rank, call, relative, input, &shared.protocol)
                .map_err(frames::encode_error)
        })?;
        let ticket = shared.calls.begin(info, deadline)?;
        match shared.send(rank, Channel::Action, frame) {
            Ok(()) => {
                shared.metrics.record_submitted();
                Ok(ticket)
            }
            Err(refused) => {
                // Never sent: forget the call without a cancellation.
                let _ = shared.calls.abandon(ticket);
                Err(match refused.kind() {
                    SendErrorKind::QueueFull { .. } => RuntimeError::ResourceExhausted {
                        limit: LimitField::MaxSendTickets,
                        side: Side::Local,
                    },
                    SendErrorKind::RetainedBytes { .. } => RuntimeError::ResourceExhausted {
                        limit: LimitField::MaxRetainedBytes,
                        side: Side::Local,
                    },
                    SendErrorKind::PeerDown { .. } => transport_down(shared, rank),
                    SendErrorKind::NoSuchRank { .. } => RuntimeError::NoSuchRank { rank },
                    _ => RuntimeError::State {
                        state: shared.state.load(),
                    },
                })
            }
        }
    }

    /// A call to this rank: no wire, no codec; the typed value goes to the
    /// domain and the typed output comes back.
    fn issue_local<A: Action>(
        &self,
        info: CallInfo,
        deadline: dinah_core::Instant,
        action: A,
    ) -> Result<Ticket, RuntimeError> {
        let shared = &*self.shared;
        let call = info.call;
        let ticket = shared.calls.begin(info, deadline)?;
        let origin = shared.rank;
        // As for remote jobs, the worker reaches the runtime (and the
        // handler, through the registry, which never changes after start)
        // through its domain's context, not a reference the job carries.
        let job = move |job: &crate::domain::JobContext<'_>| -> Result<JobOutput, JobFailure> {
            let Some(client) = context_client(job.drain_context()) else {
                return Err(JobFailure {
                    code: ErrorCode::ShuttingDown,
                    text: "the runtime is gone".into(),
                });
            };
            let entry = client
                .shared
                .registry
                .get(call.action)
                .expect("checked by the caller");
            let ctx = ActionContext {
                origin,
                request: call.request,
                action: call.action,
                domain: call.domain,
                job: Some(job),
                client,
            };
            entry
                .handler
                .run_local(Box::new(action), &ctx)
                .map(JobOutput::Value)
                .map_err(JobFailure::from)
        };
        let key = JobKey::Local {
            request: call.request,
        };
        let completions = shared.completions.of(call.domain);
        let submitted = completions.and_then(|completions| {
            shared.domains.with(call.domain, |domain| {
                let sink = DomainSink {
                    domain: call.domain,
                };
                domain
                    .try_submit_to_sink(completions, sink, key, job, None)
                    .map_err(|refusal| {
                        matches!(
                            refusal,
                            TrySubmitError::Full(_) | TrySubmitError::CompletionsFull(_)
                        )
                    })
            })
        });
        let refusal = match submitted {
            Some(Ok(canceller)) => {
                shared.metrics.record_submitted();
                shared.calls.attach_canceller(ticket, canceller);
                return Ok(ticket);
            }
            Some(Err(true)) => RuntimeError::ResourceExhausted {
                limit: LimitField::MaxActionQueue,
                side: Side::Local,
            },
            Some(Err(false)) => RuntimeError::ShuttingDown,
            None => RuntimeError::UnknownDomain {
                domain: call.domain,
            },
        };
        let _ = shared.calls.abandon(ticket);
        Err(refusal)
    }
}

/// The error for a call to a peer the transport reports down.
pub(crate) fn transport_down(shared: &Shared, peer: Rank) -> RuntimeError {
    let reason = shared
        .handle
        .down_reason(peer)
        .unwrap_or(DownReason::LocalClose);
    RuntimeError::Transport {
        peer,
        error: TransportError::PeerDown { peer, reason },
    }
}

impl fmt::Debug for RuntimeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeClient")
            .field("rank", &self.shared.rank)
            .field("world", &self.shared.world)
            .field("state", &self.shared.state.load())
            .finish()
    }
}
