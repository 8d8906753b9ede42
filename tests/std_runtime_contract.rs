//! Runtime contracts seen from outside, over the in-memory transport: the
//! lifecycle states (Running, Draining with new work refused, Stopped,
//! Failed after a transport failure), the builder's typed refusals,
//! deadlines (the default from the limits, zero refused, one the target
//! decides counted as an expiry), the trace ID from caller to handler and
//! back in its error, the refusal counters, and what the runtime tells its
//! driver before an idle wait.

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::TraceId;
use dinah_core::{Instant, ProtocolLimits, Rank, RuntimeLimits, RuntimeState, WorldSize};
use dinah_std::transport::TransportError;
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, ActionError, BuildError, CodecError, DEFAULT_DOMAIN, FailureKind, Runtime,
    RuntimeBuilder, RuntimeError, SegmentReader, SegmentWriter, SpawnOptions, WireValue, schema_id,
};

#[path = "support/gate.rs"]
mod gate;
#[path = "support/watched.rs"]
mod watched;
use gate::Gate;
use watched::{Watch, Watched};

/// Echoes its number; fails for odd numbers with the trace it saw.
struct Probe(u64);

impl WireValue for Probe {
    const SCHEMA_ID: u64 = schema_id("contract.Probe/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Probe)
    }
}

impl Action for Probe {
    const ID: u128 = 0xc0_47a0_0001;
    type Output = (u64, u64);
}

/// Waits until the test opens its gate.
struct Wait(u64);

impl WireValue for Wait {
    const SCHEMA_ID: u64 = schema_id("contract.Wait/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Wait)
    }
}

impl Action for Wait {
    const ID: u128 = 0xc0_47a0_0002;
    type Output = u64;
}

/// An action whose ID is zero, which no registry accepts.
struct Nameless;

impl WireValue for Nameless {
    const SCHEMA_ID: u64 = schema_id("contract.Nameless/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Nameless)
    }
}

impl Action for Nameless {
    const ID: u128 = 0;
    type Output = ();
}

/// What the `Probe` handler saw last: its trace and its deadline.
#[derive(Default)]
struct Seen {
    trace: AtomicU64,
    deadline: AtomicU64,
}

fn builder(limits: RuntimeLimits, seen: &Arc<Seen>, gate: &Arc<Gate>) -> RuntimeBuilder {
    let mut builder = Runtime::builder(7, ProtocolLimits::default(), limits).unwrap();
    builder.domain(DEFAULT_DOMAIN, NonZeroUsize::MIN).unwrap();
    let s = Arc::clone(seen);
    builder
        .register_with_context::<Probe, _>(DEFAULT_DOMAIN, move |Probe(n), ctx| {
            let trace = ctx.trace().map_or(0, TraceId::get);
            s.trace.store(trace, Ordering::SeqCst);
            s.deadline
                .store(ctx.deadline().as_nanos(), Ordering::SeqCst);
            if n % 2 == 1 {
                return Err(ActionError::new("odd"));
            }
            Ok((n, trace))
        })
        .unwrap();
    let g = Arc::clone(gate);
    builder
        .register::<Wait, _>(move |Wait(n)| {
            g.wait();
            Ok(n)
        })
        .unwrap();
    builder
}

/// Ranks over a stepped network with its logical clock.
fn ranks(size: u32, limits: RuntimeLimits) -> (SimNetwork, Vec<Runtime>, Arc<Seen>, Arc<Gate>) {
    let world = WorldSize::new(size).unwrap();
    let network = SimNetwork::new(world, 11, FaultPlan::new()).unwrap();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let runtimes = world
        .ranks()
        .map(|rank| {
            let mut builder = builder(limits, &seen, &gate);
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    (network, runtimes, seen, gate)
}

fn limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_domains = 1;
    limits.workers_per_domain = 1;
    limits.shutdown_timeout = Duration::from_secs(5);
    limits
}

fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(future).poll(&mut cx)
}

/// Progresses every runtime and steps the network until `future` is done.
fn drive<F: Future + Unpin>(
    network: &SimNetwork,
    runtimes: &mut [Runtime],
    future: &mut F,
) -> F::Output {
    for _ in 0..100_000 {
        for runtime in runtimes.iter_mut() {
            while runtime.stats().action_jobs > 0 {
                std::thread::yield_now();
            }
            runtime.progress();
        }
        if let Poll::Ready(output) = poll_once(future) {
            return output;
        }
        network.step();
    }
    panic!("the future never finished: {network}");
}

#[test]
fn the_lifecycle_runs_through_running_draining_and_stopped() {
    let (_network, mut runtimes, ..) = ranks(1, limits());
    let mut runtime = runtimes.pop().unwrap();
    assert_eq!(runtime.state(), RuntimeState::Running);
    let client = runtime.client();
    runtime.begin_shutdown(Duration::from_secs(5));
    assert_eq!(runtime.state(), RuntimeState::Draining);
    let refused = runtime.block_on(client.spawn_on(Rank::ZERO, Probe(2)));
    assert!(
        matches!(
            refused,
            Err(RuntimeError::State {
                state: RuntimeState::Draining
            })
        ),
        "{refused:?}"
    );
    let stats = runtime.stats();
    assert_eq!((stats.calls_refused, stats.metrics.submitted), (1, 0));
    let report = loop {
        if let Poll::Ready(report) = runtime.poll_shutdown() {
            break report.expect("nothing outstanding");
        }
    };
    assert!(report.is_clean(), "{report}");
    assert_eq!(runtime.state(), RuntimeState::Stopped);
}

