//! The runtime's own cost: a no-op action's round trip between two ranks
//! in one process over the in-memory transport (threaded mode: one owner
//! thread per rank), with 1 and 256 calls in flight, next to the same
//! exchange done with raw frames over the same transport (the floor: what
//! the transport alone costs for one request and one response), and once
//! more with the raw frames' no-op run on a Rayon pool (the floor of a
//! pooled handler: the transport plus the handler's hop to a worker).
//!
//! Also counts heap allocations per action with a counting global
//! allocator, printed after the criterion output.
#![expect(
    clippy::print_stdout,
    reason = "the benchmark reports allocation counts"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group};
use dinah_core::wire::{Call, Channel, Message, RelativeDeadline};
use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::transport::{HandleConfig, TransportDriver, TransportEvent, TransportHandle};
use dinah_std::{Action, Runtime};

#[path = "support/frames.rs"]
mod frames;
#[path = "support/limits.rs"]
mod limits;
#[path = "support/noop.rs"]
mod noop;
use frames::raw_frame;
use limits::limits;
use noop::Noop;

/// Counts allocations; otherwise the system allocator.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter is a relaxed atomic
// that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc`/`realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Two started runtimes: rank 0 returned to the bench thread, rank 1
/// serving on its own thread until stopped.
struct Pair {
    client_side: Runtime,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

impl Pair {
    /// With `inline`, the no-op is registered inline (it runs on the
    /// serving owner thread instead of a worker).
    fn new(inline: bool) -> Self {
        let world = WorldSize::new(2).unwrap();
        let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
        let builder = || {
            let mut builder = Runtime::builder(1, ProtocolLimits::default(), limits()).unwrap();
            if inline {
                builder
                    .register_inline::<Noop, _>(dinah_std::DEFAULT_DOMAIN, |Noop(n)| Ok(n))
                    .unwrap();
            } else {
                builder.register::<Noop, _>(|Noop(n)| Ok(n)).unwrap();
            }
            builder
        };
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (network, stop) = (network.clone(), Arc::clone(&stop));
            let builder = builder();
            std::thread::spawn(move || {
                let hello = builder.hello().unwrap();
                let (handle, driver) = network
                    .endpoint(world.rank(1).unwrap(), hello.handle)
                    .unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                runtime.block_on(std::future::poll_fn(|_| {
                    if stop.load(Ordering::Relaxed) {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                }));
                drop(runtime);
            })
        };
        let builder = builder();
        let hello = builder.hello().unwrap();
        let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
        let client_side = builder.start(handle, driver).unwrap();
        Self {
            client_side,
            stop,
            server: Some(server),
        }
    }

