//! `Runtime::broadcast`, `reduce` and `all_reduce` over the in-memory
//! transport, at world sizes that are and are not powers of two: every
//! rank gets the root's value, the root gets the values combined in rank
//! order from itself, a root may run ahead of slower ranks, a rank that
//! never joins fails the others by the deadline, and misuse gets typed
//! errors.

use std::sync::Arc;
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{CodecError, Runtime, RuntimeError};

const PATIENCE: Duration = Duration::from_secs(30);

/// Starts `size` ranks on threads; each runs `body` on its runtime, then
/// a barrier and a shutdown, and returns what `body` returns.
fn ranks<T, F>(size: u32, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(&mut Runtime) -> T + Send + Sync + 'static,
{
    let world = WorldSize::new(size).unwrap();
    let network = SimNetwork::with_mode(world, 9, FaultPlan::new(), SimMode::Threaded).unwrap();
    let body = Arc::new(body);
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let (network, body) = (network.clone(), Arc::clone(&body));
            std::thread::spawn(move || {
                let builder =
                    Runtime::builder(4, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                let (handle, driver) = network
                    .endpoint(rank, builder.hello().unwrap().handle)
                    .unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let out = body(&mut runtime);
                runtime.barrier(PATIENCE).unwrap();
                let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
                assert!(report.is_clean(), "{report}");
                out
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn every_root_reaches_every_rank(size: u32) {
    ranks(size, move |runtime| {
        let me = runtime.rank();
        for root in runtime.world().ranks() {
            let value = (me == root).then(|| vec![(root.get(), format!("from {}", root.get()))]);
            let got: Vec<(u32, String)> = runtime.broadcast(root, value, PATIENCE).unwrap();
            assert_eq!(got, vec![(root.get(), format!("from {}", root.get()))]);
            // Joining is associative, not commutative: the root's result
            // lists the ranks in order from itself.
            let joined = runtime
                .reduce(root, me.get().to_string(), |a, b| a + "," + &b, PATIENCE)
                .unwrap();
            if me == root {
                let order: Vec<String> = (0..size)
                    .map(|i| ((root.get() + i) % size).to_string())
                    .collect();
                assert_eq!(joined, Some(order.join(",")), "size {size}");
            } else {
                assert_eq!(joined, None);
            }
        }
        let total = runtime
            .all_reduce(u64::from(me.get()) + 1, |a, b| a + b, PATIENCE)
            .unwrap();
        let n = u64::from(size);
        assert_eq!(total, n * (n + 1) / 2);
    });
}

#[test]
fn broadcast_and_reduce_reach_every_rank_in_order() {
    for size in [1, 2, 3, 4, 5, 7, 8] {
        every_root_reaches_every_rank(size);
    }
}

#[test]
fn a_root_may_run_ahead_of_slower_ranks() {
    ranks(4, |runtime| {
        let me = runtime.rank().get();
        for i in 0..300_u64 {
            if me == 3 && i % 50 == 0 {
                // A slow rank: the root's next broadcasts wait in its
                // mailbox, or are sent again once there is room.
                std::thread::sleep(Duration::from_millis(20));
            }
            let value = (me == 0).then_some(i);
            assert_eq!(runtime.broadcast(Rank::ZERO, value, PATIENCE).unwrap(), i);
        }
    });
}

#[test]
fn a_rank_that_never_joins_fails_the_others_by_the_deadline() {
    let results = ranks(2, |runtime| {
        if runtime.rank() == Rank::ZERO {
            let result =
                runtime.reduce(Rank::ZERO, 1_u32, |a, b| a + b, Duration::from_millis(200));
            Some(result)
        } else {
            // Rank 1 serves (through the barrier after the body) but never
            // calls the reduce.
            None
        }
    });
    assert!(matches!(
        results[0],
        Some(Err(RuntimeError::DeadlineExceeded { .. }))
    ));
}

#[test]
fn misuse_gets_typed_errors() {
    ranks(2, |runtime| {
        let me = runtime.rank();
        // The root must bring a value.
        if me == Rank::ZERO {
            assert!(matches!(
                runtime.broadcast::<u32>(Rank::ZERO, None, PATIENCE),
                Err(RuntimeError::MissingRootValue)
            ));
        }
        let outside = Rank::new(1, WorldSize::new(2).unwrap()).unwrap();
        let stranger = Rank::new(5, WorldSize::new(6).unwrap()).unwrap();
        assert!(matches!(
            runtime.broadcast(stranger, Some(1_u8), PATIENCE),
            Err(RuntimeError::NoSuchRank { .. })
        ));
        assert!(matches!(
            runtime.broadcast(outside, Some(1_u8), Duration::ZERO),
            Err(RuntimeError::InvalidDeadline)
        ));
        runtime.barrier(PATIENCE).unwrap();
        // Ranks that disagree on the type: the receiver says so.
        if me == Rank::ZERO {
            runtime
                .broadcast(Rank::ZERO, Some(7_u64), PATIENCE)
                .unwrap();
        } else {
            assert!(matches!(
                runtime.broadcast::<String>(Rank::ZERO, None, PATIENCE),
                Err(RuntimeError::Codec(CodecError::SchemaMismatch { .. }))
            ));
        }
    });
}
