//! The MPI transport against raw MPI, in one run: an 8-byte ping-pong with
//! the `mpi` crate (immediate send and receive, `test()` polling), the
//! pool-hop reference (the same with each reply sent after a no-op ran on
//! a Rayon worker: a pooled handler's two hand-offs alone), a dinah
//! no-op action round trip with one call in flight, the same with 1,024 in
//! flight (actions per second), each with the handler on a worker (pooled)
//! and registered inline (run on the serving owner thread), the no-op's
//! frames through the MPI transport alone (its driver polled by hand, no
//! runtime: what the driver costs a round trip), and a payload
//! sweep up to 4 MiB (raw ping-pong, raw echo and a dinah echo of the
//! same size, of a `Vec<u8>`, of a `Vec<f64>` of those bytes, and of two
//! `Vec<f64>` of half of them each). The raw ping-pong sends a buffer it
//! never writes; the raw echo, like dinah's, sends back what it received.
//!
//! Criterion and MPI ranks do not mix (criterion would time each rank on
//! its own), so this is a small harness: rank 0 measures and prints a
//! table, rank 1 serves, further ranks only serve. It needs two ranks:
//!
//! ```sh
//! cargo xtask bench mpi        # builds it and runs `mpirun -n 2 ... --bench`
//! ```
//!
//! With `--test` every measurement runs a few iterations only (a smoke
//! check that the program works, not a measurement). A further argument
//! that is not a flag selects the measurements whose key contains it
//! (keys: `raw`, `raw-probe`, `raw-pool-hop`, `transport`, `round-trip-pooled`,
//! `round-trip-inline`, `pipelined-pooled`, `pipelined-inline`, `sweep`;
//! so `round-trip` selects both round trips; several, separated by
//! commas, select what any of them selects). Each figure is the median of
//! several batches. The goals (not assertions): a dinah round
//! trip within 2x the raw ping-pong with the handler inline and 4x with it
//! on a worker, at least 1,000,000 actions/s with 1,024 in flight, and a
//! 1 MiB echo within 1.25x the raw ping-pong (the raw echo is context).
#![expect(clippy::print_stdout, reason = "a benchmark reports its measurements")]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dinah::core::wire::{Call, Channel, Message, RelativeDeadline};
use dinah::core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, RuntimeLimits};
use dinah::mpi::MpiTransport;
use dinah::mpi::mpi::topology::SimpleCommunicator;
use dinah::mpi::mpi::traits::{Communicator, CommunicatorCollectives};
use dinah::mpi::mpi::{self, Threading};
use dinah::std::transport::{TransportDriver, TransportEvent, TransportHandle, frame_buffers};
use dinah::std::{
    Action, CodecError, RemoteFuture, Runtime, RuntimeClient, SegmentReader, SegmentWriter,
    WireValue, schema_id,
};

#[path = "support/echo.rs"]
mod echo;
#[path = "support/frames.rs"]
mod frames;
use echo::{Echo, EchoF64, EchoF64Pair, echo_loop};
use frames::raw_frame;
#[path = "support/raw_mpi.rs"]
mod raw_mpi;
use raw_mpi::{RawWait, lane_pingpong, raw_echo, raw_pingpong};

/// An action that does nothing: the round trip is all overhead.
struct Noop;

impl WireValue for Noop {
    const SCHEMA_ID: u64 = schema_id("bench.Noop/1");
    fn encode(&self, _out: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Noop)
    }
}

impl Action for Noop {
    const ID: u128 = 0xbe4c_0001;
    type Output = ();
}

/// The same no-op, registered inline: it runs on the serving rank's owner
/// thread instead of a worker (`RuntimeBuilder::register_inline`).
struct NoopInline;

impl WireValue for NoopInline {
    const SCHEMA_ID: u64 = schema_id("bench.NoopInline/1");
    fn encode(&self, _out: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(NoopInline)
    }
}

impl Action for NoopInline {
    const ID: u128 = 0xbe4c_0004;
    type Output = ();
}

/// Tells a serving rank to stop.
struct Stop;

