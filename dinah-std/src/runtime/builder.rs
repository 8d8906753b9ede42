//! Building and starting a runtime.

mod domains;

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use dinah_core::wire::{Channel, DecodeContext};
use dinah_core::{
    AtomicRuntimeState, DomainId, ProtocolLimits, RuntimeLimits, RuntimeMetrics, RuntimeState,
};

use super::barrier::{Arrive, Barriers};
use super::caller::Calls;
use super::clock::{SharedClock, StdClock};
use super::collective::{Collectives, Deliver};
use super::context::ActionContext;
use super::error::BuildError;
use super::hub::{CompletionSet, Counters, Domains, Hub};
use super::owner::OwnerCounts;
use super::registry::{Entry, Registry, Typed};
use super::serve::Server;
use super::{OwnerLink, OwnerWaker, Runtime};
use crate::action::{Action, ActionError};
use crate::domain::Instrumentation;
use crate::transport::{HandleConfig, TransportDriver, TransportHandle, TransportHello};

/// The domain actions run in unless registered elsewhere: created with
/// [`RuntimeLimits::workers_per_domain`] workers if not declared.
pub const DEFAULT_DOMAIN: DomainId = DomainId::MIN;

/// Registers actions and domains, produces the hello for the transport,
/// and starts the runtime.
///
/// Registration is explicit and happens before the transport connects,
/// because the hello carries a fingerprint of the registry: ranks whose
/// registries differ refuse each other during the handshake.
pub struct RuntimeBuilder {
    run_id: u64,
    protocol: ProtocolLimits,
    limits: RuntimeLimits,
    registry: Registry,
    domains: Vec<(DomainId, NonZeroUsize)>,
    clock: Option<SharedClock>,
    instrumentation: Option<Arc<Instrumentation>>,
}

impl RuntimeBuilder {
    pub(crate) fn new(
        run_id: u64,
        protocol: ProtocolLimits,
        limits: RuntimeLimits,
    ) -> Result<Self, BuildError> {
        protocol.validate()?;
        limits.validate()?;
        let mut builder = Self {
            run_id,
            protocol,
            limits,
            registry: Registry::default(),
            domains: Vec::new(),
            clock: None,
            instrumentation: None,
        };
        builder.register_builtins()?;
        Ok(builder)
    }

