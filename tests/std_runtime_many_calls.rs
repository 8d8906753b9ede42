//! Many calls at once: a `CallSet` keeps hundreds in flight and hands each
//! result back once, in the order they finish; and `RuntimeThread` lets
//! tokio tasks await dinah's calls while the runtime is progressed on its
//! own thread.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use dinah_core::{DomainId, ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, CallSet, CallSetFull, Runtime, RuntimeBuilder, RuntimeError, RuntimeThread, WireValue,
};

#[path = "support/gate.rs"]
mod gate;
use gate::Gate;

/// Squares its number.
#[derive(WireValue, Action)]
#[action(name = "test.many.Square/1", output = u64)]
struct Square(u64);

/// Waits until the test opens the gate, then answers its number.
#[derive(WireValue, Action)]
#[action(name = "test.many.Held/1", output = u64)]
struct Held(u64);

fn builder(gate: &Arc<Gate>) -> RuntimeBuilder {
    let mut builder =
        Runtime::builder(8, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
    builder
        .register_inline::<Square, _>(dinah_std::DEFAULT_DOMAIN, |Square(x)| Ok(x * x))
        .unwrap();
    let gate = Arc::clone(gate);
    builder
        .register::<Held, _>(move |Held(x)| {
            gate.wait();
            Ok(x)
        })
        .unwrap();
    builder
}

/// Two ranks over threads: rank 1 on a `RuntimeThread`, rank 0 returned
/// for the test to drive.
fn two_ranks(gate: &Arc<Gate>) -> (Runtime, RuntimeThread) {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 5, FaultPlan::new(), SimMode::Threaded).unwrap();
    let server = {
        let builder = builder(gate);
        let (handle, driver) = network
            .endpoint(world.rank(1).unwrap(), builder.hello().unwrap().handle)
            .unwrap();
        RuntimeThread::start(builder, handle, driver).unwrap()
    };
    let builder = builder(gate);
    let (handle, driver) = network
        .endpoint(Rank::ZERO, builder.hello().unwrap().handle)
        .unwrap();
    (builder.start(handle, driver).unwrap(), server)
}

/// Shuts both ranks down together: the server's shutdown starts first, so
/// each sees the other's goodbye.
fn shut_down(runtime: Runtime, server: RuntimeThread) {
    server.begin_shutdown(Duration::from_secs(10));
    let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.is_clean(), "{report}");
    let report = server.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_call_set_keeps_256_calls_in_flight_and_returns_each_once() {
    const TOTAL: u64 = 4096;
    let gate = Arc::new(Gate::default());
    let (mut runtime, server) = two_ranks(&gate);
    let client = runtime.client();
    let peer = Rank::new(1, runtime.world()).unwrap();
    let mut calls = CallSet::with_capacity(256);
    let mut issued = 0;
    let mut seen = BTreeSet::new();
    let mut most_in_flight = 0;
    while issued < TOTAL && calls.len() < calls.capacity() {
        calls.push(client.spawn_on(peer, Square(issued))).unwrap();
        issued += 1;
    }
    // Full: the call comes back, unchanged and still pending.
    let CallSetFull(extra) = calls
        .push(client.spawn_on(peer, Square(issued)))
        .unwrap_err();
    assert_eq!(runtime.block_on(extra).unwrap(), issued * issued);
    issued += 1;
    while let Some((_slot, result)) = runtime.block_on(calls.join_next()) {
        most_in_flight = most_in_flight.max(calls.len() + 1);
        let square = result.unwrap();
        let root = square.isqrt();
        assert_eq!(root * root, square);
        assert!(seen.insert(root), "{root} answered twice");
        if issued < TOTAL {
            calls.push(client.spawn_on(peer, Square(issued))).unwrap();
            issued += 1;
        }
    }
    assert_eq!(
        seen.len() as u64,
        TOTAL - 1,
        "every call but the extra once"
    );
    assert_eq!(most_in_flight, 256);
    assert!(calls.is_empty());
    gate.open();
    shut_down(runtime, server);
}

