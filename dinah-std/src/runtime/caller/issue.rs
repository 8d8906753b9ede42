//! Issuing calls: [`RuntimeClient::spawn_on`] and its options.

use std::sync::Arc;
use std::time::Duration;

use dinah_core::wire::{
    Call, Channel, DecodeContext, HEADER_LEN, Header, RelativeDeadline, TraceId, stamp_request_id,
};
use dinah_core::{ActionId, Instant, LimitField, Rank, RequestId, RuntimeState};

use super::RemoteFuture;
use super::calls::{BeginError, CallInfo, Ticket};
use crate::action::Action;
use crate::domain::JobCanceller;
use crate::runtime::RuntimeClient;
use crate::runtime::error::{RuntimeError, Side};
use crate::runtime::frames;
use crate::runtime::hub::{Counters, Hub};
use crate::runtime::job::{self, Refusal, Request};
use crate::runtime::job_outcome::JobKey;
use crate::transport::{DownReason, PeerStatus, SendErrorKind, TransportError, TrySendError};

/// Options of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// How long the call may take; `None` uses
    /// [`RuntimeLimits::default_deadline`](dinah_core::RuntimeLimits::default_deadline).
    /// Must be non-zero.
    pub deadline: Option<Duration>,
    /// A correlation ID the handler sees
    /// ([`ActionContext::trace`](crate::ActionContext::trace)) and the
    /// caller finds in a handler's failure, for tracing across ranks.
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

