//! The TCP transport against the raw TCP floors, measured in the same run:
//! two ranks over loopback, as two threads of this process (each rank's
//! owner and reader threads are real threads; only the address space is
//! shared). The floors are in `support/raw_tcp.rs`.
//!
//! - `raw_spin_ping_pong_8b`: non-blocking sockets that both sides poll
//!   without sleeping, 8 bytes each way, one in flight: the floor for
//!   dinah's round trips, whose owner thread polls too while it waits;
//! - `raw_ping_pong_8b`: the same over blocking sockets (context: each
//!   side sleeps in the kernel until its message arrives);
//! - `raw_spin_pool_hop_8b`: the polling ping-pong with each reply written
//!   only after a no-op ran on a Rayon pool of the runtime's
//!   `workers_per_domain` threads (the pool-hop reference: a pooled
//!   handler's two hand-offs alone, context for `dinah_noop/1`);
//! - `raw_pipelined_64b`: 64-byte request frames through a `BufWriter`,
//!   1,024 in flight, echoed by a server that flushes its `BufWriter`
//!   whenever its input is momentarily drained (the throughput floor);
//! - `dinah_noop/1` and `dinah_noop/1024`: a no-op action's round trip
//!   through two runtimes over the TCP transport, 1 and 1,024 in flight
//!   (a sliding window, as the floors below keep theirs), the handler on
//!   a worker domain; `dinah_noop_inline/*` the same with the handler
//!   registered inline (run on the serving owner thread);
//! - `dinah_noop_batches/1024` and `dinah_noop_inline_batches/1024`: the
//!   same calls spawned 1,024 at a time and each batch waited for whole
//!   before the next (context: the window empties between batches);
//! - `transport_frames` and `transport_frames/1024`: the runtime's request
//!   and result frames for the no-op pushed through the TCP transport by
//!   hand, with no runtime, 1 and 1,024 in flight (what the transport
//!   alone allows);
//! - `tcp_payload/{raw,raw_spin,transport,dinah}/N`: an N-byte echo, 8 B
//!   to 4 MiB, one in flight; `tcp_payload/dinah_f64/N` the dinah echo of
//!   the same bytes as a `Vec<f64>`, `tcp_payload/dinah_f64_pair/N` as two
//!   `Vec<f64>` of N/2 bytes each (the first a middle part of its frame).
//!
//! Goals (not assertions): `dinah_noop_inline/1` within 1.3x
//! `raw_spin_ping_pong_8b`; `dinah_noop/1024` at 500,000 actions/s or more
//! and at least half of `raw_pipelined_64b`'s request rate; a 1 MiB echo
//! at 0.9x or more of the faster raw floor's bandwidth.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use dinah_core::wire::{Call, Channel, Message, RelativeDeadline};
use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, RuntimeLimits, WorldSize};
use dinah_std::transport::{TransportDriver, TransportEvent, TransportHandle, frame_buffers};
use dinah_std::{Action, Runtime};
use dinah_tcp::{Membership, TcpTransport};

#[path = "support/echo.rs"]
mod echo;
#[path = "support/frames.rs"]
mod frames;
#[path = "support/noop.rs"]
mod noop;
#[path = "support/raw_tcp.rs"]
mod raw_tcp;
use echo::{Echo, EchoF64, EchoF64Pair, Echoed, echo_loop};
use frames::raw_frame;
use noop::Noop;

use raw_tcp::{RawPingPong, RawPipelined, SpinPingPong};

fn cfg() -> dinah_tcp::TcpConfig {
    dinah_tcp::TcpConfig::default()
}

/// How long the raw-frame pair's owner spins before parking, as the
/// runtime's `block_on` does.
fn spin() -> Duration {
    Duration::from_micros(50)
}

fn limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_action_queue = 2048;
    limits.max_pending_calls = 2048;
    limits.max_send_tickets = 2048;
    limits
}

