//! Back-pressure instead of refusals: with the default limits, 256 and
//! 1,024 calls in flight at one peer whose workers are slower than the
//! caller all complete, none refused for a full queue; the calls beyond
//! this rank's share of the peer's queue wait on the caller's side. The
//! same holds with every rank of a world of 4 calling one rank at once.
//! Fail-fast calls are refused at once instead, without being sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dinah_core::{LimitField, ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, Backpressure, CallSet, Runtime, RuntimeBuilder, RuntimeError, RuntimeThread, Side,
    SpawnOptions, WireValue,
};

#[path = "support/gate.rs"]
mod gate;
use gate::Gate;

/// Answers its number after a short sleep on a pooled worker: two workers
/// serve far fewer calls per second than one caller issues.
#[derive(WireValue, Action)]
#[action(name = "test.backpressure.Slow/1", output = u64)]
struct Slow(u64);

/// Waits at the gate, then answers its number.
#[derive(WireValue, Action)]
#[action(name = "test.backpressure.Held/1", output = u64)]
struct Held(u64);

/// What one rank's handlers did.
#[derive(Default)]
struct Served {
    slow: AtomicU64,
}

fn builder(served: &Arc<Served>, gate: &Arc<Gate>) -> RuntimeBuilder {
    let mut builder =
        Runtime::builder(11, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
    let counter = Arc::clone(served);
    builder
        .register::<Slow, _>(move |Slow(n)| {
            std::thread::sleep(Duration::from_micros(50));
            counter.slow.fetch_add(1, Ordering::Relaxed);
            Ok(n)
        })
        .unwrap();
    let gate = Arc::clone(gate);
    builder
        .register::<Held, _>(move |Held(n)| {
            gate.wait();
            Ok(n)
        })
        .unwrap();
    builder
}

/// A world of `n` ranks over threads: rank 0 returned for the test to
/// drive, the others on `RuntimeThread`s.
fn world(n: u32, served: &Arc<Served>, gate: &Arc<Gate>) -> (Runtime, Vec<RuntimeThread>) {
    let world = WorldSize::new(n).unwrap();
    let network = SimNetwork::with_mode(world, 3, FaultPlan::new(), SimMode::Threaded).unwrap();
    let others = world
        .ranks()
        .skip(1)
        .map(|rank| {
            let builder = builder(served, gate);
            let (handle, driver) = network
                .endpoint(rank, builder.hello().unwrap().handle)
                .unwrap();
            RuntimeThread::start(builder, handle, driver).unwrap()
        })
        .collect();
    let builder = builder(served, gate);
    let (handle, driver) = network
        .endpoint(Rank::ZERO, builder.hello().unwrap().handle)
        .unwrap();
    (builder.start(handle, driver).unwrap(), others)
}

/// Keeps `in_flight` calls at `peer` until `total` have ended; returns
/// how many were refused for a full queue (any other error fails).
fn keep_in_flight(runtime: &mut Runtime, peer: Rank, in_flight: usize, total: u64) -> u64 {
    let client = runtime.client();
    let mut calls = CallSet::with_capacity(in_flight);
    let (mut issued, mut refused, mut sum) = (0, 0, 0);
    while issued < total && calls.len() < in_flight {
        calls.push(client.spawn_on(peer, Slow(issued))).unwrap();
        issued += 1;
    }
    while let Some((_, result)) = runtime.block_on(calls.join_next()) {
        match result {
            Ok(n) => sum += n,
            Err(RuntimeError::ResourceExhausted { .. }) => refused += 1,
            Err(other) => panic!("call failed: {other:?}"),
        }
        if issued < total {
            calls.push(client.spawn_on(peer, Slow(issued))).unwrap();
            issued += 1;
        }
    }
    if refused == 0 {
        assert_eq!(sum, total * (total - 1) / 2, "every call answered once");
    }
    refused
}

fn shut_down(runtime: Runtime, others: Vec<RuntimeThread>) {
    for other in &others {
        other.begin_shutdown(Duration::from_secs(10));
    }
    let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.is_clean(), "{report}");
    for other in others {
        let report = other.shutdown(Duration::from_secs(10)).unwrap();
        assert!(report.is_clean(), "{report}");
    }
}