    /// Runs `n` calls with `in_flight` outstanding at a time.
    fn run(&mut self, n: u64, in_flight: u64) {
        let client = self.client_side.client();
        let peer = Rank::new(1, self.client_side.world()).unwrap();
        // One buffer for every batch of this run: the harness allocates
        // once per run, not once per batch (the allocation count and, with
        // one call in flight, the time are the runtime's alone).
        let mut futures = Vec::with_capacity(usize::try_from(in_flight).unwrap_or(0));
        let mut done = 0;
        while done < n {
            let batch = in_flight.min(n - done);
            futures.extend((0..batch).map(|i| client.spawn_on(peer, Noop(i))));
            for future in futures.drain(..) {
                black_box(self.client_side.block_on(future).unwrap());
            }
            done += batch;
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// The floor: the same request/response exchange as raw frames over the
/// same transport, the peer answering on its own polling thread.
struct RawPair {
    driver: dinah_std::transport::memory::SimDriver,
    handle: TransportHandle,
    frame: Vec<u8>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

/// The call every raw frame carries.
fn noop_call() -> Call {
    Call {
        request: RequestId::MIN,
        action: ActionId::new(Noop::ID).unwrap(),
        domain: DomainId::MIN,
        trace: None,
    }
}

/// Rank 1 of a raw pair on its own thread: polls its endpoint of
/// `network` until `stop`, and calls `answer(handle, from, reply)` for every
/// request frame, `reply` being the result frame to send back.
fn serve_raw(
    network: &SimNetwork,
    stop: &Arc<AtomicBool>,
    mut answer: impl FnMut(&TransportHandle, Rank, &Vec<u8>) + Send + 'static,
) -> JoinHandle<()> {
    let (network, stop) = (network.clone(), Arc::clone(stop));
    std::thread::spawn(move || {
        let me = network.world().rank(1).unwrap();
        let (handle, mut driver) = network.endpoint(me, HandleConfig::default()).unwrap();
        handle.wakeup().bind_current();
        let reply = raw_frame(me, Message::Result { call: noop_call() }, 8);
        let mut events = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            events.clear();
            let _ = driver.poll(256, &mut events);
            for event in events.drain(..) {
                if let TransportEvent::Frame { from, .. } = event {
                    answer(&handle, from, &reply);
                }
            }
            driver.idle_wait(Duration::from_micros(50), Duration::from_millis(1));
        }
    })
}

impl RawPair {
    fn new() -> Self {
        let world = WorldSize::new(2).unwrap();
        let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let server = serve_raw(&network, &stop, |handle, from, reply| {
            let _ = handle.try_send(from, Channel::Action, reply.clone());
        });
        Self::client(&network, stop, server)
    }

    /// Rank 0's side, on the calling thread, of a pair whose rank 1 is
    /// `server`, stopped through `stop` when the pair drops.
    fn client(network: &SimNetwork, stop: Arc<AtomicBool>, server: JoinHandle<()>) -> Self {
        let (handle, driver) = network
            .endpoint(Rank::ZERO, HandleConfig::default())
            .unwrap();
        handle.wakeup().bind_current();
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
        let frame = raw_frame(
            Rank::ZERO,
            Message::Request {
                call: noop_call(),
                deadline,
            },
            8,
        );
        Self {
            driver,
            handle,
            frame,
            stop,
            server: Some(server),
        }
    }

    fn run(&mut self, n: u64, in_flight: u64) {
        let peer = Rank::new(1, self.handle.world()).unwrap();
        let mut events = Vec::new();
        let mut done = 0;
        while done < n {
            let batch = in_flight.min(n - done);
            for _ in 0..batch {
                self.handle
                    .try_send(peer, Channel::Action, self.frame.clone())
                    .unwrap();
            }
            let mut answered = 0;
            while answered < batch {
                events.clear();
                let _ = self.driver.poll(256, &mut events);
                answered += events
                    .iter()
                    .filter(|e| matches!(e, TransportEvent::Frame { .. }))
                    .count() as u64;
                if answered < batch {
                    self.driver
                        .idle_wait(Duration::from_micros(50), Duration::from_millis(1));
                }
            }
            done += batch;
        }
    }
}

impl Drop for RawPair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// The floor of a pooled handler: the raw frames of [`RawPair`], with the
/// serving thread spawning each request's no-op on a Rayon pool of the
/// runtime's `workers_per_domain` threads, the way a hand-written server
/// would. The worker sends the reply itself (the handle is `Send + Sync`
/// and wakes the owner), so nothing returns through the serving thread: a
/// leaner per-request hand-off than dinah's, which routes each result back
/// through the owner. (A floor that spawns one job per poll round is
/// leaner still, but gives up running requests in parallel;
/// `docs/benchmarks.md` measured it as an experiment.)
struct RawRayonPair {
    client: RawPair,
}

impl RawRayonPair {
    fn new() -> Self {
        let world = WorldSize::new(2).unwrap();
        let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(usize::from(limits().workers_per_domain))
            .build()
            .unwrap();
        let server = serve_raw(&network, &stop, move |handle, from, reply| {
            let (handle, reply) = (handle.clone(), reply.clone());
            pool.spawn(move || {
                let _ = handle.try_send(from, Channel::Action, reply);
            });
        });
        Self {
            client: RawPair::client(&network, stop, server),
        }
    }

    fn run(&mut self, n: u64, in_flight: u64) {
        self.client.run(n, in_flight);
    }
}

fn round_trips(c: &mut Criterion) {
    let mut group = c.benchmark_group("runtime_round_trip");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    for in_flight in [1u64, 256] {
        group.bench_function(BenchmarkId::new("raw_frames_memory", in_flight), |b| {
            let mut pair = RawPair::new();
            b.iter_custom(|iters| {
                let start = Instant::now();
                pair.run(iters, in_flight);
                start.elapsed()
            });
        });
        group.bench_function(
            BenchmarkId::new("raw_frames_rayon_memory", in_flight),
            |b| {
                let mut pair = RawRayonPair::new();
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    pair.run(iters, in_flight);
                    start.elapsed()
                });
            },
        );
        for (name, inline) in [
            ("dinah_noop_memory", false),
            ("dinah_noop_inline_memory", true),
        ] {
            group.bench_function(BenchmarkId::new(name, in_flight), |b| {
                let mut pair = Pair::new(inline);
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    pair.run(iters, in_flight);
                    start.elapsed()
                });
            });
        }
    }
    group.finish();
}

/// Allocations per action, over a fixed number of calls (both ranks'
/// allocations count: they share the process), for the floors and for
/// dinah.
fn allocations_per_action() {
    for in_flight in [1u64, 256] {
        let mut raw = RawPair::new();
        count("raw_frames_memory", in_flight, |n| raw.run(n, in_flight));
        drop(raw);
        let mut rayon = RawRayonPair::new();
        count("raw_frames_rayon_memory", in_flight, |n| {
            rayon.run(n, in_flight);
        });
    }
    for (name, inline) in [
        ("dinah_noop_memory", false),
        ("dinah_noop_inline_memory", true),
    ] {
        for in_flight in [1u64, 256] {
            let mut pair = Pair::new(inline);
            count(name, in_flight, |n| pair.run(n, in_flight));
        }
    }
}

/// Prints the allocations per call of `run(n)` (which makes `n` calls)
/// over 4,096 calls, after warming up with twice the dedup table's
/// entries: the steady state of a long-lived runtime, the serving rank's
/// table full (entries live for the 60 s TTL), so that every new request
/// evicts the oldest finished one.
fn count(name: &str, in_flight: u64, mut run: impl FnMut(u64)) {
    run(2 * limits().max_dedup_entries as u64);
    let calls = 4096;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run(calls);
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    println!(
        "runtime_round_trip/{name}/{in_flight}: {:.1} allocations per action (both ranks)",
        (after - before) as f64 / calls as f64
    );
}

criterion_group!(benches, round_trips);

fn main() {
    benches();
    if !std::env::args().any(|a| a == "--test") {
        allocations_per_action();
    }
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