impl WireValue for Stop {
    const SCHEMA_ID: u64 = schema_id("bench.Stop/1");
    fn encode(&self, _out: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Stop)
    }
}

impl Action for Stop {
    const ID: u128 = 0xbe4c_0003;
    type Output = ();
}

type BoxError = Box<dyn std::error::Error>;

/// How much to measure.
#[derive(Clone, Copy)]
struct Plan {
    batches: usize,
    pingpongs: usize,
    round_trips: usize,
    pipelined: usize,
    window: usize,
    sweep_iterations: usize,
}

const FULL: Plan = Plan {
    batches: 5,
    pingpongs: 20_000,
    round_trips: 5_000,
    pipelined: 200_000,
    window: 1024,
    sweep_iterations: 200,
};
const SMOKE: Plan = Plan {
    batches: 1,
    pingpongs: 50,
    round_trips: 50,
    pipelined: 2_048,
    window: 1024,
    sweep_iterations: 3,
};

const SIZES: [usize; 10] = [
    8,
    64,
    1024,
    8 * 1024,
    64 * 1024,
    256 * 1024,
    512 * 1024,
    1 << 20,
    2 << 20,
    4 << 20,
];

/// What this run measures: the plan and the keys asked for.
struct Options {
    smoke: bool,
    plan: Plan,
    /// The first argument that is not a flag: comma-separated parts of keys.
    filter: Option<String>,
}

impl Options {
    fn from_args() -> Self {
        let smoke = std::env::args().any(|arg| arg == "--test");
        Self {
            smoke,
            plan: if smoke { SMOKE } else { FULL },
            filter: std::env::args().skip(1).find(|arg| !arg.starts_with("--")),
        }
    }

    /// Whether the measurement of `key` runs.
    fn wanted(&self, key: &str) -> bool {
        self.filter
            .as_deref()
            .is_none_or(|f| f.split(',').any(|f| key.contains(f)))
    }
}

/// The floors, measured on every rank before the runtime starts (its
/// threads would share the cores with them).
struct Floors {
    /// The raw 8-byte ping-pong: the floor of every round-trip ratio.
    raw_8: Duration,
    /// The 8-byte ping-pong received as the driver does, then by matched
    /// probes.
    waited_8: [Option<Duration>; 2],
    pool_hop_8: Option<Duration>,
    /// Each of [`SIZES`]: the raw ping-pong and the raw echo.
    sweep: Vec<(Duration, Duration)>,
    transport_8: Option<Duration>,
}