/// What these tests add to the in-memory driver: it fails as a whole once
/// `fail` is set, and it records, for each idle wait, what the runtime
/// told it of its workers just before.
#[derive(Default)]
struct FailAndTold {
    fail: Arc<AtomicBool>,
    told: Option<bool>,
    waits: Arc<Mutex<Vec<bool>>>,
}

impl Watch for FailAndTold {
    fn poll(&mut self) -> Result<(), TransportError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(TransportError::Closed);
        }
        Ok(())
    }

    fn idle_wait(&mut self) {
        let told = self.told.take().expect("told before every idle wait");
        self.waits.lock().unwrap().push(told);
    }

    fn workers_running(&mut self, running: bool) {
        self.told = Some(running);
    }
}

/// `driver`, watched by a fresh [`FailAndTold`].
fn watched<D>(driver: D) -> Watched<D, FailAndTold> {
    Watched {
        inner: driver,
        watch: FailAndTold::default(),
    }
}

#[test]
fn a_transport_failure_fails_the_runtime_and_every_waiting_call() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::new(world, 5, FaultPlan::new()).unwrap();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let mut builder = builder(limits(), &seen, &gate);
    builder.clock(Arc::new(network.clock()));
    let hello = builder.hello().unwrap();
    let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
    let driver = watched(driver);
    let fail = Arc::clone(&driver.watch.fail);
    let mut runtime = builder.start(handle, driver).unwrap();
    let client = runtime.client();
    let mut waiting = client.spawn_on(world.rank(1).unwrap(), Probe(2));
    runtime.progress();
    assert!(poll_once(&mut waiting).is_pending());
    fail.store(true, Ordering::SeqCst);
    runtime.progress();
    assert_eq!(runtime.state(), RuntimeState::Failed);
    let outcome = runtime.block_on(&mut waiting);
    assert!(
        matches!(
            outcome,
            Err(RuntimeError::TransportFailed(TransportError::Closed))
        ),
        "{outcome:?}"
    );
    let refused = runtime.block_on(client.spawn_on(Rank::ZERO, Probe(2)));
    assert!(
        matches!(
            refused,
            Err(RuntimeError::State {
                state: RuntimeState::Failed
            })
        ),
        "{refused:?}"
    );
    assert_eq!(runtime.stats().unsettled_calls(), 0);
}

#[test]
fn before_each_idle_wait_the_driver_learns_whether_workers_run_jobs() {
    let network =
        SimNetwork::with_mode(WorldSize::ONE, 3, FaultPlan::new(), SimMode::Threaded).unwrap();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let builder = builder(limits(), &seen, &gate);
    let hello = builder.hello().unwrap();
    let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
    let driver = watched(driver);
    let waits = Arc::clone(&driver.watch.waits);
    let mut runtime = builder.start(handle, driver).unwrap();
    let client = runtime.client();
    // Ready once an idle wait was told `running`; fails after 10 s.
    let waited = |running: bool| {
        let waits = Arc::clone(&waits);
        let start = std::time::Instant::now();
        std::future::poll_fn(move |_| {
            if waits.lock().unwrap().contains(&running) {
                return Poll::Ready(());
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no idle wait was told running = {running}"
            );
            Poll::Pending
        })
    };
    // Idle with nothing admitted: no worker runs a job.
    runtime.block_on(waited(false));
    // A job held at the gate on the domain's worker.
    let held = client.spawn_on(Rank::ZERO, Wait(4));
    waits.lock().unwrap().clear();
    runtime.block_on(waited(true));
    assert_eq!(runtime.stats().action_jobs, 1);
    gate.open();
    assert_eq!(runtime.block_on(held).unwrap(), 4);
    // Finished: the next idle wait hears that no worker runs a job.
    waits.lock().unwrap().clear();
    runtime.block_on(waited(false));
    assert_eq!(runtime.stats().action_jobs, 0);
}

#[test]
fn duplicate_zero_and_oversized_registrations_are_build_errors() {
    let mut builder = Runtime::builder(1, ProtocolLimits::default(), limits()).unwrap();
    builder.register::<Probe, _>(|Probe(n)| Ok((n, 0))).unwrap();
    let duplicate = builder.register::<Probe, _>(|Probe(n)| Ok((n, 1)));
    assert!(
        matches!(duplicate, Err(BuildError::DuplicateAction { action }) if action.get() == Probe::ID),
        "{:?}",
        duplicate.err()
    );
    let zero = builder.register::<Nameless, _>(|Nameless| Ok(()));
    assert!(
        matches!(zero, Err(BuildError::ZeroActionId)),
        "{:?}",
        zero.err()
    );
    let wide = builder.domain(DEFAULT_DOMAIN, NonZeroUsize::new(2).unwrap());
    assert!(
        matches!(
            wide,
            Err(BuildError::DomainWorkers {
                workers: 2,
                max: 1,
                ..
            })
        ),
        "{:?}",
        wide.err()
    );
    assert!(builder.hello().is_ok(), "the refusals changed nothing");
}