/// Both ranks' builder; with `inline`, the no-op and the echoes run on the
/// serving owner thread (`register_inline`) instead of a worker.
fn builder(inline: bool) -> dinah_std::RuntimeBuilder {
    let mut builder = Runtime::builder(7, ProtocolLimits::default(), limits()).unwrap();
    if inline {
        builder
            .register_inline::<Noop, _>(dinah_std::DEFAULT_DOMAIN, |Noop(n)| Ok(n))
            .unwrap();
    } else {
        builder.register::<Noop, _>(|Noop(n)| Ok(n)).unwrap();
    }
    if inline {
        builder
            .register_inline::<Echo, _>(dinah_std::DEFAULT_DOMAIN, |Echo(bytes)| Ok(bytes))
            .unwrap()
            .register_inline::<EchoF64, _>(dinah_std::DEFAULT_DOMAIN, |EchoF64(numbers)| {
                Ok(numbers)
            })
            .unwrap();
    } else {
        builder
            .register::<Echo, _>(|Echo(bytes)| Ok(bytes))
            .unwrap()
            .register::<EchoF64, _>(|EchoF64(numbers)| Ok(numbers))
            .unwrap()
            .register::<EchoF64Pair, _>(|EchoF64Pair(a, b)| Ok((a, b)))
            .unwrap();
    }
    builder
}

/// Two runtimes over TCP: rank 0 on the bench thread, rank 1 serving on
/// its own thread until dropped.
struct Pair {
    client_side: Option<Runtime>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

impl Pair {
    fn new(inline: bool) -> Self {
        let world = WorldSize::new(2).unwrap();
        let mut members = Membership::loopback(world).unwrap().into_iter();
        let (zero, one) = (members.next().unwrap(), members.next().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let builder = builder(inline);
                let (handle, driver) =
                    TcpTransport::connect(one, builder.hello().unwrap()).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                runtime.block_on(std::future::poll_fn(|_| {
                    if stop.load(Ordering::Relaxed) {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                }));
            })
        };
        let builder = builder(inline);
        let (handle, driver) = TcpTransport::connect(zero, builder.hello().unwrap()).unwrap();
        let client_side = builder.start(handle, driver).unwrap();
        Self {
            client_side: Some(client_side),
            stop,
            server: Some(server),
        }
    }

    fn runtime(&mut self) -> &mut Runtime {
        self.client_side.as_mut().expect("running")
    }

    /// Runs `n` no-op calls with up to `in_flight` outstanding: a sliding
    /// window, as the transport-alone and raw rows keep theirs (each
    /// answer lets the next call go, so the window stays full).
    fn noop(&mut self, n: u64, in_flight: u64) {
        let runtime = self.runtime();
        let client = runtime.client();
        let peer = Rank::new(1, runtime.world()).unwrap();
        let window = in_flight.min(n);
        // One buffer per run: the harness allocates once per run, not per
        // call (the allocation count and, with one call in flight, the
        // time are the runtime's alone).
        let mut futures = VecDeque::with_capacity(usize::try_from(window).unwrap_or(0));
        futures.extend((0..window).map(|i| client.spawn_on(peer, Noop(i))));
        let mut issued = window;
        while let Some(future) = futures.pop_front() {
            black_box(runtime.block_on(future).unwrap());
            if issued < n {
                futures.push_back(client.spawn_on(peer, Noop(issued)));
                issued += 1;
            }
        }
    }

    /// Runs `n` no-op calls in batches of `size`: each batch is spawned
    /// whole, then waited for call by call, so the rank that waits idles
    /// between batches (the join-all pattern, context for
    /// [`noop`](Self::noop)'s window).
    fn noop_batches(&mut self, n: u64, size: u64) {
        let runtime = self.runtime();
        let client = runtime.client();
        let peer = Rank::new(1, runtime.world()).unwrap();
        let mut futures = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut done = 0;
        while done < n {
            let batch = size.min(n - done);
            futures.extend((0..batch).map(|i| client.spawn_on(peer, Noop(i))));
            for future in futures.drain(..) {
                black_box(runtime.block_on(future).unwrap());
            }
            done += batch;
        }
    }