impl Floors {
    fn measure(world: &SimpleCommunicator, options: &Options) -> Result<Self, BoxError> {
        let plan = options.plan;
        let raw_8 = median(plan.batches, || {
            raw_pingpong(world, 8, plan.pingpongs, None)
        });
        let waited_8 = [RawWait::AsTheDriver, RawWait::MatchedProbes].map(|wait| {
            options
                .wanted("raw-probe")
                .then(|| median(plan.batches, || lane_pingpong(world, plan.pingpongs, wait)))
        });
        // Only the serving rank has a pool; its one thread is the runtime's
        // `workers_per_domain` below, and it is told to exit before the
        // runtime starts its own.
        let pool_hop_8 = options.wanted("raw-pool-hop").then(|| {
            let pool = (world.rank() == 1).then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .expect("a Rayon pool")
            });
            median(plan.batches, || {
                raw_pingpong(world, 8, plan.pingpongs, pool.as_ref())
            })
        });
        // Each size's two raw floors: the ping-pong, then the echo.
        let sweep = if options.wanted("sweep") {
            let iterations = plan.sweep_iterations;
            SIZES
                .iter()
                .map(|&size| {
                    (
                        median(plan.batches, || raw_pingpong(world, size, iterations, None)),
                        median(plan.batches, || raw_echo(world, size, iterations)),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let transport_8 = options
            .wanted("transport")
            .then(|| transport_pingpong(world, plan.batches, plan.pingpongs))
            .transpose()?;
        Ok(Self {
            raw_8,
            waited_8,
            pool_hop_8,
            sweep,
            transport_8,
        })
    }

    /// The floors' rows, each beside the raw ping-pong.
    fn rows(&self, table: &mut Table) {
        let raw_8 = self.raw_8;
        let ratio = |of: Duration| of.as_secs_f64() / raw_8.as_secs_f64();
        table.row(
            "raw mpi 8 B ping-pong (immediate + test)",
            fmt_us(raw_8),
            "floor".into(),
        );
        if let Some(pool_hop) = self.pool_hop_8 {
            table.row(
                "raw mpi 8 B ping-pong, pool-hop reference",
                fmt_us(pool_hop),
                format!(
                    "{:.1}x raw: a pooled handler's two hand-offs alone",
                    ratio(pool_hop)
                ),
            );
        }
        let probe_rows = [
            "raw mpi 8 B ping-pong, received as the driver does",
            "raw mpi 8 B ping-pong, matched probes + immediate receive",
        ];
        for (name, probed) in probe_rows.into_iter().zip(self.waited_8) {
            if let Some(probed) = probed {
                let note = format!("{:.1}x raw, no runtime", ratio(probed));
                table.row(name, fmt_us(probed), note);
            }
        }
        if let Some(transport) = self.transport_8 {
            table.row(
                "transport alone: a no-op's frames through the MPI driver, no runtime",
                fmt_us(transport),
                format!("{:.1}x raw", ratio(transport)),
            );
        }
    }
}

fn main() -> Result<(), BoxError> {
    let options = Options::from_args();
    let (universe, threading) =
        mpi::initialize_with_threading(Threading::Funneled).ok_or("MPI initialised twice")?;
    if threading < Threading::Funneled {
        return Err(format!("MPI granted {threading:?}, dinah needs Funneled").into());
    }
    let world = universe.world();
    if world.size() < 2 {
        println!("benches/mpi: needs 2 ranks; run it with `cargo xtask bench mpi` (mpirun -n 2)");
        return Ok(());
    }
    let rank = world.rank();
    // Raw MPI first, before dinah's runtime threads exist.
    let floors = Floors::measure(&world, &options)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut runtime = start_runtime(&world, &stop)?;
    world.barrier();
    let mut table = Table::default();
    if rank == 0 {
        measure(&mut runtime, &options, &floors, &mut table)?;
    } else {
        serve(&mut runtime, &stop);
    }
    // Rank 1's shutdown still sends the answer to `Stop` (queued responses
    // are flushed before the goodbyes).
    let report = runtime.shutdown(Duration::from_secs(30))?;
    if rank == 0 {
        println!(
            "\nbenches/mpi{} (2 ranks, median of {} batches)\n",
            if options.smoke { " --test" } else { "" },
            options.plan.batches
        );
        table.print();
        println!("\nrank 0 shutdown: clean = {}, {report}", report.is_clean());
    }
    drop(universe);
    Ok(())
}

/// Rank 0: every measurement of dinah asked for, each beside its floor,
/// then `Stop` to every other rank.
fn measure(
    runtime: &mut Runtime,
    options: &Options,
    floors: &Floors,
    table: &mut Table,
) -> Result<(), BoxError> {
    let peer = runtime.world().rank(1)?;
    let client = runtime.client();
    // Warm up: connections, buffers, worker threads.
    for _ in 0..100 {
        runtime.block_on(client.spawn_on(peer, Noop))?;
    }
    floors.rows(table);
    // Both no-ops: the handler on a worker (pooled), then inline.
    for inline in [false, true] {
        let kind = if inline { "inline" } else { "pooled" };
        let calls = NoopCalls {
            client: client.clone(),
            peer,
            inline,
        };
        if options.wanted(&format!("round-trip-{kind}")) {
            let one = round_trip(runtime, &calls, options.plan);
            let ratio = one.as_secs_f64() / floors.raw_8.as_secs_f64();
            // A pooled handler's round trip adds two hand-offs between
            // threads on the serving rank.
            let limit = if inline { 2.0 } else { 4.0 };
            let met = if ratio <= limit { "met" } else { "not met" };
            table.row(
                &format!("dinah no-op round trip, 1 in flight, {kind}"),
                fmt_us(one),
                format!("<= {limit}x raw: {ratio:.1}x, {met}"),
            );
        }
        if options.wanted(&format!("pipelined-{kind}")) {
            let rate = 1.0 / pipelined(runtime, &calls, options.plan).as_secs_f64();
            let met = if rate >= 1e6 { "met" } else { "not met" };
            table.row(
                &format!("dinah no-op, {} in flight, {kind}", options.plan.window),
                format!("{rate:.0} actions/s"),
                format!(">= 1,000,000/s: {met}"),
            );
        }
    }
    if options.wanted("sweep") {
        sweep(runtime, peer, options.plan, &floors.sweep, table);
    }
    let me = runtime.rank();
    for other in runtime.world().ranks().filter(|&r| r != me) {
        runtime.block_on(client.spawn_on(other, Stop))?;
    }
    Ok(())
}

/// Every other rank: serves until rank 0's `Stop` runs here.
fn serve(runtime: &mut Runtime, stop: &AtomicBool) {
    runtime.block_on(std::future::poll_fn(|cx| {
        // `block_on` polls again after every round of progress.
        let _ = cx;
        if stop.load(Ordering::Acquire) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }));
}

/// The no-op calls to one peer: pooled or inline.
struct NoopCalls {
    client: RuntimeClient,
    peer: Rank,
    inline: bool,
}

impl NoopCalls {
    fn call(&self) -> RemoteFuture<()> {
        if self.inline {
            self.client.spawn_on(self.peer, NoopInline)
        } else {
            self.client.spawn_on(self.peer, Noop)
        }
    }
}

/// The mean no-op round trip with one call in flight, median of the
/// plan's batches.
fn round_trip(runtime: &mut Runtime, calls: &NoopCalls, plan: Plan) -> Duration {
    median(plan.batches, || {
        let start = Instant::now();
        for _ in 0..plan.round_trips {
            runtime.block_on(calls.call()).expect("no-op");
        }
        start.elapsed() / plan.round_trips as u32
    })
}

/// The mean time per no-op with the plan's window of calls in flight (a
/// new call issued as each oldest one is answered), median of the plan's
/// batches.
fn pipelined(runtime: &mut Runtime, calls: &NoopCalls, plan: Plan) -> Duration {
    median(plan.batches, || {
        let start = Instant::now();
        let mut in_flight = VecDeque::with_capacity(plan.window);
        let mut issued = 0;
        while issued < plan.pipelined.min(plan.window) {
            in_flight.push_back(calls.call());
            issued += 1;
        }
        while let Some(pending) = in_flight.pop_front() {
            runtime.block_on(pending).expect("no-op");
            if issued < plan.pipelined {
                in_flight.push_back(calls.call());
                issued += 1;
            }
        }
        start.elapsed() / plan.pipelined as u32
    })
}

/// The payload rows: for each of [`SIZES`] dinah's echo of bytes, of a
/// `Vec<f64>` and of two `Vec<f64>` of half the bytes each, beside the
/// raw ping-pong and echo of that size (`floors`).
fn sweep(
    runtime: &mut Runtime,
    peer: Rank,
    plan: Plan,
    floors: &[(Duration, Duration)],
    table: &mut Table,
) {
    let mut numbers_rows = Vec::new();
    for (&size, &(raw, raw_echo)) in SIZES.iter().zip(floors) {
        let echo = per_echo(plan, |n| {
            echo_loop(runtime, peer, Echo(vec![0x5a; size]), n)
        });
        let numbers = per_echo(plan, |n| {
            echo_loop(runtime, peer, EchoF64(vec![0.5; size / 8]), n)
        });
        // The same bytes as two vectors: the first a middle part of its
        // frame, the second its tail.
        let pairs = per_echo(plan, |n| {
            let halves = (vec![0.5; size / 16], vec![0.25; size / 16]);
            echo_loop(runtime, peer, EchoF64Pair(halves.0, halves.1), n)
        });
        table.payload_row("", size, raw, echo);
        table.raw_echo_row(size, raw_echo, echo);
        numbers_rows.push((size, raw, numbers, pairs));
    }
    for &(size, raw, numbers, _) in &numbers_rows {
        table.payload_row(" as f64", size, raw, numbers);
    }
    for &(size, raw, _, pairs) in &numbers_rows {
        table.payload_row(" as two f64 vectors", size, raw, pairs);
    }
}

/// The median over the plan's batches of the mean time of one echo, each
/// batch `echoes` of the plan's `sweep_iterations` (given the count,
/// returning the time they took).
fn per_echo(plan: Plan, mut echoes: impl FnMut(u64) -> Duration) -> Duration {
    let n = plan.sweep_iterations;
    median(plan.batches, || echoes(n as u64) / n as u32)
}

/// A runtime for this rank with limits that admit 1,024 calls in flight.
fn start_runtime(world: &SimpleCommunicator, stop: &Arc<AtomicBool>) -> Result<Runtime, BoxError> {
    let mut limits = RuntimeLimits::default();
    limits.max_pending_calls = 4096;
    limits.max_send_tickets = 4096;
    limits.max_action_queue = 4096;
    limits.max_dedup_entries = 8192;
    limits.max_progress_events = 1024;
    limits.max_cancellations = 1024;
    limits.workers_per_domain = 1;
    limits.max_retained_bytes = 256 << 20;
    let mut builder = Runtime::builder(0xbe4c, ProtocolLimits::default(), limits)?;
    builder.register::<Noop, _>(|Noop| Ok(()))?;
    builder.register_inline::<NoopInline, _>(dinah::std::DEFAULT_DOMAIN, |NoopInline| Ok(()))?;
    builder.register::<Echo, _>(|Echo(bytes)| Ok(bytes))?;
    builder.register::<EchoF64, _>(|EchoF64(numbers)| Ok(numbers))?;
    builder.register::<EchoF64Pair, _>(|EchoF64Pair(a, b)| Ok((a, b)))?;
    let stop = Arc::clone(stop);
    builder.register::<Stop, _>(move |Stop| {
        stop.store(true, Ordering::Release);
        Ok(())
    })?;
    let (handle, driver) = MpiTransport::new().connect(world, builder.hello()?)?;
    Ok(builder.start(handle, driver)?)
}

/// Median over `batches` of the mean round trip of `iterations` frames of a
/// no-op's size through the MPI transport alone, no runtime: rank 0 sends a
/// request frame and polls its driver until the answer arrives; rank 1
/// polls its driver and answers each request with a result frame, flushed
/// at once as the runtime flushes an inline handler's answer. Both poll
/// and wait as the runtime's owner thread does (a poll, then the driver's
/// idle wait when it found nothing), and hand each received frame
/// back to the thread's store as the runtime does. What the driver costs a
/// round trip, apart from the runtime's own work. Every rank connects,
/// shuts down and drains the transport before the runtime starts its own.
fn transport_pingpong(
    world: &SimpleCommunicator,
    batches: usize,
    iterations: usize,
) -> Result<Duration, BoxError> {
    let hello =
        Runtime::builder(0xbe4c, ProtocolLimits::default(), RuntimeLimits::default())?.hello()?;
    let (handle, mut driver) = MpiTransport::new().connect(world, hello)?;
    let me = driver.rank();
    let call = Call {
        request: RequestId::MIN,
        action: ActionId::new(0xbe4c_0001)?,
        domain: DomainId::MIN,
        trace: None,
    };
    let mut events = Vec::new();
    let round = |driver: &mut dinah::mpi::MpiDriver, events: &mut Vec<TransportEvent>| {
        events.clear();
        let active = driver.poll(256, events).expect("the MPI transport polls");
        let mut frames = 0;
        for event in events.drain(..) {
            match event {
                TransportEvent::Frame { frame, .. } => {
                    frame_buffers::give_frame(frame);
                    frames += 1;
                }
                TransportEvent::PeerDown { peer, error } => {
                    panic!("rank {peer} went down during the ping-pong: {error}")
                }
                _ => {}
            }
        }
        if !active && frames == 0 {
            driver.idle_wait(Duration::from_micros(50), Duration::from_millis(1));
        }
        frames
    };
    let mut time = Duration::ZERO;
    if me.get() <= 1 {
        let peer = driver.world().rank(1 - me.get())?;
        let message = if me.get() == 0 {
            let deadline = RelativeDeadline::from_duration(Duration::from_secs(1))
                .ok_or("a one-second deadline")?;
            Message::Request { call, deadline }
        } else {
            Message::Result { call }
        };
        let frame = raw_frame(me, message, 8);
        // One request and its answer, as either rank sees them.
        let mut exchange = || {
            if me.get() == 0 {
                send_frame(&handle, peer, &frame);
                while round(&mut driver, &mut events) == 0 {}
            } else {
                while round(&mut driver, &mut events) == 0 {}
                // As the runtime answers an inline request: queued in the
                // round that received it, and flushed at its end.
                send_frame(&handle, peer, &frame);
                driver
                    .flush(256, &mut events)
                    .expect("the MPI transport flushes");
            }
        };
        (0..10).for_each(|_| exchange());
        // Both ranks run the batches; rank 0's times are the ones reported.
        time = median(batches, || {
            let start = Instant::now();
            (0..iterations).for_each(|_| exchange());
            start.elapsed() / iterations.max(1) as u32
        });
    }
    // Every rank drains: the goodbyes follow the last answer.
    driver.begin_shutdown();
    while !driver.is_drained() {
        round(&mut driver, &mut events);
    }
    driver.close(Instant::now() + Duration::from_secs(5));
    Ok(time)
}

/// Queues `frame` (a copy in a buffer of this thread's store, as the
/// runtime encodes its frames) for `peer` on the action lane.
fn send_frame(handle: &TransportHandle, peer: Rank, frame: &[u8]) {
    let mut copy = frame_buffers::take(frame.len());
    copy.extend_from_slice(frame);
    handle
        .try_send(peer, Channel::Action, copy)
        .expect("one frame in flight fits the lane");
}

fn median(batches: usize, mut measure: impl FnMut() -> Duration) -> Duration {
    let mut samples: Vec<_> = (0..batches.max(1)).map(|_| measure()).collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn fmt_us(duration: Duration) -> String {
    format!("{:.2} us", duration.as_secs_f64() * 1e6)
}

fn fmt_size(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1024 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

#[derive(Default)]
struct Table {
    rows: Vec<[String; 3]>,
}

impl Table {
    /// A payload row: the raw ping-pong of `size` bytes and the dinah echo
    /// of the same bytes (`kind` says as what, after the size).
    fn payload_row(&mut self, kind: &str, size: usize, raw: Duration, echo: Duration) {
        // Two payloads cross per round trip.
        let rate = 2.0 * size as f64 / echo.as_secs_f64() / 1e6;
        self.row(
            &format!(
                "payload {}{kind}: raw ping-pong / dinah echo",
                fmt_size(size)
            ),
            format!("{} / {}", fmt_us(raw), fmt_us(echo)),
            format!(
                "dinah {rate:.0} MB/s, {:.1}x raw",
                echo.as_secs_f64() / raw.as_secs_f64()
            ),
        );
    }

    /// The raw echo of `size` bytes (context for the payload row before
    /// it: a floor that, like dinah's echo, sends what it received).
    fn raw_echo_row(&mut self, size: usize, raw_echo: Duration, echo: Duration) {
        self.row(
            &format!("payload {}: raw echo", fmt_size(size)),
            fmt_us(raw_echo),
            format!(
                "sends back what it received; dinah echo {:.2}x it",
                echo.as_secs_f64() / raw_echo.as_secs_f64()
            ),
        );
    }

    fn row(&mut self, what: &str, value: String, target: String) {
        self.rows.push([what.to_owned(), value, target]);
    }

    fn print(&self) {
        println!("| measurement | value | goal / note |");
        println!("| --- | --- | --- |");
        for [what, value, target] in &self.rows {
            println!("| {what} | {value} | {target} |");
        }
    }
}
