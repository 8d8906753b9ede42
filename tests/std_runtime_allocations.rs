//! A steady stream of small inline actions allocates no frames: every
//! frame is built in a buffer the thread freed earlier
//! (`dinah_std::transport::frame_buffers`). A shutdown frees the owner
//! thread's spare buffers. The first test drives two ranks over the
//! stepped in-memory network from this one thread, so every allocation of
//! both runtimes' owner threads happens here and is counted exactly. A
//! `CallSet` adds nothing: its `push` and `poll_next` allocate nothing
//! once the set is made.
//!
//! Pooled actions are not counted here: besides the job block, which the
//! serving owner reuses (checked exactly in
//! `dinah-std/src/runtime/serve/dispatch/tests.rs`), the owner allocates a
//! Rayon pool job whenever a submission finds no worker draining the
//! domain's queue, and how often that happens depends on how the workers
//! are scheduled: the same run made between 130 and 3,000 allocations for
//! 4,000 actions. `benches/runtime.rs` reports the pooled counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah::core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah::std::transport::frame_buffers;
use dinah::std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah::std::{
    Action, CallSet, CodecError, RemoteFuture, Runtime, RuntimeClient, SegmentReader,
    SegmentWriter, WireValue, schema_id,
};

/// Counts the allocations of the thread that makes them.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; the counter is a
// `const`-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: as for `realloc` on `System`, which allocated `ptr`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Returns its input: registered inline (`Echo<false>`, run on the
/// serving owner thread) or on the default domain's workers
/// (`Echo<true>`, the default registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Echo<const POOLED: bool>(u64);

type InlineEcho = Echo<false>;
type PooledEcho = Echo<true>;

impl<const POOLED: bool> WireValue for Echo<POOLED> {
    const SCHEMA_ID: u64 = if POOLED {
        schema_id("tests.allocations.PooledEcho/1")
    } else {
        schema_id("tests.allocations.Echo/1")
    };
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Echo)
    }
}

impl<const POOLED: bool> Action for Echo<POOLED> {
    const ID: u128 = if POOLED { 0xa110_c002 } else { 0xa110_c001 };
    type Output = u64;
}

/// One echo call, inline or pooled.
fn call(client: &RuntimeClient, peer: Rank, pooled: bool, n: u64) -> RemoteFuture<u64> {
    if pooled {
        client.spawn_on(peer, Echo::<true>(n))
    } else {
        client.spawn_on(peer, Echo::<false>(n))
    }
}

/// Two runtimes over one stepped network, `InlineEcho` registered inline
/// and `PooledEcho` on the default domain's workers.
fn pair(network: &SimNetwork, limits: RuntimeLimits) -> [Runtime; 2] {
    let start = |rank: u32| {
        let mut builder = Runtime::builder(1, ProtocolLimits::default(), limits).expect("limits");
        builder
            .register_inline::<InlineEcho, _>(dinah::std::DEFAULT_DOMAIN, |Echo(n)| Ok(n))
            .expect("registers");
        builder
            .register::<PooledEcho, _>(|Echo(n)| Ok(n))
            .expect("registers");
        builder.clock(Arc::new(network.clock()));
        let hello = builder.hello().expect("a hello");
        let world = network.world();
        let (handle, driver) = network
            .endpoint(world.rank(rank).expect("in the world"), hello.handle)
            .expect("an endpoint");
        builder.start(handle, driver).expect("starts")
    };
    [start(0), start(1)]
}

/// Runs `count` echoes (inline or pooled) from rank 0 to rank 1,
/// `in_flight` at a time, and checks every answer.
fn run(
    runtimes: &mut [Runtime; 2],
    network: &SimNetwork,
    pooled: bool,
    in_flight: usize,
    count: u64,
) {
    let client = runtimes[0].client();
    let peer = Rank::new(1, network.world()).expect("rank 1");
    let mut cx = Context::from_waker(Waker::noop());
    let mut waiting = VecDeque::with_capacity(in_flight);
    let (mut issued, mut answered) = (0, 0);
    while answered < count {
        while waiting.len() < in_flight && issued < count {
            waiting.push_back((issued, call(&client, peer, pooled, issued)));
            issued += 1;
        }
        for runtime in runtimes.iter_mut() {
            runtime.progress();
        }
        network.step();
        while let Some((sent, future)) = waiting.front_mut() {
            let Poll::Ready(output) = Pin::new(future).poll(&mut cx) else {
                break;
            };
            assert_eq!(output.expect("the echo answers"), *sent);
            waiting.pop_front();
            answered += 1;
        }
    }
}