    /// `n` echoes of `first`, one call at a time (see [`echo_loop`]);
    /// returns the time they took.
    fn echo<A: Echoed>(&mut self, n: u64, first: A) -> Duration {
        let runtime = self.runtime();
        let peer = Rank::new(1, runtime.world()).unwrap();
        echo_loop(runtime, peer, first, n)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.client_side.take());
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// The transport alone: request frames from rank 0, answered with result
/// frames by rank 1's owner thread polling its driver, one in flight
/// (what the TCP transport adds to the raw socket floor, without the
/// runtime's worker hand-offs).
struct FramePair {
    driver: dinah_tcp::TcpDriver,
    handle: TransportHandle,
    frame: Vec<u8>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

impl FramePair {
    /// A pair exchanging `len`-byte payloads each way.
    fn new(len: usize) -> Self {
        let world = WorldSize::new(2).unwrap();
        let mut members = Membership::loopback(world).unwrap().into_iter();
        let (zero, one) = (members.next().unwrap(), members.next().unwrap());
        let call = Call {
            request: RequestId::MIN,
            action: ActionId::new(Noop::ID).unwrap(),
            domain: DomainId::MIN,
            trace: None,
        };
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
        let hello = builder(false).hello().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let me = one.rank();
                let (handle, mut driver) = TcpTransport::connect_with(one, hello, cfg()).unwrap();
                handle.wakeup().bind_current();
                let reply = raw_frame(me, Message::Result { call }, len);
                let peer = Rank::ZERO;
                let mut events = Vec::new();
                // Replies not queued yet: a full lane hands the frame back,
                // and the reply is retried after the next poll.
                let mut owed = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    let _ = driver.poll(1024, &mut events);
                    let idle = events.is_empty();
                    for event in events.drain(..) {
                        if let TransportEvent::Frame { frame, .. } = event {
                            // As the runtime does: the buffer goes back to
                            // this thread's store, for the next frame.
                            frame_buffers::give_frame(frame);
                            owed += 1;
                        }
                    }
                    while owed > 0
                        && handle
                            .try_send(peer, Channel::Action, copy_of(&reply))
                            .is_ok()
                    {
                        owed -= 1;
                    }
                    if idle && owed == 0 {
                        driver.idle_wait(spin(), Duration::from_millis(1));
                    }
                }
            })
        };
        let (handle, driver) = TcpTransport::connect_with(zero, hello, cfg()).unwrap();
        handle.wakeup().bind_current();
        let frame = raw_frame(Rank::ZERO, Message::Request { call, deadline }, len);
        Self {
            driver,
            handle,
            frame,
            stop,
            server: Some(server),
        }
    }

    fn run(&mut self, n: u64) {
        let peer = Rank::new(1, self.handle.world()).unwrap();
        let mut events = Vec::new();
        for _ in 0..n {
            self.handle
                .try_send(peer, Channel::Action, self.frame.clone())
                .unwrap();
            let mut answered = false;
            while !answered {
                events.clear();
                let _ = self.driver.poll(256, &mut events);
                answered = events
                    .iter()
                    .any(|e| matches!(e, TransportEvent::Frame { .. }));
                if !answered {
                    self.driver
                        .idle_wait(Duration::from_micros(50), Duration::from_millis(1));
                }
            }
        }
    }
}

impl FramePair {
    /// `n` request frames with up to `window` in flight, each answered by
    /// the server's result frame: the transport's own pipelined rate,
    /// with frames of the runtime's size and no runtime.
    fn pipelined(&mut self, n: u64, window: u64) {
        let peer = Rank::new(1, self.handle.world()).unwrap();
        let mut events = Vec::new();
        let (mut sent, mut answered) = (0_u64, 0_u64);
        while answered < n {
            while sent < n
                && sent - answered < window
                && self
                    .handle
                    .try_send(peer, Channel::Action, copy_of(&self.frame))
                    .is_ok()
            {
                sent += 1;
            }
            let _ = self.driver.poll(1024, &mut events);
            let mut got = 0;
            for event in events.drain(..) {
                if let TransportEvent::Frame { frame, .. } = event {
                    frame_buffers::give_frame(frame);
                    got += 1;
                }
            }
            answered += got;
            if got == 0 {
                self.driver
                    .idle_wait(Duration::from_micros(50), Duration::from_millis(1));
            }
        }
    }
}

impl Drop for FramePair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// `frame` in a buffer from this thread's store of frame buffers, as the
/// runtime encodes its frames (the transport gives sent buffers back).
fn copy_of(frame: &[u8]) -> Vec<u8> {
    let mut copy = frame_buffers::take(frame.len());
    copy.extend_from_slice(frame);
    copy
}

fn timed(mut run: impl FnMut(u64)) -> impl FnMut(u64) -> Duration {
    move |iters| {
        let start = Instant::now();
        run(iters);
        start.elapsed()
    }
}

