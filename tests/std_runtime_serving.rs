//! The serving path's edges over the in-memory transport: requests reach
//! the target out of the order they began in (many calling threads, a
//! reordering and duplicating network, a tiny dedup table) and none is
//! refused as a duplicate it never was nor run twice; and with every queue
//! saturated, no response is ever dropped.
//!
//! (The same false-refusal scenarios without faults run over every
//! transport in the conformance suite: `many_threads_no_false_refusals`,
//! `cancel_overtaking_a_burst`.)

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use dinah_core::wire::Channel;
use dinah_core::{LimitField, ProtocolLimits, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{Delay, FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, CodecError, DEFAULT_DOMAIN, Runtime, RuntimeError, SegmentReader, SegmentWriter, Side,
    SpawnOptions, WireValue, schema_id,
};

/// Which (origin, request) pairs ran, and how often.
type Ledger = Arc<Mutex<BTreeMap<(u32, u64), u32>>>;

/// A call that holds its caller inside `encode` until other calls moved
/// `hold` on by a given amount.
struct Held {
    n: u64,
    hold: Option<(Arc<AtomicU64>, u64)>,
}

impl WireValue for Held {
    const SCHEMA_ID: u64 = schema_id("serving.Held/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        if let Some((progress, until)) = &self.hold {
            while progress.load(Ordering::SeqCst) < *until {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.n.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(|n| Held { n, hold: None })
    }
}

impl Action for Held {
    const ID: u128 = 0x5e4e_0001;
    type Output = u64;
}

/// Waits for `future` on a thread that is not the owner.
fn block_on_thread<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(5));
    }
}

/// Progresses `runtime` once, after its workers finished what they had.
fn settle_and_progress(runtime: &mut Runtime) {
    while runtime.stats().action_jobs > 0 {
        std::thread::yield_now();
    }
    runtime.progress();
}

#[test]
fn reordered_and_duplicated_calls_from_many_threads_run_once_and_are_never_refused() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 120;
    let world = WorldSize::new(2).unwrap();
    let plan = FaultPlan::new()
        .reorder(Channel::Action, 4)
        .duplicate_probability(Channel::Action, 0.2)
        .delay(Channel::Action, Delay::Uniform { min: 0, max: 3 })
        .reorder(Channel::Control, 2);
    let network = SimNetwork::new(world, 29, plan).unwrap();
    let ledger: Ledger = Arc::default();
    let mut limits = RuntimeLimits::default();
    limits.max_dedup_entries = 8;
    let mut runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let mut builder = Runtime::builder(29, ProtocolLimits::default(), limits).unwrap();
            builder.domain(DEFAULT_DOMAIN, NonZeroUsize::MIN).unwrap();
            let ledger = Arc::clone(&ledger);
            builder
                .register_with_context::<Held, _>(DEFAULT_DOMAIN, move |call, ctx| {
                    let key = (ctx.origin().get(), ctx.request().get());
                    *ledger.lock().unwrap().entry(key).or_default() += 1;
                    Ok(call.n)
                })
                .unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    let target = world.rank(1).unwrap();
    let completed = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let client = runtimes[0].client();
            let completed = Arc::clone(&completed);
            let finished = Arc::clone(&finished);
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                for i in 0..CALLS {
                    let n = thread * CALLS + i;
                    // Thread 0 holds every 16th call until the others
                    // finished 24 more calls than when it began it.
                    let hold = (thread == 0 && i % 16 == 0).then(|| {
                        let now = completed.load(Ordering::SeqCst);
                        let others_left = (THREADS - 1) * CALLS - now;
                        (Arc::clone(&completed), now + 24.min(others_left))
                    });
                    let deadline = SpawnOptions::deadline(Duration::from_secs(3600));
                    let outcome =
                        block_on_thread(client.spawn_on_with(target, Held { n, hold }, deadline));
                    outcomes.push((n, outcome));
                    if thread != 0 {
                        completed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
                outcomes
            })
        })
        .collect();
    let mut steps = 0_u64;
    while finished.load(Ordering::SeqCst) < THREADS {
        for runtime in &mut runtimes {
            settle_and_progress(runtime);
        }
        network.step();
        steps += 1;
        assert!(steps < 2_000_000, "the calls did not finish: {network}");
    }
    for thread in threads {
        for (n, outcome) in thread.join().unwrap() {
            assert!(
                matches!(outcome, Ok(v) if v == n),
                "call {n}: {outcome:?}; {network}"
            );
        }
    }
    let ledger = ledger.lock().unwrap();
    assert_eq!(ledger.len() as u64, THREADS * CALLS);
    assert!(
        ledger.values().all(|&runs| runs == 1),
        "a request ran twice"
    );
    let served = runtimes[1].stats();
    assert!(
        served.serve.pressure_evictions > 0,
        "the table was too large to be tested: {served:?}"
    );
    assert!(
        served.metrics.duplicates_suppressed + served.serve.stale_refusals > 0,
        "the network duplicated nothing: {served:?}"
    );
}

/// A handler that answers with a kilobyte after a short pause, so
/// responses pile up in every queue on their way back.
struct Bulky(u64);

impl WireValue for Bulky {
    const SCHEMA_ID: u64 = schema_id("serving.Bulky/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Bulky)
    }
}

impl Action for Bulky {
    const ID: u128 = 0x5e4e_0002;
    type Output = Vec<u8>;
}

