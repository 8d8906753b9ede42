//! Issuing calls: [`RuntimeClient::spawn_on`] and its options.

use std::sync::Arc;
use std::time::Duration;

use dinah_core::wire::{
    Call, Channel, DecodeContext, HEADER_LEN, Header, RelativeDeadline, TraceId,
};
use dinah_core::{ActionId, LimitField, Rank, RequestId, RuntimeState};

use super::RemoteFuture;
use super::calls::{BeginError, Begun, CallInfo, LocalRelease, Pacing, Ticket};
use crate::action::{Action, FrameKind};
use crate::domain::JobCanceller;
use crate::runtime::RuntimeClient;
use crate::runtime::error::{RuntimeError, Side};
use crate::runtime::frames;
use crate::runtime::hub::{Counters, Hub};
use crate::runtime::job::{self, Refusal, Request};
use crate::runtime::job_outcome::JobKey;
use crate::transport::{
    DownReason, PeerStatus, SendErrorKind, TransportError, TransportHandle, TrySendError,
};

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
    /// What happens when this rank already has its share of the target
    /// domain's capacity in flight.
    pub backpressure: Backpressure,
}

/// What a call does when this rank already keeps its share of the target
/// domain's admission capacity in flight (see the runtime guide's "flow
/// control" section).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backpressure {
    /// The call waits on this rank, in order, and is sent as soon as an
    /// earlier call to the same rank and domain ends; its deadline runs
    /// while it waits.
    #[default]
    Wait,
    /// The call fails at once with
    /// [`RuntimeError::ResourceExhausted`] (`max_action_queue`, on the
    /// target's side): the target would have no room for it. Nothing is
    /// sent.
    FailFast,
}

impl SpawnOptions {
    /// Options with this deadline.
    pub fn deadline(deadline: Duration) -> Self {
        Self {
            deadline: Some(deadline),
            ..Self::default()
        }
    }

    /// These options with a trace ID.
    pub fn with_trace(mut self, trace: TraceId) -> Self {
        self.trace = Some(trace);
        self
    }

    /// These options with `backpressure`.
    pub fn with_backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = backpressure;
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
        let frame = crate::action::with_frame_writer(
            action_id.get(),
            FrameKind::Request,
            |input| action.encode_owned(input).map_err(RuntimeError::Codec),
            |input| {
                frames::request(hub.rank, call, relative, input, &hub.protocol)
                    .map_err(frames::encode_error)
            },
        )?;
        let info = CallInfo {
            peer: rank,
            call,
            deadline_after: after,
        };
        let pacing = match (entry.builtin, options.backpressure) {
            // The runtime's own actions run inline: they take no place in
            // a domain.
            (true, _) => Pacing::None,
            (false, Backpressure::Wait) => Pacing::Wait,
            (false, Backpressure::FailFast) => Pacing::FailFast,
        };
        let len = frame.len() as u64;
        let begun = hub.calls.begin(info, deadline, frame, pacing);
        on_begun(hub, rank, len, begun)
    }
}

/// What [`issue`](RuntimeClient::issue) returns once the call table took
/// (or refused) a call of `len` encoded bytes to `rank`: its ticket, after
/// waking the owner for a frame sent or submitting a call to this rank;
/// or the refusal as the runtime's error.
fn on_begun(
    hub: &Hub,
    rank: Rank,
    len: u64,
    begun: Result<Begun, BeginError>,
) -> Result<Ticket, RuntimeError> {
    match begun {
        Ok(Begun::Sent(ticket)) => {
            hub.handle.wakeup().wake();
            hub.metrics.record_bytes_sent(len);
            Ok(ticket)
        }
        Ok(Begun::Waiting(ticket)) => Ok(ticket),
        Ok(Begun::Local(release)) => {
            let (ticket, request) = (release.ticket, release.info.call.request);
            submit_local(hub, release)
                .inspect_err(|_| hub.calls.unsubmitted(ticket, request, None))?;
            Ok(ticket)
        }
        Err(BeginError::Send(refused)) => Err(send_refusal(hub, rank, refused)),
        Err(BeginError::Full | BeginError::Exhausted) => {
            Err(exhausted(LimitField::MaxPendingCalls))
        }
        Err(BeginError::WaitingBytes) => Err(exhausted(LimitField::MaxRetainedBytes)),
        // The target's domain has no room for this rank's call.
        Err(BeginError::Busy) => Err(RuntimeError::ResourceExhausted {
            limit: LimitField::MaxActionQueue,
            side: if rank == hub.rank {
                Side::Local
            } else {
                Side::Remote
            },
        }),
    }
}

/// Submits a call to this rank: the same job a request from a peer runs
/// (its input and output go through the codec), submitted from this
/// thread to the action's domain; no transport, no dedup.
///
/// # Errors
///
/// Why the domain did not take it; the caller forgets or fails the call.
pub(crate) fn submit_local(hub: &Hub, release: LocalRelease) -> Result<(), RuntimeError> {
    let LocalRelease {
        ticket,
        info,
        deadline,
        frame,
    } = release;
    // The job reads the frame as one that arrived: through its header.
    let ctx = DecodeContext::new(Channel::Action, hub.rank, hub.world, hub.protocol)
        .expect("validated limits, a rank of the world");
    let header =
        Header::decode(&frame.head()[..HEADER_LEN], &ctx).expect("a frame this rank encoded");
    let request = Request {
        origin: hub.rank,
        call: info.call,
        deadline,
        header,
    };
    let domain = request.call.domain;
    let key = JobKey::Local {
        request: info.call.request,
    };
    let submitted = hub.domains.with(domain, |pool| {
        let completions = hub.completions.of(domain).ok_or(Refusal::NoSuchDomain)?;
        job::submit(pool, completions, key, request, frame, None)
            .map(|job| JobCanceller::new(job, pool.id(), pool.instrumentation().cloned()))
    });
    match submitted.unwrap_or(Err(Refusal::NoSuchDomain)) {
        Ok(canceller) => {
            hub.calls.attach_canceller(ticket, canceller);
            Ok(())
        }
        Err(Refusal::QueueFull) => Err(exhausted(LimitField::MaxActionQueue)),
        Err(Refusal::ShuttingDown) => Err(RuntimeError::ShuttingDown),
        Err(Refusal::NoSuchDomain) => Err(RuntimeError::UnknownDomain { domain }),
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
    down(&hub.handle, peer)
}

/// The error for a collective of every rank once any rank is down (it can
/// no longer complete anywhere: every rank's part is needed), naming the
/// first such rank; `None` while every rank is up.
pub(crate) fn any_rank_down(hub: &Hub) -> Option<RuntimeError> {
    let handle = &hub.handle;
    handle
        .world()
        .ranks()
        .find(|&rank| handle.peer_status(rank) == PeerStatus::Down)
        .map(|rank| down(handle, rank))
}

/// The error for a call to a peer `handle` reports down.
pub(crate) fn down(handle: &TransportHandle, peer: Rank) -> RuntimeError {
    let reason = handle.down_reason(peer).unwrap_or(DownReason::LocalClose);
    RuntimeError::Transport {
        peer,
        error: TransportError::PeerDown { peer, reason },
    }
}