fn latency(c: &mut Criterion) {
    let mut group = c.benchmark_group("tcp_round_trip");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("raw_ping_pong_8b", |b| {
        let mut raw = RawPingPong::new(8);
        b.iter_custom(timed(|n| raw.run(n)));
    });
    group.bench_function("raw_spin_ping_pong_8b", |b| {
        let mut raw = SpinPingPong::new(8);
        b.iter_custom(timed(|n| raw.run(n)));
    });
    group.bench_function("raw_spin_pool_hop_8b", |b| {
        let workers = usize::from(limits().workers_per_domain);
        let mut raw = SpinPingPong::with_pool_hop(8, workers);
        b.iter_custom(timed(|n| raw.run(n)));
    });
    group.bench_function("transport_frames", |b| {
        let mut pair = FramePair::new(8);
        b.iter_custom(timed(|n| pair.run(n)));
    });
    group.bench_function(BenchmarkId::new("dinah_noop", 1), |b| {
        let mut pair = Pair::new(false);
        b.iter_custom(timed(|n| pair.noop(n, 1)));
    });
    group.bench_function(BenchmarkId::new("dinah_noop_inline", 1), |b| {
        let mut pair = Pair::new(true);
        b.iter_custom(timed(|n| pair.noop(n, 1)));
    });
    group.finish();
}

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("tcp_throughput");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("raw_pipelined_64b", 1024), |b| {
        let mut raw = RawPipelined::new();
        b.iter_custom(timed(|n| raw.run(n, 1024)));
    });
    group.bench_function(BenchmarkId::new("transport_frames", 1024), |b| {
        let mut pair = FramePair::new(8);
        b.iter_custom(timed(|n| pair.pipelined(n, 1024)));
    });
    // The window rows, then the batch rows (context); pooled, then inline.
    for (name, inline, batches) in [
        ("dinah_noop", false, false),
        ("dinah_noop_inline", true, false),
        ("dinah_noop_batches", false, true),
        ("dinah_noop_inline_batches", true, true),
    ] {
        group.bench_function(BenchmarkId::new(name, 1024), |b| {
            let mut pair = Pair::new(inline);
            b.iter_custom(timed(|n| {
                if batches {
                    pair.noop_batches(n, 1024);
                } else {
                    pair.noop(n, 1024);
                }
            }));
        });
    }
    group.finish();
}

fn payloads(c: &mut Criterion) {
    let mut group = c.benchmark_group("tcp_payload");
    group
        .sample_size(15)
        .measurement_time(Duration::from_secs(3));
    for len in [8usize, 1 << 10, 64 << 10, 1 << 20, 4 << 20] {
        group.throughput(Throughput::Bytes(2 * len as u64));
        group.bench_with_input(BenchmarkId::new("raw", len), &len, |b, &len| {
            let mut raw = RawPingPong::new(len);
            b.iter_custom(timed(|n| raw.run(n)));
        });
        group.bench_with_input(BenchmarkId::new("raw_spin", len), &len, |b, &len| {
            let mut raw = SpinPingPong::new(len);
            b.iter_custom(timed(|n| raw.run(n)));
        });
        group.bench_with_input(BenchmarkId::new("transport", len), &len, |b, &len| {
            let mut pair = FramePair::new(len);
            b.iter_custom(timed(|n| pair.run(n)));
        });
        group.bench_with_input(BenchmarkId::new("dinah", len), &len, |b, &len| {
            let mut pair = Pair::new(false);
            b.iter_custom(|n| pair.echo(n, Echo(vec![5u8; len])));
        });
        group.bench_with_input(BenchmarkId::new("dinah_inline", len), &len, |b, &len| {
            let mut pair = Pair::new(true);
            b.iter_custom(|n| pair.echo(n, Echo(vec![5u8; len])));
        });
        group.bench_with_input(BenchmarkId::new("dinah_f64", len), &len, |b, &len| {
            let mut pair = Pair::new(false);
            b.iter_custom(|n| pair.echo(n, EchoF64(vec![0.5; len / 8])));
        });
        group.bench_with_input(BenchmarkId::new("dinah_f64_pair", len), &len, |b, &len| {
            let mut pair = Pair::new(false);
            b.iter_custom(|n| {
                let halves = (vec![0.5; len / 16], vec![0.25; len / 16]);
                pair.echo(n, EchoF64Pair(halves.0, halves.1))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, latency, throughput, payloads);

fn main() {
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