/// Limits with every queue a handful deep.
fn tiny_limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_domains = 1;
    limits.workers_per_domain = 1;
    limits.max_action_queue = 1;
    limits.max_send_tickets = 2;
    limits.max_retained_bytes = 2048;
    limits.max_cancellations = 2;
    limits.max_dedup_entries = 4;
    limits.max_pending_calls = 256;
    limits.max_progress_events = 64;
    limits
}

#[test]
fn with_every_queue_saturated_every_call_ends_and_no_response_is_dropped() {
    // Whether a response ever finds the lane full depends on how the two
    // ranks' threads interleave: a run in which none did tested nothing
    // of the outbox, so it runs again (every run checks every call).
    const RUNS: usize = 50;
    let saturated = (0..RUNS).any(|_| saturate_every_queue());
    assert!(
        saturated,
        "no response waited for the transport in {RUNS} runs"
    );
}

/// One run of the test above; returns whether a response of both ranks
/// waited in the outbox.
fn saturate_every_queue() -> bool {
    const CALLS: u64 = 200;
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 3, FaultPlan::new(), SimMode::Threaded).unwrap();
    // Ranks whose calls all ended.
    let finished = Arc::new(AtomicU64::new(0));
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            let finished = Arc::clone(&finished);
            std::thread::spawn(move || {
                // A queue deep enough that each rank's share of it (half)
                // keeps far more calls in flight than the two send
                // tickets carry: the action lanes stay full, and responses
                // wait in the outbox.
                let mut limits = tiny_limits();
                limits.max_action_queue = 64;
                limits.max_dedup_entries = 128;
                let mut builder = Runtime::builder(3, ProtocolLimits::default(), limits).unwrap();
                builder
                    .register::<Bulky, _>(|Bulky(n)| {
                        std::thread::sleep(Duration::from_micros(200));
                        Ok(vec![n as u8; 1024])
                    })
                    .unwrap();
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let client = runtime.client();
                let peer = world.rank(1 - rank.get()).unwrap();
                // As many calls at once as this rank's own bounds take,
                // both ways: requests and results all compete
                // for two send tickets and 2 KiB. A call this rank could
                // not send yet is tried again after a round of progress.
                let deadline = SpawnOptions::deadline(Duration::from_secs(120));
                let mut counts = [0_u64; 3];
                let mut calls = Vec::new();
                for n in 0..CALLS {
                    loop {
                        let call = client.spawn_on_with(peer, Bulky(n), deadline);
                        if !call.is_finished() {
                            calls.push(call);
                            break;
                        }
                        counts[2] += 1;
                        runtime.progress();
                    }
                }
                for (n, call) in calls.into_iter().enumerate() {
                    match runtime.block_on(call) {
                        Ok(bytes) => {
                            assert_eq!(bytes, vec![n as u8; 1024]);
                            counts[0] += 1;
                        }
                        Err(RuntimeError::ResourceExhausted {
                            side: Side::Remote,
                            limit: LimitField::MaxActionQueue | LimitField::MaxDedupEntries,
                        }) => counts[1] += 1,
                        Err(other) => panic!("rank {}: call {n}: {other:?}", rank.get()),
                    }
                }
                // Keep serving until the peer's calls ended too (some of
                // them may still wait on its side), then shut down.
                finished.fetch_add(1, Ordering::SeqCst);
                let stats = runtime.stats();
                let report = loop {
                    runtime.progress();
                    if finished.load(Ordering::SeqCst) == 2 && runtime.stats().serve.running == 0 {
                        break runtime.shutdown(Duration::from_secs(30));
                    }
                };
                (counts, stats, report)
            })
        })
        .collect();
    let mut saturated = true;
    for (rank, thread) in ranks.into_iter().enumerate() {
        let (counts, stats, report) = thread.join().unwrap();
        let report = report.unwrap_or_else(|timeout| *timeout.report);
        assert_eq!(counts[0] + counts[1], CALLS, "rank {rank}");
        assert!(counts[0] > 0, "rank {rank}: nothing succeeded {counts:?}");
        // Each rank keeps to its share of the peer's queue (one call),
        // so the peer never refuses one.
        assert_eq!(counts[1], 0, "rank {rank}: calls refused {counts:?}");
        assert!(
            counts[2] > 0,
            "rank {rank}: the lane never filled {counts:?}"
        );
        saturated &= stats.serve.outbox_peak > 0;
        assert!(stats.serve.outbox_peak <= stats.serve.outbox_capacity);
        assert_eq!(stats.serve.responses_expired, 0, "rank {rank}: {stats:?}");
        assert_eq!(report.pending_calls, 0, "rank {rank}: {report}");
        assert_eq!(report.unsettled_calls(), 0, "rank {rank}: {report}");
    }
    saturated
}

#[test]
fn a_declared_domain_may_not_outgrow_the_limits() {
    let mut builder = Runtime::builder(1, ProtocolLimits::default(), tiny_limits()).unwrap();
    let error = builder
        .domain(DEFAULT_DOMAIN, NonZeroUsize::new(2).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            error,
            dinah_std::BuildError::DomainWorkers {
                workers: 2,
                max: 1,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("workers_per_domain"));
    builder
        .domain(DEFAULT_DOMAIN, NonZeroUsize::MIN)
        .expect("within the limits");
}