/// The allocations this thread (both ranks' owner) makes for `ACTIONS`
/// steady-state echoes, inline or pooled, 64 in flight over a stepped
/// network seeded with `seed`.
fn steady_allocations(pooled: bool, seed: u64) -> u64 {
    let network = SimNetwork::with_mode(
        WorldSize::new(2).expect("two ranks"),
        seed,
        FaultPlan::new(),
        SimMode::Stepped {
            tick: Duration::from_micros(1),
        },
    )
    .expect("a stepped network");
    let limits = RuntimeLimits::default();
    let mut runtimes = pair(&network, limits);
    let in_flight = 64;
    // Warm up past twice the dedup table, so it is full and every new
    // request evicts the oldest finished entry (the steady state), and
    // every buffer and table has its working size.
    run(
        &mut runtimes,
        &network,
        pooled,
        in_flight,
        2 * u64::from(limits.max_dedup_entries),
    );
    let before = allocations();
    run(&mut runtimes, &network, pooled, in_flight, ACTIONS);
    let made = allocations() - before;
    // A stepped network's time moves only when stepped, so a shutdown
    // here would wait forever for its peer; the test ends instead.
    std::mem::forget(runtimes);
    made
}

/// Actions counted per test.
const ACTIONS: u64 = 4_000;

#[test]
fn steady_inline_actions_allocate_no_frames() {
    let made = steady_allocations(false, 7);
    // Without reused frame buffers each action allocated its request and
    // its response frame: 8,000 here.
    assert!(
        made * 100 < ACTIONS,
        "{made} allocations for {ACTIONS} actions (both ranks)"
    );
}

/// Runs `count` inline echoes from rank 0 to rank 1 through `calls`, as
/// many in flight as it holds; returns the allocations made inside the
/// set's own `push` and `poll_next`.
fn run_through(
    calls: &mut CallSet<u64>,
    runtimes: &mut [Runtime; 2],
    network: &SimNetwork,
    count: u64,
) -> u64 {
    let client = runtimes[0].client();
    let peer = Rank::new(1, network.world()).expect("rank 1");
    let mut cx = Context::from_waker(Waker::noop());
    let (mut issued, mut answered, mut in_set) = (0, 0, 0);
    while answered < count {
        while calls.len() < calls.capacity() && issued < count {
            let call = client.spawn_on(peer, Echo::<false>(issued));
            let before = allocations();
            calls.push(call).expect("room");
            in_set += allocations() - before;
            issued += 1;
        }
        for runtime in runtimes.iter_mut() {
            runtime.progress();
        }
        network.step();
        loop {
            let before = allocations();
            let polled = calls.poll_next(&mut cx);
            in_set += allocations() - before;
            let Poll::Ready(Some((_, output))) = polled else {
                break;
            };
            assert!(output.expect("the echo answers") < count);
            answered += 1;
        }
    }
    in_set
}

#[test]
fn a_call_set_allocates_nothing_once_made() {
    let network = SimNetwork::with_mode(
        WorldSize::new(2).expect("two ranks"),
        11,
        FaultPlan::new(),
        SimMode::Stepped {
            tick: Duration::from_micros(1),
        },
    )
    .expect("a stepped network");
    let limits = RuntimeLimits::default();
    let mut runtimes = pair(&network, limits);
    let mut calls = CallSet::with_capacity(64);
    run_through(
        &mut calls,
        &mut runtimes,
        &network,
        2 * u64::from(limits.max_dedup_entries),
    );
    let before = allocations();
    let in_set = run_through(&mut calls, &mut runtimes, &network, ACTIONS);
    let made = allocations() - before;
    assert_eq!(in_set, 0, "pushing and polling the set allocated");
    assert!(
        made * 100 < ACTIONS,
        "{made} allocations for {ACTIONS} actions (both ranks)"
    );
    std::mem::forget(runtimes);
}

#[test]
fn a_shutdown_frees_the_owner_threads_spare_frame_buffers() {
    let world = WorldSize::new(2).expect("two ranks");
    let network =
        SimNetwork::with_mode(world, 3, FaultPlan::new(), SimMode::Threaded).expect("a network");
    let arrived = Arc::new(AtomicU32::new(0));
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            let arrived = Arc::clone(&arrived);
            std::thread::spawn(move || {
                let mut builder =
                    Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())
                        .expect("limits");
                builder
                    .register_inline::<InlineEcho, _>(dinah::std::DEFAULT_DOMAIN, |Echo(n)| Ok(n))
                    .expect("registers");
                let hello = builder.hello().expect("a hello");
                let (handle, driver) = network.endpoint(rank, hello.handle).expect("an endpoint");
                let mut runtime = builder.start(handle, driver).expect("starts");
                let client = runtime.client();
                let peer = Rank::new(1 - rank.get(), world).expect("the other rank");
                for i in 0..50 {
                    let echoed = runtime.block_on(client.spawn_on(peer, Echo::<false>(i)));
                    assert_eq!(echoed.expect("answers"), i);
                }
                // Keep serving until both ranks are done calling.
                arrived.fetch_add(1, Ordering::SeqCst);
                runtime.block_on(std::future::poll_fn(|_| {
                    if arrived.load(Ordering::SeqCst) == world.get() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                let before = frame_buffers::kept();
                let report = runtime.shutdown(Duration::from_secs(10)).expect("clean");
                assert!(report.is_clean(), "{report}");
                (before, frame_buffers::kept())
            })
        })
        .collect();
    for rank in ranks {
        let (before, after) = rank.join().expect("the rank's thread passes");
        assert!(
            before.buffers > 0,
            "frames were recycled on the owner thread"
        );
        assert_eq!(after, frame_buffers::Kept::default());
    }
}
