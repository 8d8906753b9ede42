//! The runtime under random faults: for many seeds, a random fault plan and
//! a random workload run on a stepped simulated network, and every request
//! must end exactly once (a result or a typed error), no handler may run
//! twice for one request, and shutdown must leave no runtime state behind.
//!
//! Runs replay from their seed: one thread drives every rank, the network
//! moves only when stepped, each rank's handlers run on a one-worker
//! domain (FIFO), and the driver waits for the workers to go idle before
//! each progress call. (A job submitted during a progress call may still
//! finish within it or after it, which can move a later send by a tick;
//! the replay test below uses inline handlers to be exact.) A failure prints its seed; set
//! `DINAH_FAULT_SEED=<seed>` to run just that one, `DINAH_FAULT_SEEDS` to
//! change how many seeds run and `DINAH_FAULT_SEED_BASE` where they start
//! (the xtask `sim-long` lane runs 20,000 more, after the default ones).

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::Channel;
use dinah_core::{LimitField, ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{Delay, FaultPlan, SimNetwork};
use dinah_std::{
    Action, ActionError, CodecError, DEFAULT_DOMAIN, RemoteFuture, Runtime, RuntimeError,
    SegmentReader, SegmentWriter, ShutdownReport, SpawnOptions, WireValue, schema_id,
};

/// Seeds run by default.
const DEFAULT_SEEDS: u64 = 1000;

/// Records which (origin, request) pairs ran, to catch double execution.
type Ledger = Arc<Mutex<BTreeMap<(u32, u64), u32>>>;

struct Work(u64);
impl WireValue for Work {
    const SCHEMA_ID: u64 = schema_id("faults.Work/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Work)
    }
}
impl Action for Work {
    const ID: u128 = 0xfa_0001;
    type Output = u64;
}

/// A small deterministic generator for the plan and the workload
/// (SplitMix64), independent of the network's own generator.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, options: &[T]) -> T {
        options[self.below(options.len() as u64) as usize]
    }
}

fn plan_for(rng: &mut Gen, world: WorldSize) -> (FaultPlan, bool) {
    let mut plan = FaultPlan::new();
    let mut lossy = false;
    for channel in [Channel::Control, Channel::Action] {
        let drop = rng.pick(&[0.0, 0.0, 0.05, 0.2]);
        lossy |= drop > 0.0;
        plan = plan
            .drop_probability(channel, drop)
            .duplicate_probability(channel, rng.pick(&[0.0, 0.1, 0.3]))
            .delay(
                channel,
                Delay::Uniform {
                    min: 0,
                    max: rng.pick(&[0, 2, 8]),
                },
            )
            .reorder(channel, rng.pick(&[0u32, 0, 2, 4]));
        if rng.below(4) == 0 {
            plan = plan.inbox_capacity(channel, rng.pick(&[1usize, 2, 8]));
        }
    }
    if world.get() > 1 && rng.below(5) == 0 {
        let rank = world
            .rank(rng.below(u64::from(world.get())) as u32)
            .unwrap();
        plan = plan.disconnect_rank(rank, 5 + rng.below(60));
        lossy = true;
    }
    (plan, lossy)
}

fn limits_with_dedup(entries: u32) -> RuntimeLimits {
    let mut limits = limits();
    limits.max_dedup_entries = entries;
    limits
}

fn limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_action_queue = 4;
    limits.max_pending_calls = 64;
    limits.max_send_tickets = 16;
    limits.max_cancellations = 16;
    limits.dedup_ttl = Duration::from_secs(3600);
    limits.shutdown_timeout = Duration::from_secs(1);
    limits
}

fn noop_poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut cx)
}

/// Progresses `runtime` once, after its workers finished what they had.
fn settle_and_progress(runtime: &mut Runtime) {
    while runtime.stats().action_jobs > 0 {
        std::thread::yield_now();
    }
    runtime.progress();
}

struct Call {
    future: Option<RemoteFuture<u64>>,
    outcome: Option<Result<u64, RuntimeError>>,
    drop_at: Option<u64>,
    input: u64,
}

