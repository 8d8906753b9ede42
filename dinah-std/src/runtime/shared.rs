//! State shared by the owner thread, clients and worker jobs.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use dinah_core::wire::{Call, ErrorCode};
use dinah_core::{
    AtomicRuntimeState, DomainId, ProtocolLimits, Rank, RequestIdAllocator, RuntimeLimits,
    RuntimeMetrics, WorldSize,
};

use super::calls::{Calls, Ticket};
use super::client::RuntimeClient;
use super::clock::SharedClock;
use super::registry::{HandlerError, Registry};
use crate::domain::{Completion, CompletionQueue, CompletionSink, Context, Domain, DrainContext};
use crate::transport::TransportHandle;

/// Who a domain job works for.
pub(crate) enum JobKey {
    /// A request from `origin`, admitted in dedup slot `slot`.
    Remote {
        origin: Rank,
        call: Call,
        slot: usize,
    },
    /// A local call.
    Local { request: dinah_core::RequestId },
}

/// What a domain job produced.
pub(crate) enum JobOutput {
    /// An encoded result frame, ready to send.
    Frame(Vec<u8>),
    /// The typed output of a local call.
    Value(Box<dyn Any + Send>),
}

/// Why a domain job produced no output (panics and cancellations arrive as
/// `TaskFailure` kinds instead).
#[derive(Debug)]
pub(crate) struct JobFailure {
    pub(crate) code: ErrorCode,
    pub(crate) text: String,
}

impl From<HandlerError> for JobFailure {
    /// A handler's own error travels as a user failure with its text; a
    /// codec error means the bytes did not match the action's schema.
    fn from(error: HandlerError) -> Self {
        match error {
            HandlerError::User(error) => Self {
                code: ErrorCode::UserFailure,
                text: error.into_text(),
            },
            HandlerError::Codec(error) => Self {
                code: ErrorCode::ProtocolViolation,
                text: error.to_string(),
            },
        }
    }
}

pub(crate) type Completions = CompletionQueue<JobKey, JobOutput, JobFailure>;

/// The context of the runtime's domains (see
/// [`DrainContext`](crate::domain::DrainContext)): its client, made from a
/// weak reference once per drain, so that a remote job carries no counted
/// reference of its own and the domains do not keep the runtime alive.
pub(crate) struct ClientContext(pub(crate) Weak<Shared>);

impl DrainContext for ClientContext {
    fn enter(&self, drain: &mut dyn FnMut(Context<'_>)) {
        match self.0.upgrade() {
            Some(shared) => drain(Some(&RuntimeClient { shared })),
            None => drain(None),
        }
    }
}

/// The client a remote job's domain context holds, if the runtime lives.
pub(crate) fn context_client<'a>(context: Context<'a>) -> Option<&'a RuntimeClient> {
    context?.downcast_ref()
}

/// Where a remote job's outcome goes: its domain's completion queue,
/// found through the domain's context.
pub(crate) struct DomainSink {
    pub(crate) domain: DomainId,
}

impl CompletionSink<JobKey, JobOutput, JobFailure> for DomainSink {
    fn deliver(&self, completion: Completion<JobKey, JobOutput, JobFailure>, context: Context<'_>) {
        // Without a context the runtime is gone and nobody waits.
        if let Some(queue) =
            context_client(context).and_then(|client| client.shared.completions.of(self.domain))
        {
            CompletionQueue::deliver(queue, completion);
        }
    }
}

/// One completion queue per domain, each sized to its domain's capacity,
/// so a flooded domain cannot take the completion slots of another.
pub(crate) struct CompletionSet {
    queues: Vec<(DomainId, Arc<Completions>)>,
    /// The domain whose turn is next. Updated by the owner on every pop
    /// with more than one domain, so on its own cache line: workers read
    /// `queues` on every delivery.
    next: CachePadded<std::sync::atomic::AtomicUsize>,
}

impl CompletionSet {
    pub(crate) fn new(queues: Vec<(DomainId, Arc<Completions>)>) -> Self {
        Self {
            queues,
            next: CachePadded::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    /// The queue of domain `id`.
    pub(crate) fn of(&self, id: DomainId) -> Option<&Arc<Completions>> {
        self.queues.iter().find(|(d, _)| *d == id).map(|(_, q)| q)
    }

    /// A completion from any domain, taking the domains in turn.
    pub(crate) fn pop(&self) -> Option<crate::domain::Completion<JobKey, JobOutput, JobFailure>> {
        if let [(_, only)] = self.queues.as_slice() {
            // One domain (the usual case): no turn to take.
            return only.pop();
        }
        let n = self.queues.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n).find_map(|i| self.queues[(start + i) % n].1.pop())
    }

    /// Is no completion waiting in any domain? (Outdated as soon as a
    /// worker delivers one.)
    pub(crate) fn is_empty(&self) -> bool {
        self.queues.iter().all(|(_, q)| q.is_empty())
    }

    /// Completions waiting over all domains.
    pub(crate) fn len(&self) -> usize {
        self.queues.iter().map(|(_, q)| q.len()).sum()
    }
}

/// The worker domains, readable from any thread (local calls submit from
/// the caller's thread), taken out for shutdown.
#[derive(Default)]
pub(crate) struct Domains {
    /// On its own cache line: every pooled submission takes the read lock,
    /// a write to the lock's state.
    domains: CachePadded<RwLock<Vec<(DomainId, Domain)>>>,
}

impl Domains {
    pub(crate) fn new(domains: Vec<(DomainId, Domain)>) -> Self {
        Self {
            domains: CachePadded::new(RwLock::new(domains)),
        }
    }