impl RuntimeClient {
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
            Ok(ticket) => {
                self.hub.metrics.record_submitted();
                RemoteFuture::pending(Arc::clone(&self.hub), ticket)
            }
            Err(error) => {
                Counters::bump(&self.hub.counters.calls_refused);
                RemoteFuture::failed(error)
            }
        }
    }

    /// Checks, encodes and sends (or, to this rank, submits) one call.
    fn issue<A: Action>(
        &self,
        rank: Rank,
        action: A,
        options: SpawnOptions,
    ) -> Result<Ticket, RuntimeError> {
        let hub = &*self.hub;
        let state = hub.state.load();
        if state != RuntimeState::Running {
            return Err(RuntimeError::State { state });
        }
        if !hub.world.contains(rank) {
            return Err(RuntimeError::NoSuchRank { rank });
        }
        let action_id = ActionId::new(A::ID).map_err(|_| RuntimeError::UnknownAction {
            action: ActionId::MIN,
        })?;
        let Some(entry) = hub.registry.get(action_id) else {
            return Err(RuntimeError::UnknownAction { action: action_id });
        };
        let after = options.deadline.unwrap_or(hub.limits.default_deadline);
        let relative =
            RelativeDeadline::from_duration(after).ok_or(RuntimeError::InvalidDeadline)?;
        let deadline = hub
            .clock
            .now()
            .checked_add(after)
            .ok_or(RuntimeError::InvalidDeadline)?;
        if rank != hub.rank {
            match hub.handle.peer_status(rank) {
                PeerStatus::Down => return Err(transport_down(hub, rank)),
                // It said goodbye: it runs no new work, and once it closes
                // nobody would answer.
                PeerStatus::Leaving => return Err(RuntimeError::ShuttingDown),
                PeerStatus::Connecting | PeerStatus::Up => {}
            }
        }
        // The ID is written in when the call is recorded (send order); the
        // frame is encoded here, outside every lock, since user code may
        // take its time.
        let call = Call {
            request: RequestId::MIN,
            action: action_id,
            domain: entry.registration.domain,
            trace: options.trace,
        };
        let frame = crate::action::with_scratch_writer(|input| {
            action.encode(input).map_err(RuntimeError::Codec)?;
            frames::request(hub.rank, call, relative, input, &hub.protocol)
                .map_err(frames::encode_error)
        })?;
        let info = CallInfo {
            peer: rank,
            call,
            deadline_after: after,
        };
        if rank == hub.rank {
            return self.issue_local(info, deadline, frame);
        }
        let len = frame.len() as u64;
        let begun = hub.calls.begin(info, deadline, |id| {
            let mut frame = frame;
            stamp_request_id(&mut frame, id).expect("a request frame was just encoded");
            hub.handle.try_send_quiet(rank, Channel::Action, frame)
        });
        match begun {
            Ok((ticket, _)) => {
                hub.handle.wakeup().wake();
                hub.metrics.record_bytes_sent(len);
                Ok(ticket)
            }
            Err(BeginError::Send(refused)) => Err(send_refusal(hub, rank, refused)),
            Err(BeginError::Full) => Err(exhausted(LimitField::MaxPendingCalls)),
            Err(BeginError::Exhausted) => Err(exhausted(LimitField::MaxPendingCalls)),
        }
    }

    /// A call to this rank: the same job a request from a peer runs (its
    /// input and output go through the codec), submitted from this thread
    /// to the action's domain; no transport, no dedup.
    fn issue_local(
        &self,
        info: CallInfo,
        deadline: Instant,
        mut frame: Vec<u8>,
    ) -> Result<Ticket, RuntimeError> {
        let hub = &*self.hub;
        let begun = hub.calls.begin(info, deadline, |_| Ok::<(), ()>(()));
        let (ticket, id) = match begun {
            Ok(begun) => begun,
            Err(_) => return Err(exhausted(LimitField::MaxPendingCalls)),
        };
        stamp_request_id(&mut frame, id).expect("a request frame was just encoded");
        // The job reads the frame as one that arrived: through its header.
        let ctx = DecodeContext::new(Channel::Action, hub.rank, hub.world, hub.protocol)
            .expect("validated limits, a rank of the world");
        let header = Header::decode(&frame[..HEADER_LEN], &ctx).expect("a frame this rank encoded");
        let request = Request {
            origin: hub.rank,
            call: Call {
                request: id,
                ..info.call
            },
            deadline,
            header,
        };
        let domain = request.call.domain;
        let submitted = hub.domains.with(domain, |pool| {
            let completions = hub.completions.of(domain).ok_or(Refusal::NoSuchDomain)?;
            let key = JobKey::Local { request: id };
            job::submit(pool, completions, key, request, frame, None)
                .map(|job| JobCanceller::new(job, pool.id(), pool.instrumentation().cloned()))
        });
        match submitted.unwrap_or(Err(Refusal::NoSuchDomain)) {
            Ok(canceller) => {
                hub.calls.attach_canceller(ticket, canceller);
                Ok(ticket)
            }
            Err(refusal) => {
                // Never ran: forget the call without a cancellation.
                let _ = hub.calls.abandon(ticket);
                Err(match refusal {
                    Refusal::QueueFull => exhausted(LimitField::MaxActionQueue),
                    Refusal::ShuttingDown => RuntimeError::ShuttingDown,
                    Refusal::NoSuchDomain => RuntimeError::UnknownDomain { domain },
                })
            }
        }
    }
}

/// A bound of this rank was full.
fn exhausted(limit: LimitField) -> RuntimeError {
    RuntimeError::ResourceExhausted {
        limit,
        side: Side::Local,
    }
}

/// The error for a request the transport refused to queue.
fn send_refusal(hub: &Hub, peer: Rank, refused: TrySendError) -> RuntimeError {
    match refused.kind() {
        SendErrorKind::QueueFull { .. } => exhausted(LimitField::MaxSendTickets),
        SendErrorKind::RetainedBytes { .. } => exhausted(LimitField::MaxRetainedBytes),
        SendErrorKind::PeerDown { .. } => transport_down(hub, peer),
        SendErrorKind::NoSuchRank { .. } => RuntimeError::NoSuchRank { rank: peer },
        _ => RuntimeError::State {
            state: hub.state.load(),
        },
    }
}

/// The error for a call to a peer the transport reports down.
pub(crate) fn transport_down(hub: &Hub, peer: Rank) -> RuntimeError {
    let reason = hub
        .handle
        .down_reason(peer)
        .unwrap_or(DownReason::LocalClose);
    RuntimeError::Transport {
        peer,
        error: TransportError::PeerDown { peer, reason },
    }
}