#[test]
fn default_limits_take_256_and_1024_calls_in_flight_without_a_refusal() {
    let (served, gate) = (Arc::new(Served::default()), Arc::new(Gate::default()));
    let (mut runtime, others) = world(2, &served, &gate);
    let peer = Rank::new(1, runtime.world()).unwrap();
    for in_flight in [256, 1024] {
        let refused = keep_in_flight(&mut runtime, peer, in_flight, 4 * in_flight as u64);
        assert_eq!(refused, 0, "{in_flight} in flight: calls refused");
    }
    let stats = runtime.stats();
    // Default limits: a queue of 256 shared by 2 ranks, 128 each.
    assert!(stats.flow.waited > 0, "no call ever waited: {stats:?}");
    assert_eq!(stats.flow.waiting, 0);
    assert_eq!(stats.calls_refused, 0);
    assert_eq!(served.slow.load(Ordering::Relaxed), 4 * (256 + 1024));
    shut_down(runtime, others);
}

#[test]
fn every_rank_calling_one_rank_at_once_is_never_refused() {
    let (served, gate) = (Arc::new(Served::default()), Arc::new(Gate::default()));
    let (mut runtime, others) = world(4, &served, &gate);
    // Ranks 1 to 3 each keep 1,024 calls in flight at rank 0, through
    // clients on their own threads; rank 0 serves them, and calls itself.
    let callers: Vec<_> = others
        .iter()
        .map(|other| {
            let client = other.client().clone();
            std::thread::spawn(move || {
                let mut calls = CallSet::with_capacity(1024);
                for n in 0..1024 {
                    calls.push(client.spawn_on(Rank::ZERO, Slow(n))).unwrap();
                }
                let mut refused = 0;
                futures_lite_block_on(async {
                    while let Some((_, result)) = calls.join_next().await {
                        match result {
                            Ok(_) => {}
                            Err(RuntimeError::ResourceExhausted { .. }) => refused += 1,
                            Err(other) => panic!("call failed: {other:?}"),
                        }
                    }
                });
                refused
            })
        })
        .collect();
    let own = keep_in_flight(&mut runtime, Rank::ZERO, 1024, 1024);
    assert_eq!(own, 0, "rank 0's calls to itself refused");
    for caller in callers {
        // Rank 0 keeps progressing while the others finish.
        while !caller.is_finished() {
            runtime.progress();
        }
        assert_eq!(caller.join().unwrap(), 0, "calls refused");
    }
    let stats = runtime.stats();
    assert_eq!(stats.serve.queue_full_refusals, 0, "{stats:?}");
    assert_eq!(served.slow.load(Ordering::Relaxed), 4 * 1024);
    shut_down(runtime, others);
}

#[test]
fn fail_fast_calls_are_refused_at_once_and_never_sent() {
    let (served, gate) = (Arc::new(Served::default()), Arc::new(Gate::default()));
    let (mut runtime, others) = world(2, &served, &gate);
    let client = runtime.client();
    let peer = Rank::new(1, runtime.world()).unwrap();
    // 128 held calls take this rank's whole share of the peer's queue.
    let held: Vec<_> = (0..128).map(|n| client.spawn_on(peer, Held(n))).collect();
    let fail_fast = SpawnOptions::default().with_backpressure(Backpressure::FailFast);
    let refused = client.spawn_on_with(peer, Held(1000), fail_fast);
    let waiting = client.spawn_on(peer, Held(1001));
    assert!(matches!(
        runtime.block_on(refused),
        Err(RuntimeError::ResourceExhausted {
            limit: LimitField::MaxActionQueue,
            side: Side::Remote,
        })
    ));
    let stats = runtime.stats();
    assert_eq!((stats.flow.refused_busy, stats.flow.waiting), (1, 1));
    gate.open();
    for (n, call) in held.into_iter().enumerate() {
        assert_eq!(runtime.block_on(call).unwrap(), n as u64);
    }
    assert_eq!(runtime.block_on(waiting).unwrap(), 1001);
    shut_down(runtime, others);
}

/// Polls `future` to completion on this thread (the runtime is progressed
/// on another).
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let thread = std::thread::current();
    let waker = std::task::Waker::from(Arc::new(Unpark(thread)));
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}
