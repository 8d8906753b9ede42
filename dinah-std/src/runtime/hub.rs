//! The [`Hub`]: what a runtime's owner thread, its clients and its worker
//! jobs all reach.
//!
//! Everything here is either fixed at start (rank, limits, registry) or
//! synchronised on its own (atomics, the calls table's lock, bounded
//! queues). The owner-only state (the serving side, the driver, the
//! owner's counts) lives in [`Runtime`](super::Runtime) instead.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use dinah_core::wire::Call;
use dinah_core::{
    AtomicRuntimeState, DomainId, ProtocolLimits, Rank, RuntimeLimits, RuntimeMetrics, WorldSize,
};

use super::barrier::Barriers;
use super::caller::{Abandoned, Calls, Ticket};
use super::clock::SharedClock;
use super::collective::Collectives;
use super::job_outcome::{Completions, JobCompletion};
use super::registry::Registry;
use crate::domain::Domain;
use crate::transport::TransportHandle;

/// The state shared by the owner thread, clients and worker jobs.
pub(crate) struct Hub {
    pub(crate) rank: Rank,
    pub(crate) world: WorldSize,
    pub(crate) protocol: ProtocolLimits,
    pub(crate) limits: RuntimeLimits,
    pub(crate) state: AtomicRuntimeState,
    pub(crate) handle: TransportHandle,
    pub(crate) calls: Calls,
    pub(crate) registry: Registry,
    pub(crate) domains: Domains,
    pub(crate) completions: CompletionSet,
    /// Cancellations waiting for the owner to send them.
    pub(crate) cancels: ArrayQueue<(Rank, Call)>,
    pub(crate) metrics: RuntimeMetrics,
    pub(crate) clock: SharedClock,
    pub(crate) counters: Counters,
    /// This rank's side of [`RuntimeClient::barrier`](super::RuntimeClient::barrier).
    pub(crate) barriers: Barriers,
    /// This rank's side of the broadcasts and reductions.
    pub(crate) collectives: Collectives,
}

impl Hub {
    /// The caller stopped waiting for the call of `ticket` (its future was
    /// dropped or its scope ended): forgets the call, counts it as
    /// abandoned and queues a best-effort cancellation. Does nothing for a
    /// call that had already ended.
    pub(crate) fn abandon_call(&self, ticket: Ticket) {
        match self.calls.abandon(ticket) {
            Some(Abandoned::Sent(info)) => {
                Counters::bump(&self.counters.calls_abandoned);
                self.queue_cancel(info.peer, info.call);
            }
            Some(Abandoned::Unsent) => Counters::bump(&self.counters.calls_abandoned),
            None => {}
        }
    }

    /// Queues a best-effort cancellation of `call` at `peer` and wakes the
    /// owner; counts it as dropped if the queue is full. A call to this
    /// rank has no frame to cancel: its job was cancelled directly.
    pub(crate) fn queue_cancel(&self, peer: Rank, call: Call) {
        self.metrics.record_cancellation_requested();
        if peer == self.rank {
            return;
        }
        if self.cancels.push((peer, call)).is_err() {
            Counters::bump(&self.counters.cancels_queue_full);
        }
        self.handle.wakeup().wake();
    }
}

/// One completion queue per domain, each sized to its domain's capacity,
/// so a flooded domain cannot take the completion slots of another.
pub(crate) struct CompletionSet {
    queues: Vec<(DomainId, Arc<Completions>)>,
    /// The domain whose turn is next. Updated by the owner on every pop
    /// with more than one domain, so on its own cache line: workers read
    /// `queues` on every delivery.
    next: CachePadded<AtomicUsize>,
}

impl CompletionSet {
    pub(crate) fn new(queues: Vec<(DomainId, Arc<Completions>)>) -> Self {
        Self {
            queues,
            next: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// The queue of domain `id`.
    pub(crate) fn of(&self, id: DomainId) -> Option<&Arc<Completions>> {
        self.queues.iter().find(|(d, _)| *d == id).map(|(_, q)| q)
    }

    /// A completion from any domain, taking the domains in turn.
    pub(crate) fn pop(&self) -> Option<JobCompletion> {
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

/// The worker domains, readable from any thread (calls to this rank submit
/// from the caller's thread), taken out for shutdown.
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

    /// Runs `f` on every domain.
    pub(crate) fn each(&self, mut f: impl FnMut(DomainId, &Domain)) {
        let domains = self.domains.read().unwrap_or_else(PoisonError::into_inner);
        domains.iter().for_each(|(id, domain)| f(*id, domain));
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

/// Counters of events outside the core metrics, updated from any thread.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Cancellations not sent because the cancellation queue was full.
    pub(crate) cancels_queue_full: AtomicU64,
    /// Cancellations the transport refused for good (peer down, closed).
    pub(crate) cancels_undeliverable: AtomicU64,
    /// Cancellations received from peers.
    pub(crate) cancels_received: AtomicU64,
    /// Calls whose caller stopped waiting (its future was dropped, or its
    /// scope ended) before an outcome arrived.
    pub(crate) calls_abandoned: AtomicU64,
    /// Calls refused before they were issued (a full bound, a bad
    /// deadline, a peer known to be down, an unknown action, a runtime
    /// that is not running).
    pub(crate) calls_refused: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