#[test]
fn the_default_deadline_comes_from_the_limits_and_zero_is_refused() {
    let mut limits = limits();
    limits.default_deadline = Duration::from_millis(40);
    let (network, mut runtimes, ..) = ranks(2, limits);
    let target = WorldSize::new(2).unwrap().rank(1).unwrap();
    let client = runtimes[0].client();
    // The target never runs: only the caller progresses.
    let mut call = client.spawn_on(target, Probe(2));
    let outcome = loop {
        runtimes[0].progress();
        if let Poll::Ready(outcome) = poll_once(&mut call) {
            break outcome;
        }
        network.step();
    };
    assert!(
        matches!(outcome, Err(RuntimeError::DeadlineExceeded { after }) if after == Duration::from_millis(40)),
        "{outcome:?}"
    );
    let zero = SpawnOptions::deadline(Duration::ZERO);
    let refused = runtimes[0].block_on(client.spawn_on_with(target, Probe(2), zero));
    assert!(
        matches!(refused, Err(RuntimeError::InvalidDeadline)),
        "{refused:?}"
    );
    let stats = runtimes[0].stats();
    assert_eq!(
        stats.metrics.submitted, 1,
        "the refused call was never issued"
    );
    assert_eq!(stats.calls_refused, 1);
    assert_eq!(stats.metrics.deadline_expiries, 1);
    assert_eq!(stats.unsettled_calls(), 0);
}

#[test]
fn the_trace_id_reaches_the_handler_and_comes_back_in_its_error() {
    let (network, mut runtimes, seen, _) = ranks(2, limits());
    let world = WorldSize::new(2).unwrap();
    let client = runtimes[0].client();
    for target in world.ranks() {
        let trace = TraceId::new(0x7ace + u64::from(target.get())).unwrap();
        let options = SpawnOptions::deadline(Duration::from_secs(10)).with_trace(trace);
        let before = runtimes[0].stats().metrics.submitted;
        let start = network.clock();
        let issued_at = dinah_core::Clock::now(&start);
        let mut ok = client.spawn_on_with(target, Probe(4), options);
        let (n, saw) = drive(&network, &mut runtimes, &mut ok).expect("even numbers pass");
        assert_eq!((n, saw), (4, trace.get()), "{target}");
        assert_eq!(seen.trace.load(Ordering::SeqCst), trace.get());
        // The handler's deadline is the call's, counted from arrival.
        let deadline = Instant::from_nanos(seen.deadline.load(Ordering::SeqCst));
        let earliest = issued_at.checked_add(Duration::from_secs(10)).unwrap();
        assert!(
            deadline >= earliest,
            "{target}: {deadline:?} < {earliest:?}"
        );
        let mut failing = client.spawn_on_with(target, Probe(5), options);
        let error = drive(&network, &mut runtimes, &mut failing).unwrap_err();
        assert!(
            matches!(&error, RuntimeError::Remote { kind: FailureKind::Returned, text, trace: Some(t) } if text == "odd" && *t == trace),
            "{target}: {error:?}"
        );
        assert!(error.to_string().contains(&trace.to_string()), "{error}");
        assert_eq!(runtimes[0].stats().metrics.submitted, before + 2);
    }
}

#[test]
fn a_deadline_the_target_decides_counts_as_an_expiry() {
    let (network, mut runtimes, _, gate) = ranks(1, limits());
    let mut runtime = runtimes.pop().unwrap();
    let client = runtime.client();
    // The one worker waits at the gate; the second call queues behind it.
    let mut blocker = client.spawn_on(Rank::ZERO, Wait(1));
    let options = SpawnOptions::deadline(Duration::from_millis(10));
    let mut late = client.spawn_on_with(Rank::ZERO, Probe(2), options);
    // Time passes without the owner looking, then the worker is freed: the
    // queued job starts after its deadline and refuses to run.
    network.advance(20);
    gate.open();
    while runtime.stats().action_jobs > 0 {
        std::thread::yield_now();
    }
    // Finished jobs are handled before the owner's own expiry check.
    runtime.progress();
    let outcome = runtime.block_on(&mut late);
    assert!(
        matches!(outcome, Err(RuntimeError::DeadlineExceeded { after }) if after == Duration::from_millis(10)),
        "{outcome:?}"
    );
    assert_eq!(runtime.block_on(&mut blocker).expect("the blocker"), 1);
    let metrics = runtime.stats().metrics;
    assert_eq!(
        (metrics.deadline_expiries, metrics.failed, metrics.completed),
        (1, 0, 1)
    );
    assert!(runtime.shutdown(Duration::from_secs(5)).unwrap().is_clean());
}