    /// Registers the runtime's own actions, run on the owner thread: the
    /// barrier's arrivals (see
    /// [`RuntimeClient::barrier`](super::RuntimeClient::barrier)) and the
    /// collectives' deliveries (see
    /// [`RuntimeClient::broadcast`](super::RuntimeClient::broadcast)).
    fn register_builtins(&mut self) -> Result<(), BuildError> {
        let arrive = Typed::<Arrive, _>::new(|arrive: Arrive, ctx: &ActionContext<'_>| {
            arrive.record(&ctx.client().hub.barriers)
        });
        let mut entry = Entry::new::<Arrive>(DEFAULT_DOMAIN, Arc::new(arrive))?;
        entry.inline = true;
        entry.builtin = true;
        self.registry.insert(entry)?;
        let deliver = Typed::<Deliver, _>::new(|deliver: Deliver, ctx: &ActionContext<'_>| {
            let hub = &ctx.client().hub;
            deliver.record(&hub.collectives, hub.limits.max_retained_bytes)
        });
        let mut entry = Entry::new::<Deliver>(DEFAULT_DOMAIN, Arc::new(deliver))?;
        entry.inline = true;
        entry.builtin = true;
        self.registry.insert(entry)
    }

    /// Declares worker domain `id` with `workers` threads (its queue holds
    /// [`RuntimeLimits::max_action_queue`] jobs).
    ///
    /// Every bound the runtime derives from the limits (the completion
    /// queues, the responses that may wait for the transport) counts at
    /// most [`RuntimeLimits::workers_per_domain`] workers per domain, so a
    /// domain may have fewer workers but not more.
    ///
    /// # Errors
    ///
    /// [`BuildError::DomainLimit`] if `id` is already declared or this
    /// would exceed [`RuntimeLimits::max_domains`];
    /// [`BuildError::DomainWorkers`] if `workers` exceeds
    /// [`RuntimeLimits::workers_per_domain`].
    pub fn domain(&mut self, id: DomainId, workers: NonZeroUsize) -> Result<&mut Self, BuildError> {
        if self.domains.iter().any(|(d, _)| *d == id)
            || self.domains.len() >= usize::from(self.limits.max_domains)
        {
            return Err(BuildError::DomainLimit { domain: id });
        }
        let max = self.limits.workers_per_domain;
        if workers.get() > usize::from(max) {
            return Err(BuildError::DomainWorkers {
                domain: id,
                workers: workers.get(),
                max,
            });
        }
        self.domains.push((id, workers));
        Ok(self)
    }

    /// Registers `handler` for action `A` in the [`DEFAULT_DOMAIN`].
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroActionId`] or [`BuildError::DuplicateAction`].
    pub fn register<A, F>(&mut self, handler: F) -> Result<&mut Self, BuildError>
    where
        A: Action,
        F: Fn(A) -> Result<A::Output, ActionError> + Send + Sync + 'static,
    {
        self.register_with_context::<A, _>(DEFAULT_DOMAIN, move |action, _| handler(action))
    }

    /// Registers `handler` for action `A` in domain `domain`.
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register); an undeclared domain is reported by
    /// [`hello`](Self::hello) and [`start`](Self::start).
    pub fn register_in<A, F>(
        &mut self,
        domain: DomainId,
        handler: F,
    ) -> Result<&mut Self, BuildError>
    where
        A: Action,
        F: Fn(A) -> Result<A::Output, ActionError> + Send + Sync + 'static,
    {
        self.register_with_context::<A, _>(domain, move |action, _| handler(action))
    }

    /// Registers a handler that also receives an [`ActionContext`] (the
    /// caller's rank, cancellation, a client for nested calls).
    ///
    /// # Errors
    ///
    /// As [`register_in`](Self::register_in).
    pub fn register_with_context<A, F>(
        &mut self,
        domain: DomainId,
        handler: F,
    ) -> Result<&mut Self, BuildError>
    where
        A: Action,
        F: Fn(A, &ActionContext<'_>) -> Result<A::Output, ActionError> + Send + Sync + 'static,
    {
        self.insert::<A>(domain, Arc::new(Typed::<A, F>::new(handler)), false)
    }

    /// Registers `handler` for action `A` in `domain` to run **inline**:
    /// a request from another rank runs on the owner thread, inside
    /// [`Runtime::progress`](crate::Runtime::progress), instead of being
    /// handed to one of the domain's workers. That saves two thread
    /// hand-offs per request (to the worker and back), which dominate the
    /// cost of short handlers: a lookup, a counter, a small copy.
    ///
    /// Everything else is unchanged: the same dedup, deadline check before
    /// start, panic capture, error replies and fingerprint (an inline
    /// registration is wire-compatible with a pooled one of the same
    /// action and domain). Calls to this rank itself still run on the
    /// domain's workers, so a caller never runs a handler on its own stack.
    ///
    /// The handler must be short and must not block: while it runs, this
    /// rank makes no other progress, so it must never wait for a remote
    /// call (a nested call would deadlock). Cancellation cannot reach an
    /// inline handler that has started, since it runs to completion before
    /// the owner reads the next frame.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{ProtocolLimits, RuntimeLimits};
    /// use dinah_std::{Action, CodecError, DEFAULT_DOMAIN, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};
    ///
    /// struct Double(u64);
    /// impl WireValue for Double {
    ///     const SCHEMA_ID: u64 = schema_id("doc.Double/1");
    ///     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
    ///         self.0.encode(out)
    ///     }
    ///     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
    ///         u64::decode(input).map(Double)
    ///     }
    /// }
    /// impl Action for Double {
    ///     const ID: u128 = 0xd0_0b1e;
    ///     type Output = u64;
    /// }
    ///
    /// let mut builder = Runtime::builder(7, ProtocolLimits::default(), RuntimeLimits::default())?;
    /// builder.register_inline::<Double, _>(DEFAULT_DOMAIN, |Double(x)| Ok(2 * x))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`register_in`](Self::register_in).
    pub fn register_inline<A, F>(
        &mut self,
        domain: DomainId,
        handler: F,
    ) -> Result<&mut Self, BuildError>
    where
        A: Action,
        F: Fn(A) -> Result<A::Output, ActionError> + Send + Sync + 'static,
    {
        self.register_inline_with_context::<A, _>(domain, move |action, _| handler(action))
    }

    /// Registers an inline handler (see
    /// [`register_inline`](Self::register_inline)) that also receives an
    /// [`ActionContext`], the same one a pooled handler gets: the calling
    /// rank, the request, the trace ID, the deadline, the cancellation flag
    /// and a client.
    ///
    /// Two things differ because the handler runs on the owner thread. Its
    /// [`worker`](ActionContext::worker) is `None`. And
    /// [`is_cancelled`](ActionContext::is_cancelled) can only report a
    /// cancellation that was requested before the handler started (a
    /// shutdown that cancels running work), since the owner reads no cancel
    /// frames while the handler runs. The client may start calls and
    /// cancel them, but the handler must not wait for one: the owner thread
    /// that would complete it is the one running the handler.
    ///
    /// # Errors
    ///
    /// As [`register_in`](Self::register_in).
    pub fn register_inline_with_context<A, F>(
        &mut self,
        domain: DomainId,
        handler: F,
    ) -> Result<&mut Self, BuildError>
    where
        A: Action,
        F: Fn(A, &ActionContext<'_>) -> Result<A::Output, ActionError> + Send + Sync + 'static,
    {
        self.insert::<A>(domain, Arc::new(Typed::<A, F>::new(handler)), true)
    }

    /// Registers `handler` for `A`: the one place entries are made.
    fn insert<A: Action>(
        &mut self,
        domain: DomainId,
        handler: Arc<dyn super::registry::ErasedHandler>,
        inline: bool,
    ) -> Result<&mut Self, BuildError> {
        let mut entry = Entry::new::<A>(domain, handler)?;
        entry.inline = inline;
        self.registry.insert(entry)?;
        Ok(self)
    }

    /// The runtime limits the runtime will be built with.
    #[must_use]
    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// Uses `clock` instead of the system's monotonic clock (simulations
    /// with logical time, tests).
    pub fn clock(&mut self, clock: SharedClock) -> &mut Self {
        self.clock = Some(clock);
        self
    }

    /// Records metrics and trace events of the worker domains in
    /// `instrumentation` (off by default, at no cost).
    pub fn instrumentation(&mut self, instrumentation: Arc<Instrumentation>) -> &mut Self {
        self.instrumentation = Some(instrumentation);
        self
    }

    /// The domains that will be started: the declared ones, plus the
    /// default domain if an action uses it and it was not declared.
    fn planned_domains(&self) -> Result<Vec<(DomainId, NonZeroUsize)>, BuildError> {
        let mut domains = self.domains.clone();
        let uses_default = self
            .registry
            .iter()
            .any(|e| !e.builtin && e.registration.domain == DEFAULT_DOMAIN);
        if (uses_default || domains.is_empty())
            && !domains.iter().any(|(d, _)| *d == DEFAULT_DOMAIN)
        {
            if domains.len() >= usize::from(self.limits.max_domains) {
                return Err(BuildError::DomainLimit {
                    domain: DEFAULT_DOMAIN,
                });
            }
            let workers = NonZeroUsize::new(usize::from(self.limits.workers_per_domain))
                .unwrap_or(NonZeroUsize::MIN);
            domains.push((DEFAULT_DOMAIN, workers));
        }
        for entry in self.registry.iter().filter(|e| !e.builtin) {
            let domain = entry.registration.domain;
            if !domains.iter().any(|(d, _)| *d == domain) {
                return Err(BuildError::UnknownDomain { domain });
            }
        }
        Ok(domains)
    }

    /// What the transport needs: the hello template (run ID, protocol
    /// limits, registry fingerprint) and the handle's sizes.
    ///
    /// # Errors
    ///
    /// [`BuildError::Fingerprint`] for a zero schema ID,
    /// [`BuildError::UnknownDomain`] for an action in an undeclared domain.
    pub fn hello(&self) -> Result<TransportHello, BuildError> {
        self.planned_domains()?;
        Ok(TransportHello {
            run_id: self.run_id,
            protocol_limits: self.protocol,
            fingerprint: self.registry.fingerprint()?,
            handle: HandleConfig::from_limits(&self.limits),
        })
    }

    /// Starts the runtime on the calling thread (its owner) over a
    /// connected transport.
    ///
    /// # Errors
    ///
    /// [`BuildError::TransportMismatch`] if the handle was not sized by
    /// this builder's [`hello`](Self::hello); [`BuildError::Domain`] if a
    /// worker domain cannot start; the errors of `hello`.
    pub fn start(
        self,
        handle: TransportHandle,
        driver: impl TransportDriver + 'static,
    ) -> Result<Runtime, BuildError> {
        // The runtime's own actions run without a domain: their panics'
        // text is recorded too.
        crate::domain::install_panic_hook();
        let domains = self.planned_domains()?;
        self.registry.fingerprint()?;
        if handle.config() != HandleConfig::from_limits(&self.limits) {
            return Err(BuildError::TransportMismatch);
        }
        let state = AtomicRuntimeState::new(RuntimeState::Created);
        state
            .transition(RuntimeState::Created, RuntimeState::Bootstrapping)
            .map_err(|e| BuildError::State { state: e.from })?;
        let wakeup = handle.wakeup().clone();
        wakeup.bind_current();
        let waker = std::task::Waker::from(Arc::new(OwnerWaker(wakeup)));
        let (started, queues, jobs) = self.start_domains(domains, handle.rank(), &waker)?;
        let completions = CompletionSet::new(queues);
        let world = handle.world();
        // Calls are paced per domain of a registered action (the runtime's
        // own actions run inline and are not paced).
        let paced = self
            .registry
            .iter()
            .filter(|e| !e.builtin)
            .map(|e| e.registration.domain)
            .collect();
        // Each domain's workers reach the runtime through a weak reference
        // entered once per drain (see `OwnerLink`), not one per job.
        let hub = Arc::new_cyclic(|weak| {
            for (_, domain) in &started {
                domain.set_owner(OwnerLink(weak.clone()));
            }
            Hub {
                rank: handle.rank(),
                world,
                protocol: self.protocol,
                limits: self.limits,
                state,
                calls: Calls::new(
                    self.limits.max_pending_calls as usize,
                    handle.clone(),
                    paced,
                    self.limits.max_retained_bytes,
                ),
                registry: self.registry,
                domains: Domains::new(started),
                completions,
                cancels: ArrayQueue::new(self.limits.max_cancellations as usize),
                metrics: RuntimeMetrics::new(),
                clock: self.clock.unwrap_or_else(|| Arc::new(StdClock::new())),
                counters: Counters::default(),
                barriers: Barriers::default(),
                collectives: Collectives::default(),
                handle,
            }
        });
        // Each admitted job answers once, and each frame read in a round
        // at most once (see `serve/respond.rs`).
        let outbox = jobs + self.limits.max_progress_events as usize;
        let server = Server::new(&hub, outbox);
        let contexts = world
            .ranks()
            .map(|rank| {
                DecodeContext::new(Channel::Action, rank, world, hub.protocol)
                    .expect("the builder validated the limits; the rank is of the world")
            })
            .collect();
        hub.state
            .transition(RuntimeState::Bootstrapping, RuntimeState::Running)
            .map_err(|e| BuildError::State { state: e.from })?;
        Ok(Runtime {
            server,
            counts: OwnerCounts::default(),
            contexts,
            driver: Box::new(driver),
            events: Vec::with_capacity(hub.limits.max_progress_events as usize),
            expired: Vec::new(),
            released: Vec::new(),
            cancel_retry: None,
            waker: std::rc::Rc::new(waker),
            peers_drained: vec![false; world.get() as usize],
            shutdown: None,
            stuck: super::owner::Stuck::default(),
            closed: false,
            hub,
        })
    }
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("run_id", &self.run_id)
            .field("actions", &self.registry.len())
            .field("domains", &self.domains)
            .finish_non_exhaustive()
    }
}