fn run(seed: u64) {
    let mut rng = Gen(seed);
    let world = WorldSize::new(rng.pick(&[1u32, 2, 3, 4])).unwrap();
    let (plan, lossy) = plan_for(&mut rng, world);
    // A small dedup table forces early eviction of finished entries and
    // exercises the per-origin refusal watermark.
    let dedup_entries = rng.pick(&[4u32, 16, 4096]);
    let network = SimNetwork::new(world, seed, plan).unwrap();
    let ledger: Ledger = Arc::default();
    let mut runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let mut builder = Runtime::builder(
                seed,
                ProtocolLimits::default(),
                limits_with_dedup(dedup_entries),
            )
            .unwrap();
            builder.domain(DEFAULT_DOMAIN, NonZeroUsize::MIN).unwrap();
            let ledger = Arc::clone(&ledger);
            builder
                .register_with_context::<Work, _>(DEFAULT_DOMAIN, move |Work(n), ctx| {
                    let mut ledger = ledger.lock().unwrap();
                    *ledger
                        .entry((ctx.origin().get(), ctx.request().get()))
                        .or_default() += 1;
                    if n % 7 == 3 {
                        Err(ActionError::new("sevens fail"))
                    } else {
                        Ok(n * 2)
                    }
                })
                .unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();

    // The workload: each rank issues calls at random ticks.
    let mut calls: Vec<Vec<(u64, Rank, Call)>> = (0..world.get())
        .map(|_| {
            (0..rng.below(12) + 1)
                .map(|_| {
                    let at = rng.below(40);
                    let target = world
                        .rank(rng.below(u64::from(world.get())) as u32)
                        .unwrap();
                    let drop_at = (rng.below(6) == 0).then(|| at + rng.below(10));
                    let call = Call {
                        future: None,
                        outcome: None,
                        drop_at,
                        input: rng.below(1000),
                    };
                    (at, target, call)
                })
                .collect()
        })
        .collect();
    // In a quarter of the runs every rank also sends a burst of calls, far
    // beyond its share of the next rank's queue, at one tick.
    if rng.below(4) == 0 {
        for (rank, rank_calls) in calls.iter_mut().enumerate() {
            let target = world.rank((rank as u32 + 1) % world.get()).unwrap();
            for _ in 0..24 {
                let call = Call {
                    future: None,
                    outcome: None,
                    drop_at: None,
                    input: rng.below(1000),
                };
                rank_calls.push((1, target, call));
            }
        }
    }
    let deadlines = [
        Duration::from_millis(5),
        Duration::from_millis(30),
        Duration::from_millis(200),
    ];
    let context = || format!("seed {seed}: {network}");

    let mut tick = 0u64;
    loop {
        for (rank, runtime) in runtimes.iter_mut().enumerate() {
            for (at, target, call) in &mut calls[rank] {
                if *at == tick && call.future.is_none() && call.outcome.is_none() {
                    let deadline = deadlines[(call.input % 3) as usize];
                    let options = SpawnOptions::deadline(deadline);
                    call.future = Some(runtime.client().spawn_on_with(
                        *target,
                        Work(call.input),
                        options,
                    ));
                }
                if call.drop_at == Some(tick) && call.future.take().is_some() {
                    call.outcome = Some(Err(RuntimeError::Cancelled));
                }
            }
            settle_and_progress(runtime);
            for (_, _, call) in &mut calls[rank] {
                if let Some(future) = &mut call.future {
                    if let Poll::Ready(outcome) = noop_poll(future) {
                        call.outcome = Some(outcome);
                        call.future = None;
                    }
                }
            }
        }
        let all_done = calls
            .iter()
            .flatten()
            .all(|(_, _, call)| call.outcome.is_some());
        if all_done && tick > 40 {
            break;
        }
        assert!(tick < 2_000, "calls did not all end; {}", context());
        network.step();
        tick += 1;
    }

    // Every call ended exactly once, with the right result when it succeeded.
    for (_, _, call) in calls.iter().flatten() {
        match call.outcome.as_ref().expect("ended") {
            Ok(value) => assert_eq!(*value, call.input * 2, "{}", context()),
            // Each rank keeps to its share of every domain's queue, through
            // loss, duplication, delays and disconnects: no target ever
            // refuses a call for a full queue.
            Err(RuntimeError::ResourceExhausted {
                limit: LimitField::MaxActionQueue,
                side,
            }) => panic!("a full {side} queue refused a call; {}", context()),
            Err(
                RuntimeError::DeadlineExceeded { .. }
                | RuntimeError::Cancelled
                | RuntimeError::Remote { .. }
                | RuntimeError::Transport { .. }
                | RuntimeError::ResourceExhausted { .. }
                | RuntimeError::DuplicateResultUnavailable,
            ) => {}
            Err(other) => panic!("unexpected error {other:?}; {}", context()),
        }
    }
    // No handler ran twice for one request.
    for (key, runs) in ledger.lock().unwrap().iter() {
        assert_eq!(*runs, 1, "request {key:?} ran {runs} times; {}", context());
    }

    // Shutdown: all ranks together, stepping the network.
    for runtime in &mut runtimes {
        runtime.begin_shutdown(Duration::from_secs(1));
    }
    let mut reports: Vec<Option<Result<ShutdownReport, _>>> = vec![None; runtimes.len()];
    for _ in 0..5_000 {
        for (rank, runtime) in runtimes.iter_mut().enumerate() {
            if reports[rank].is_none() {
                while runtime.stats().action_jobs > 0 {
                    std::thread::yield_now();
                }
                if let Poll::Ready(report) = runtime.poll_shutdown() {
                    reports[rank] = Some(report);
                }
            }
        }
        if reports.iter().all(Option::is_some) {
            break;
        }
        network.step();
    }
    for (rank, report) in reports.into_iter().enumerate() {
        let report = match report
            .unwrap_or_else(|| panic!("rank {rank} never finished shutting down; {}", context()))
        {
            Ok(report) => report,
            Err(timeout) => *timeout.report,
        };
        // The runtime's own state always reaches zero.
        assert_eq!(
            report.pending_calls,
            0,
            "rank {rank}: {report}; {}",
            context()
        );
        assert_eq!(
            report.action_jobs,
            0,
            "rank {rank}: {report}; {}",
            context()
        );
        assert_eq!(
            report.dedup_entries,
            0,
            "rank {rank}: {report}; {}",
            context()
        );
        // Whatever the faults did, every call issued ended exactly once:
        // completed, failed, expired or abandoned.
        assert_eq!(
            report.unsettled_calls(),
            0,
            "rank {rank}: {:?}, {} abandoned; {}",
            report.metrics,
            report.calls_abandoned,
            context()
        );
        // Without loss, so does the transport's.
        if !lossy {
            assert!(report.is_clean(), "rank {rank}: {report}; {}", context());
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("DINAH_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let count = std::env::var("DINAH_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    let first: u64 = std::env::var("DINAH_FAULT_SEED_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (first..first.saturating_add(count)).collect()
}

#[test]
fn random_faults_never_lose_or_repeat_a_request() {
    for seed in seeds() {
        let outcome = std::panic::catch_unwind(|| run(seed));
        if let Err(panic) = outcome {
            #[expect(clippy::print_stderr, reason = "the failing seed is the replay key")]
            {
                eprintln!("failing seed: {seed} (rerun with DINAH_FAULT_SEED={seed})");
            }
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn a_small_dedup_table_evicts_finished_entries_instead_of_refusing() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::new(world, 5, FaultPlan::new()).unwrap();
    let mut runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let mut builder =
                Runtime::builder(5, ProtocolLimits::default(), limits_with_dedup(4)).unwrap();
            builder.register::<Work, _>(|Work(n)| Ok(n + 1)).unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    let peer = world.rank(1).unwrap();
    for i in 0..100u64 {
        let mut future = runtimes[0].client().spawn_on(peer, Work(i));
        let outcome = loop {
            for runtime in &mut runtimes {
                settle_and_progress(runtime);
            }
            if let Poll::Ready(outcome) = noop_poll(&mut future) {
                break outcome;
            }
            network.step();
        };
        assert_eq!(outcome.unwrap(), i + 1, "call {i}");
    }
    let stats = runtimes[1].stats();
    assert_eq!(stats.serve.served, 100);
    assert!(stats.serve.pressure_evictions >= 96, "{stats:?}");
    assert_eq!(stats.serve.stale_refusals, 0, "{stats:?}");
    assert!(stats.serve.dedup_entries <= 4);
}

#[test]
fn the_same_seed_replays_the_same_run() {
    // Replaying is what makes a failing seed useful: two runs of one seed
    // must make the same network decisions.
    for seed in [3, 17, 99] {
        let first = replay_counts(seed);
        let second = replay_counts(seed);
        assert_eq!(first, second, "seed {seed} did not replay");
    }
}

fn replay_counts(seed: u64) -> String {
    let mut rng = Gen(seed);
    let world = WorldSize::new(rng.pick(&[2u32, 3, 4])).unwrap();
    let (plan, _) = plan_for(&mut rng, world);
    let network = SimNetwork::new(world, seed, plan).unwrap();
    let mut runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let mut builder = Runtime::builder(seed, ProtocolLimits::default(), limits()).unwrap();
            builder.domain(DEFAULT_DOMAIN, NonZeroUsize::MIN).unwrap();
            // Inline, so no worker thread races the owner: a pooled job
            // submitted in a round may finish in that round or the next,
            // which moves later sends (and, with flow control, releases)
            // by a tick.
            builder
                .register_inline::<Work, _>(DEFAULT_DOMAIN, |Work(n)| Ok(n))
                .unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    let mut futures = Vec::new();
    for (i, runtime) in runtimes.iter().enumerate() {
        for j in 0..8u64 {
            let target = world
                .rank(((i as u64 + j) % u64::from(world.get())) as u32)
                .unwrap();
            futures.push(runtime.client().spawn_on_with(
                target,
                Work(j),
                SpawnOptions::deadline(Duration::from_millis(50)),
            ));
        }
    }
    let mut outcomes: Vec<Option<String>> = vec![None; futures.len()];
    for _ in 0..200 {
        for runtime in &mut runtimes {
            settle_and_progress(runtime);
        }
        for (future, outcome) in futures.iter_mut().zip(&mut outcomes) {
            if outcome.is_none() {
                if let Poll::Ready(result) = noop_poll(future) {
                    *outcome = Some(format!("{result:?}"));
                }
            }
        }
        network.step();
    }
    format!("{:?} {:?}", network.counts(), outcomes)
}