#[test]
fn join_all_answers_by_slot_and_dropping_a_set_cancels_its_calls() {
    let gate = Arc::new(Gate::default());
    let (mut runtime, server) = two_ranks(&gate);
    let client = runtime.client();
    let peer = Rank::new(1, runtime.world()).unwrap();

    let mut calls = CallSet::with_capacity(8);
    let slots: Vec<_> = (0..5)
        .map(|x| calls.push(client.spawn_on(peer, Square(x))).unwrap())
        .collect();
    let results = runtime.block_on(calls.join_all());
    assert_eq!(results.len(), 8);
    for (x, slot) in (0..5).zip(slots) {
        assert_eq!(results[slot].as_ref().unwrap().as_ref().unwrap(), &(x * x));
    }
    assert_eq!(results.iter().filter(|r| r.is_none()).count(), 3);

    // Held calls, then the set dropped: the waiters go at once.
    let mut held = CallSet::with_capacity(4);
    for x in 0..4 {
        held.push(client.spawn_on(peer, Held(x))).unwrap();
    }
    runtime.progress();
    assert_eq!(runtime.stats().pending_calls, 4);
    drop(held);
    assert_eq!(runtime.stats().pending_calls, 0);
    assert_eq!(runtime.stats().calls_abandoned, 4);
    gate.open();
    shut_down(runtime, server);
}

#[test]
fn tokio_tasks_await_calls_of_runtimes_on_their_own_threads() {
    let gate = Arc::new(Gate::default());
    gate.open();
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 9, FaultPlan::new(), SimMode::Threaded).unwrap();
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let builder = builder(&gate);
            let (handle, driver) = network
                .endpoint(rank, builder.hello().unwrap().handle)
                .unwrap();
            RuntimeThread::start(builder, handle, driver).unwrap()
        })
        .collect();
    // Every call below is made and awaited by tokio tasks; the two
    // runtimes progress on their own threads.
    let client = ranks[0].client().clone();
    let peer = Rank::new(1, world).unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let sums = tokio.block_on(async move {
        let tasks: Vec<_> = (0..16_u64)
            .map(|task| {
                let client = client.clone();
                tokio::spawn(async move {
                    let mut sum = 0;
                    for i in 0..50 {
                        sum += client.spawn_on(peer, Square(task * 100 + i)).await?;
                        sum += client.spawn_on(peer, Held(1)).await?;
                    }
                    Ok::<u64, RuntimeError>(sum)
                })
            })
            .collect();
        let mut sums = Vec::new();
        for task in tasks {
            sums.push(task.await.unwrap().unwrap());
        }
        sums
    });
    for (task, sum) in (0..16_u64).zip(sums) {
        let squares: u64 = (0..50).map(|i| (task * 100 + i) * (task * 100 + i)).sum();
        assert_eq!(sum, squares + 50);
    }
    // Both shutdowns start before either waits for the other's goodbye.
    for rank in &ranks {
        rank.begin_shutdown(Duration::from_secs(10));
    }
    for rank in ranks {
        let report = rank.shutdown(Duration::from_secs(10)).unwrap();
        assert!(report.is_clean(), "{report}");
    }
}

#[test]
fn a_runtime_thread_reports_a_build_error() {
    let world = WorldSize::new(1).unwrap();
    let network = SimNetwork::with_mode(world, 2, FaultPlan::new(), SimMode::Threaded).unwrap();
    let gate = Arc::new(Gate::default());
    let builder = builder(&gate);
    let (handle, driver) = network
        .endpoint(Rank::ZERO, builder.hello().unwrap().handle)
        .unwrap();
    // An action in a domain never declared: the builder refuses on the
    // runtime's thread, and the error comes back here.
    let mut other =
        Runtime::builder(8, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
    other
        .register_in::<Square, _>(DomainId::new(99).unwrap(), |Square(x)| Ok(x * x))
        .unwrap();
    drop(builder);
    let error = RuntimeThread::start(other, handle, driver).unwrap_err();
    assert!(
        matches!(
            error,
            dinah_std::RuntimeThreadError::Build(dinah_std::BuildError::UnknownDomain { .. })
        ),
        "{error:?}"
    );
}
