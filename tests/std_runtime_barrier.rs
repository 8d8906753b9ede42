//! `Runtime::barrier` over the in-memory transport: nobody leaves before
//! everybody arrived (at world sizes that are and are not powers of two),
//! a rank that never arrives fails the others by the deadline, a rank that
//! is gone fails them at once, and misuse gets typed errors.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, BuildError, CodecError, Runtime, RuntimeError, RuntimeThread, SegmentReader,
    SegmentWriter, WireValue, action_id, schema_id,
};

const ROUNDS: usize = 20;

/// Starts `size` ranks on threads; each runs `body` on its runtime and
/// returns what it returns.
fn ranks<T, F>(size: u32, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(&mut Runtime) -> T + Send + Sync + 'static,
{
    let world = WorldSize::new(size).unwrap();
    let network = SimNetwork::with_mode(world, 7, FaultPlan::new(), SimMode::Threaded).unwrap();
    let body = Arc::new(body);
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let (network, body) = (network.clone(), Arc::clone(&body));
            std::thread::spawn(move || {
                let builder =
                    Runtime::builder(3, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                let (handle, driver) = network
                    .endpoint(rank, builder.hello().unwrap().handle)
                    .unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let out = body(&mut runtime);
                runtime.shutdown(Duration::from_secs(10)).unwrap();
                out
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn nobody_leaves_early(size: u32) {
    let counts: Arc<[AtomicU32; ROUNDS]> = Arc::new(std::array::from_fn(|_| AtomicU32::new(0)));
    ranks(size, move |runtime| {
        let me = u64::from(runtime.rank().get());
        for (round, count) in counts.iter().enumerate() {
            // Ranks arrive at different times.
            std::thread::sleep(Duration::from_micros((me * 37 + round as u64 * 11) % 300));
            count.fetch_add(1, Ordering::SeqCst);
            runtime.barrier(Duration::from_secs(30)).unwrap();
            assert_eq!(count.load(Ordering::SeqCst), size, "round {round}");
        }
    });
}

#[test]
fn nobody_leaves_before_everybody_arrived() {
    for size in [1, 2, 3, 4, 5, 7] {
        nobody_leaves_early(size);
    }
}

#[test]
fn a_rank_that_never_arrives_fails_the_others_by_the_deadline() {
    let timeout = Duration::from_millis(200);
    let done = Arc::new(AtomicBool::new(false));
    let results = ranks(2, move |runtime| {
        if runtime.rank() == Rank::ZERO {
            let start = Instant::now();
            let result = runtime.barrier(timeout);
            let took = start.elapsed();
            done.store(true, Ordering::SeqCst);
            Some((result, took))
        } else {
            // Serves, but never calls the barrier.
            runtime.block_on(std::future::poll_fn(|_| {
                if done.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }));
            None
        }
    });
    let (result, took) = results[0].clone().unwrap();
    assert!(
        matches!(result, Err(RuntimeError::DeadlineExceeded { after }) if after == timeout),
        "{result:?}"
    );
    assert!(took >= timeout && took < timeout * 10, "{took:?}");
}

#[test]
fn a_rank_that_is_gone_fails_the_barrier_at_once() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 8, FaultPlan::new(), SimMode::Threaded).unwrap();
    let start_rank = |rank| {
        let builder =
            Runtime::builder(3, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
        let (handle, driver) = network
            .endpoint(rank, builder.hello().unwrap().handle)
            .unwrap();
        (builder, handle, driver)
    };
    let (builder, handle, driver) = start_rank(Rank::ZERO);
    let mut zero = builder.start(handle, driver).unwrap();
    let (builder, handle, driver) = start_rank(world.rank(1).unwrap());
    let one = RuntimeThread::start(builder, handle, driver).unwrap();
    // Rank 1 shuts down and is gone; rank 0 keeps serving meanwhile.
    one.begin_shutdown(Duration::from_millis(300));
    let gone = std::thread::spawn(move || one.shutdown(Duration::from_millis(300)));
    zero.block_on(std::future::poll_fn(|_| {
        if gone.is_finished() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }));
    let _ = gone.join().unwrap();
    let start = Instant::now();
    let result = zero.barrier(Duration::from_secs(30));
    assert!(
        matches!(
            result,
            Err(RuntimeError::Transport { .. } | RuntimeError::ShuttingDown)
        ),
        "{result:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn barriers_run_one_at_a_time_and_zero_timeouts_are_refused() {
    ranks(2, |runtime| {
        let client = runtime.client();
        let mut first = Box::pin(client.barrier(Duration::from_secs(30)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        let second = runtime.block_on(client.barrier(Duration::from_secs(30)));
        assert!(
            matches!(second, Err(RuntimeError::BarrierInProgress)),
            "{second:?}"
        );
        assert!(matches!(
            runtime.barrier(Duration::ZERO),
            Err(RuntimeError::InvalidDeadline)
        ));
        // The first one still completes once both ranks are in it.
        runtime.block_on(first).unwrap();
        // And the next barrier lines up across the ranks.
        runtime.barrier(Duration::from_secs(30)).unwrap();
    });
}

/// An action that claims the barrier's reserved ID.
struct Impostor;
impl WireValue for Impostor {
    const SCHEMA_ID: u64 = schema_id("test.Impostor/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Impostor)
    }
}
impl Action for Impostor {
    const ID: u128 = action_id("dinah.barrier.Arrive/1");
    type Output = ();
}

#[test]
fn the_barriers_action_id_is_reserved() {
    let mut builder =
        Runtime::builder(3, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
    let refused = builder.register::<Impostor, _>(|Impostor| Ok(()));
    assert!(
        matches!(refused, Err(BuildError::DuplicateAction { .. })),
        "{refused:?}"
    );
}