    /// Runs `f` on domain `id`, if it exists (and was not shut down).
    pub(crate) fn with<R>(&self, id: DomainId, f: impl FnOnce(&Domain) -> R) -> Option<R> {
        let domains = self.domains.read().unwrap_or_else(PoisonError::into_inner);
        domains
            .iter()
            .find(|(d, _)| *d == id)
            .map(|(_, domain)| f(domain))
    }

    /// A runner of inline jobs for every domain (see
    /// [`InlineRunner`](crate::domain::InlineRunner)).
    pub(crate) fn inline_runners(&self) -> Vec<(DomainId, crate::domain::InlineRunner)> {
        let domains = self.domains.read().unwrap_or_else(PoisonError::into_inner);
        domains
            .iter()
            .map(|(id, domain)| (*id, domain.inline_runner()))
            .collect()
    }

    /// Jobs admitted and not finished, over all domains.
    pub(crate) fn in_flight(&self) -> usize {
        let domains = self.domains.read().unwrap_or_else(PoisonError::into_inner);
        domains.iter().map(|(_, d)| d.in_flight()).sum()
    }

    /// Takes every domain out (for shutdown).
    pub(crate) fn take(&self) -> Vec<(DomainId, Domain)> {
        std::mem::take(&mut *self.domains.write().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Counters beyond the core metrics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Cancellations not sent because the cancellation queue was full.
    pub(crate) cancels_dropped: AtomicU64,
    /// Responses dropped because the outbox was full.
    pub(crate) responses_dropped: AtomicU64,
    /// Cancellations received from peers.
    pub(crate) cancels_received: AtomicU64,
    /// Calls whose caller stopped waiting (its future was dropped, or its
    /// scope ended) before an outcome arrived.
    pub(crate) calls_abandoned: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct Shared {
    pub(crate) rank: Rank,
    pub(crate) world: WorldSize,
    pub(crate) protocol: ProtocolLimits,
    pub(crate) limits: RuntimeLimits,
    pub(crate) state: AtomicRuntimeState,
    pub(crate) handle: TransportHandle,
    pub(crate) calls: Calls,
    pub(crate) request_ids: RequestIdAllocator,
    pub(crate) registry: Registry,
    pub(crate) domains: Domains,
    pub(crate) completions: CompletionSet,
    pub(crate) cancels: ArrayQueue<(Rank, Call)>,
    pub(crate) metrics: RuntimeMetrics,
    pub(crate) clock: SharedClock,
    pub(crate) counters: Counters,
}

impl Shared {
    /// Hands `frame` to the transport, counting its bytes when accepted.
    pub(crate) fn send(
        &self,
        to: Rank,
        channel: dinah_core::wire::Channel,
        frame: Vec<u8>,
    ) -> Result<(), crate::transport::TrySendError> {
        let len = frame.len() as u64;
        self.handle.try_send(to, channel, frame)?;
        self.metrics.record_bytes_sent(len);
        Ok(())
    }

    /// As [`send`](Self::send), for the owner thread only (see
    /// [`TransportHandle::try_send_from_owner`]), and without counting the
    /// bytes: the owner counts them in its
    /// [`OwnerCounts`](super::owner_counts::OwnerCounts).
    pub(crate) fn send_from_owner(
        &self,
        to: Rank,
        channel: dinah_core::wire::Channel,
        frame: Vec<u8>,
    ) -> Result<(), crate::transport::TrySendError> {
        self.handle.try_send_from_owner(to, channel, frame)
    }

    /// The caller stopped waiting for the call of `ticket` (its future was
    /// dropped or its scope ended): forgets the call, counts it as
    /// abandoned and queues a best-effort cancellation. Does nothing for a
    /// call that had already ended.
    pub(crate) fn abandon_call(&self, ticket: Ticket) {
        if let Some(info) = self.calls.abandon(ticket) {
            Counters::bump(&self.counters.calls_abandoned);
            self.queue_cancel(info.peer, info.call);
        }
    }

    /// Queues a best-effort cancellation of `call` at `peer` and wakes the
    /// owner; counts it as dropped if the queue is full.
    pub(crate) fn queue_cancel(&self, peer: Rank, call: Call) {
        self.metrics.record_cancellation_requested();
        if peer == self.rank {
            return;
        }
        if self.cancels.push((peer, call)).is_err() {
            Counters::bump(&self.counters.cancels_dropped);
        }
        self.handle.wakeup().wake();
    }
}
