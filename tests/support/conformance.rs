//! The transport conformance suite: one set of per-rank programs that every
//! transport (in-memory, TCP, MPI) must pass at world sizes 1, 2 and 4.
//!
//! A case is a function run on **every rank** with that rank's started
//! runtime; ranks coordinate only through dinah itself (the `Arrive`
//! barrier action, the `Stats` query), so the same cases run in threads of
//! one process or in separate processes under `mpirun`/`dinah-run`.
//! After the case, every rank passes a barrier and shuts down, and the
//! shutdown report must be clean, unless the case ends the runtime itself.
//!
//! Nothing here asserts on wall-clock time: waits are bounded only so a
//! broken transport fails instead of hanging, and the bound is generous.
#![allow(
    dead_code,
    unused_macros,
    reason = "each test file uses the part of the suite its transport supports"
)]

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use dinah_core::{DomainId, LimitField, ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::{
    Action, ActionError, Backpressure, CodecError, FailureKind, Runtime, RuntimeBuilder,
    RuntimeError, SegmentReader, SegmentWriter, ShutdownReport, Side, SpawnOptions, WireValue,
    schema_id,
};

/// The run ID every conformance rank uses.
pub(crate) const RUN_ID: u64 = 0x00c0_4f04_3a4c_e000;

/// The domain of the blocking and counting actions.
pub(crate) const WORK: DomainId = DomainId::MIN;

/// The domain of the control actions (barrier, stats, release): never
/// blocked by the work domain.
pub(crate) fn control_domain() -> DomainId {
    DomainId::new(2).expect("non-zero")
}

/// The domain of the long-running `Sleep` handlers.
pub(crate) fn sleep_domain() -> DomainId {
    DomainId::new(3).expect("non-zero")
}

/// The limits of the suite: small queues so saturation is quick to reach,
/// and a dedup table small enough that every case evicts finished entries
/// to make room.
pub(crate) fn limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_domains = 3;
    limits.max_action_queue = 8;
    limits.workers_per_domain = 2;
    limits.max_pending_calls = 512;
    limits.max_dedup_entries = 64;
    limits.default_deadline = Duration::from_secs(60);
    limits.shutdown_timeout = Duration::from_secs(20);
    limits
}

/// The longest any wait in the suite may take before the case fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// How long a clean shutdown may take.
pub(crate) const SHUTDOWN: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Per-rank state observed by the handlers.

/// Counters and gates of one rank, shared with its handlers.
#[derive(Debug)]
pub(crate) struct RankState {
    /// `Count` handlers that ran.
    pub(crate) counted: AtomicU64,
    /// `Sleep` handlers that started.
    pub(crate) sleeps_started: AtomicU64,
    /// `Sleep` handlers that saw their cancellation.
    pub(crate) cancels_observed: AtomicU64,
    /// `Block` handlers currently blocked.
    pub(crate) blocked: AtomicU64,
    /// `Soak` handlers that finished.
    pub(crate) soaked: AtomicU64,
    /// `soaked` as it was when a `Sleep` handler last saw its cancellation.
    pub(crate) soaked_at_cancel: AtomicU64,
    /// Barrier arrivals by epoch.
    arrivals: [AtomicU32; 64],
    gate_open: Mutex<bool>,
    gate: Condvar,
}

impl Default for RankState {
    fn default() -> Self {
        Self {
            counted: AtomicU64::new(0),
            sleeps_started: AtomicU64::new(0),
            cancels_observed: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            soaked: AtomicU64::new(0),
            soaked_at_cancel: AtomicU64::new(0),
            arrivals: std::array::from_fn(|_| AtomicU32::new(0)),
            gate_open: Mutex::new(false),
            gate: Condvar::new(),
        }
    }
}

impl RankState {
    /// Opens the gate `Block` handlers wait on.
    pub(crate) fn open_gate(&self) {
        *self.gate_open.lock().unwrap() = true;
        self.gate.notify_all();
    }

    /// Closes the gate again.
    pub(crate) fn close_gate(&self) {
        *self.gate_open.lock().unwrap() = false;
    }

    fn wait_gate(&self) {
        let mut open = self.gate_open.lock().unwrap();
        while !*open {
            open = self.gate.wait(open).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// Actions.

macro_rules! wire_newtype {
    ($name:ident($inner:ty), $schema:literal, $id:literal, $output:ty) => {
        /// A conformance-suite action.
        #[derive(Debug, Clone, PartialEq)]
        pub(crate) struct $name(pub(crate) $inner);
        impl WireValue for $name {
            const SCHEMA_ID: u64 = schema_id($schema);
            fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
                self.0.encode(out)
            }
            // Consumed, the payload's buffer travels as it is (a large
            // `Vec<u8>` in a split frame).
            fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
                self.0.encode_owned(out)
            }
            fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
                <$inner>::decode(input).map($name)
            }
        }
        impl Action for $name {
            const ID: u128 = $id;
            type Output = $output;
        }
    };
}

wire_newtype!(Add((u64, u64)), "conformance.Add/1", 0xc0f0_0001, u64);
wire_newtype!(Echo(Vec<u8>), "conformance.Echo/1", 0xc0f0_0002, Vec<u8>);
// Vectors of numbers: a large one travels as a split frame's tail of its
// width, both ways.
wire_newtype!(
    EchoF64(Vec<f64>),
    "conformance.EchoF64/1",
    0xc0f0_0010,
    Vec<f64>
);
wire_newtype!(
    EchoU16(Vec<u16>),
    "conformance.EchoU16/1",
    0xc0f0_0011,
    Vec<u16>
);
// Two vectors and a number after them: every large vector travels in its
// own allocation, the first as a middle part of its frame. The handler
// answers `(x, a * x + y)` for `(x, y, a)`.
wire_newtype!(
    Axpy((Vec<f64>, Vec<f64>, f64)),
    "conformance.Axpy/1",
    0xc0f0_0012,
    (Vec<f64>, Vec<f64>)
);

/// One item of a [`Catalog`].
#[derive(WireValue, Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub(crate) name: String,
    pub(crate) sizes: Vec<u32>,
}

/// What a [`Catalog`] is about.
#[derive(WireValue, Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Empty,
    Single(Item),
    Tagged { tag: String, weight: f64 },
}

/// A sequence of structs, a map and an enum in one action: the handler
/// sends it back with one more entry in the map.
#[derive(WireValue, Action, Debug, Clone, PartialEq)]
#[action(name = "conformance.Catalog/1", output = Catalog)]
pub(crate) struct Catalog {
    pub(crate) items: Vec<Item>,
    pub(crate) counts: std::collections::BTreeMap<String, u64>,
    pub(crate) kind: Kind,
}
wire_newtype!(Fail(String), "conformance.Fail/1", 0xc0f0_0003, ());
wire_newtype!(Explode(String), "conformance.Explode/1", 0xc0f0_0004, ());
wire_newtype!(Sleep((u64, bool)), "conformance.Sleep/1", 0xc0f0_0005, u64);
wire_newtype!(Block(()), "conformance.Block/1", 0xc0f0_0006, ());
wire_newtype!(Count(()), "conformance.Count/1", 0xc0f0_0007, u64);
wire_newtype!(Arrive(u32), "conformance.Arrive/1", 0xc0f0_0008, ());
wire_newtype!(
    Stats(()),
    "conformance.Stats/1",
    0xc0f0_0009,
    (u64, u64, u64, u64)
);
wire_newtype!(Release(bool), "conformance.Release/1", 0xc0f0_000a, ());
wire_newtype!(Cancels(()), "conformance.Cancels/1", 0xc0f0_000b, u64);
wire_newtype!(Mark(u64), "conformance.Mark/1", 0xc0f0_000c, u64);
wire_newtype!(Soak(Vec<u8>), "conformance.Soak/1", 0xc0f0_000d, u64);
wire_newtype!(Soaked(()), "conformance.Soaked/1", 0xc0f0_000e, (u64, u64));

/// A call that may hold its caller inside `encode` until other threads
/// finished a hundred calls: issued with a [`Hold`], it reaches the
/// transport long after calls that began later.
#[derive(Debug, Clone)]
pub(crate) struct SlowEncode {
    pub(crate) n: u64,
    pub(crate) hold: Option<Arc<Hold>>,
}

/// What a held [`SlowEncode`] waits for.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    /// Calls the other threads finished.
    pub(crate) completed: AtomicU64,
    /// Other threads that finished all their calls.
    pub(crate) others_done: AtomicU64,
    /// How many other threads there are.
    pub(crate) others: u64,
}

impl WireValue for SlowEncode {
    const SCHEMA_ID: u64 = schema_id("conformance.SlowEncode/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        if let Some(hold) = &self.hold {
            let until = hold.completed.load(Ordering::SeqCst) + 100;
            while hold.completed.load(Ordering::SeqCst) < until
                && hold.others_done.load(Ordering::SeqCst) < hold.others
            {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        self.n.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(|n| SlowEncode { n, hold: None })
    }
}

impl Action for SlowEncode {
    const ID: u128 = 0xc0f0_000f;
    type Output = u64;
}

/// Registers the suite's actions and domains on `builder`.
pub(crate) fn register(builder: &mut RuntimeBuilder, state: &Arc<RankState>) {
    let workers = NonZeroUsize::new(2).unwrap();
    builder.domain(WORK, workers).unwrap();
    builder.domain(control_domain(), NonZeroUsize::MIN).unwrap();
    builder.domain(sleep_domain(), workers).unwrap();
    builder
        .register_in::<Add, _>(WORK, |Add((a, b))| Ok(a.wrapping_add(b)))
        .unwrap();
    builder
        .register_in::<Echo, _>(WORK, |Echo(bytes)| Ok(bytes))
        .unwrap();
    builder
        .register_in::<EchoF64, _>(WORK, |EchoF64(numbers)| Ok(numbers))
        .unwrap();
    builder
        .register_in::<EchoU16, _>(WORK, |EchoU16(numbers)| Ok(numbers))
        .unwrap();
    builder
        .register_in::<Axpy, _>(WORK, |Axpy((x, mut y, a))| {
            y.iter_mut().zip(&x).for_each(|(y, x)| *y += a * x);
            Ok((x, y))
        })
        .unwrap();
    builder
        .register_in::<Catalog, _>(WORK, |mut catalog: Catalog| {
            catalog
                .counts
                .insert("served".into(), catalog.items.len() as u64);
            Ok(catalog)
        })
        .unwrap();
    builder
        .register_in::<Fail, _>(WORK, |Fail(text)| Err(ActionError::new(text)))
        .unwrap();
    builder
        .register_in::<Explode, _>(WORK, |Explode(text)| panic!("{text}"))
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_with_context::<Sleep, _>(
            sleep_domain(),
            move |Sleep((millis, cooperative)), ctx| {
                s.sleeps_started.fetch_add(1, Ordering::SeqCst);
                let until = Instant::now() + Duration::from_millis(millis);
                while Instant::now() < until {
                    if cooperative && ctx.is_cancelled() {
                        let soaked = s.soaked.load(Ordering::SeqCst);
                        s.soaked_at_cancel.store(soaked, Ordering::SeqCst);
                        s.cancels_observed.fetch_add(1, Ordering::SeqCst);
                        return Err(ActionError::new("cancelled"));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(millis)
            },
        )
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Block, _>(WORK, move |Block(())| {
            s.blocked.fetch_add(1, Ordering::SeqCst);
            s.wait_gate();
            s.blocked.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Count, _>(WORK, move |Count(())| {
            Ok(s.counted.fetch_add(1, Ordering::SeqCst) + 1)
        })
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Arrive, _>(control_domain(), move |Arrive(epoch)| {
            s.arrivals[epoch as usize % 64].fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Stats, _>(control_domain(), move |Stats(())| {
            Ok((
                s.counted.load(Ordering::SeqCst),
                s.sleeps_started.load(Ordering::SeqCst),
                s.cancels_observed.load(Ordering::SeqCst),
                s.blocked.load(Ordering::SeqCst),
            ))
        })
        .unwrap();
    builder
        .register_with_context::<Cancels, _>(control_domain(), |Cancels(()), ctx| {
            Ok(ctx.client().cancels_received())
        })
        .unwrap();
    builder
        .register_inline::<Mark, _>(control_domain(), |Mark(n)| Ok(n))
        .unwrap();
    builder
        .register_in::<SlowEncode, _>(WORK, |call: SlowEncode| Ok(call.n))
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Soak, _>(WORK, move |Soak(bytes)| {
            std::thread::sleep(Duration::from_millis(10));
            s.soaked.fetch_add(1, Ordering::SeqCst);
            Ok(bytes.len() as u64)
        })
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Soaked, _>(control_domain(), move |Soaked(())| {
            Ok((
                s.soaked.load(Ordering::SeqCst),
                s.soaked_at_cancel.load(Ordering::SeqCst),
            ))
        })
        .unwrap();
    let s = Arc::clone(state);
    builder
        .register_in::<Release, _>(control_domain(), move |Release(open)| {
            if open {
                s.open_gate()
            } else {
                s.close_gate()
            }
            Ok(())
        })
        .unwrap();
}

/// A builder of the suite's runtime for one rank.
pub(crate) fn builder(state: &Arc<RankState>) -> RuntimeBuilder {
    let mut builder = Runtime::builder(RUN_ID, ProtocolLimits::default(), limits()).unwrap();
    register(&mut builder, state);
    builder
}

// ---------------------------------------------------------------------------
// The per-rank context.

/// What a case gets on each rank.
pub(crate) struct RankCtx {
    runtime: Option<Runtime>,
    /// Its handlers' state.
    pub(crate) state: Arc<RankState>,
    epoch: u32,
}

/// How a case ended.
#[derive(Debug)]
pub(crate) enum Ending {
    /// Barrier, then a shutdown that must be clean.
    Clean,
    /// The case shut the runtime down itself.
    Done,
}

impl RankCtx {
    /// Wraps a started runtime.
    pub(crate) fn new(runtime: Runtime, state: Arc<RankState>) -> Self {
        Self {
            runtime: Some(runtime),
            state,
            epoch: 0,
        }
    }

    /// This rank's runtime.
    pub(crate) fn rt(&mut self) -> &mut Runtime {
        self.runtime
            .as_mut()
            .expect("the runtime was taken for shutdown")
    }

    fn rt_ref(&self) -> &Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime was taken for shutdown")
    }

    /// Takes the runtime out (to shut it down by hand).
    pub(crate) fn take_runtime(&mut self) -> Runtime {
        self.runtime
            .take()
            .expect("the runtime was taken for shutdown")
    }

    /// This rank.
    pub(crate) fn rank(&self) -> Rank {
        self.rt_ref().rank()
    }

    /// The world.
    pub(crate) fn world(&self) -> WorldSize {
        self.rt_ref().world()
    }

    /// Rank `offset` places after this one, cyclically.
    pub(crate) fn next(&self, offset: u32) -> Rank {
        let world = self.world();
        world
            .rank((self.rank().get() + offset) % world.get())
            .unwrap()
    }

    /// Drives `future` to completion.
    pub(crate) fn wait<F: Future>(&mut self, future: F) -> F::Output {
        self.rt().block_on(future)
    }

    /// Progresses until `done` holds, checking it after every other round
    /// of progress; fails the case after [`PATIENCE`]. Between the rounds
    /// the owner waits for something to happen, as in any `block_on` (see
    /// [`Round`]).
    pub(crate) fn wait_until(&mut self, what: &str, mut done: impl FnMut(&mut Self) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < PATIENCE,
                "rank {}: gave up waiting for {what}",
                self.rank().get()
            );
            self.rt().block_on(Round(0));
        }
    }

    /// Asks `rank` for its counters: (counted, sleeps started, cancels
    /// observed, blocked).
    pub(crate) fn stats_of(&mut self, rank: Rank) -> (u64, u64, u64, u64) {
        let client = self.rt().client();
        self.wait(client.spawn_on(rank, Stats(())))
            .expect("stats query")
    }

    /// How many cancellations `rank` has received from peers.
    pub(crate) fn cancels_received_by(&mut self, rank: Rank) -> u64 {
        let client = self.rt().client();
        self.wait(client.spawn_on(rank, Cancels(())))
            .expect("cancels query")
    }

    /// Opens (or closes) the gate of `rank`.
    pub(crate) fn release(&mut self, rank: Rank, open: bool) {
        let client = self.rt().client();
        self.wait(client.spawn_on(rank, Release(open)))
            .expect("release");
    }

    /// A barrier over all ranks that keeps serving calls while it waits.
    pub(crate) fn barrier(&mut self) {
        self.epoch += 1;
        let epoch = self.epoch;
        let client = self.rt().client();
        let arrivals: Vec<_> = self
            .world()
            .ranks()
            .map(|rank| client.spawn_on(rank, Arrive(epoch)))
            .collect();
        for arrival in arrivals {
            self.wait(arrival).expect("barrier arrival");
        }
        let world = self.world().get();
        let state = Arc::clone(&self.state);
        self.wait_until("the barrier", move |_| {
            state.arrivals[epoch as usize % 64].load(Ordering::SeqCst) >= world
        });
    }

    /// Barrier, then shutdown; returns the report.
    pub(crate) fn finish(mut self) -> Result<ShutdownReport, dinah_std::ShutdownTimeout> {
        self.barrier();
        self.take_runtime().shutdown(SHUTDOWN)
    }
}

/// A future that is ready on its third poll and wakes nobody. `block_on`
/// polls a future after each round of progress, and after a round that
/// finished what it found (or did nothing) it waits until the transport
/// or a client has something (or the runtime's longest idle passes)
/// before the next round. So between the first and the last poll of this
/// future the owner runs a round, waits unless that round stopped at a
/// budget, and runs another. A future that woke itself instead would keep
/// the owner checking without ever waiting: with more ranks than cores
/// (four on the CI machine's two), the busy owners keep the ranks'
/// workers and calling threads waiting for a core, and a case of many
/// calls slows down by orders of magnitude.
struct Round(u8);

impl Future for Round {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.0 += 1;
        if self.0 == 3 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Runs `case` on this rank and ends it as the case says; panics (failing
/// the rank) on any violation.
pub(crate) fn run_case(name: &str, case: Case, mut ctx: RankCtx) {
    let rank = ctx.rank().get();
    match case(&mut ctx) {
        Ending::Clean => {
            let report = ctx
                .finish()
                .unwrap_or_else(|e| panic!("rank {rank}, case {name}: {e}"));
            assert!(report.is_clean(), "rank {rank}, case {name}: {report}");
            // Every call this rank issued ended exactly once, in one of
            // the counted ways.
            assert_eq!(
                report.unsettled_calls(),
                0,
                "rank {rank}, case {name}: {:?}, {} abandoned",
                report.metrics,
                report.calls_abandoned
            );
        }
        Ending::Done => {}
    }
}

/// A conformance case.
pub(crate) type Case = fn(&mut RankCtx) -> Ending;

/// Every case, in order.
pub(crate) const CASES: &[(&str, Case)] = &[
    ("pass", pass),
    ("reuse", reuse),
    ("handler_error", handler_error),
    ("handler_panic", handler_panic),
    ("deadline_and_late_result", deadline_and_late_result),
    ("cancel_before_start", cancel_before_start),
    ("cancel_while_running", cancel_while_running),
    ("future_drop_sends_cancel", future_drop_sends_cancel),
    ("scope_exit_cancels", scope_exit_cancels),
    ("saturation", saturation),
    ("control_under_saturation", control_under_saturation),
    (
        "many_threads_no_false_refusals",
        many_threads_no_false_refusals,
    ),
    ("cancel_overtaking_a_burst", cancel_overtaking_a_burst),
    ("runtime_barrier", runtime_barrier),
    ("back_pressure", back_pressure),
    ("broadcast_and_reduce", broadcast_and_reduce),
    ("collections", collections),
    ("large_payloads", large_payloads),
    ("clean_shutdown", clean_shutdown),
    ("shutdown_timeout", shutdown_timeout),
];

/// Declares the suite as libtest tests: for every case a module `case`
/// with tests `world_1`, `world_2` and `world_4`, each calling
/// `run(test_path, world_size, case_name, case)` where `run` is a function
/// of the calling file (`test_path` is the test's own name, e.g.
/// `"pass::world_2"`, for runners that re-launch the test binary). Also
/// declares `every_case_is_run_here`, which fails if [`CASES`] gained a
/// case this list lacks. The file includes this module with
/// `#[macro_use]`.
macro_rules! conformance_tests {
    ($run:ident) => {
        conformance_tests!(@cases $run;
            pass,
            reuse,
            handler_error,
            handler_panic,
            deadline_and_late_result,
            cancel_before_start,
            cancel_while_running,
            future_drop_sends_cancel,
            scope_exit_cancels,
            saturation,
            control_under_saturation,
            many_threads_no_false_refusals,
            cancel_overtaking_a_burst,
            runtime_barrier,
            back_pressure,
            broadcast_and_reduce,
            collections,
            large_payloads,
            clean_shutdown,
            shutdown_timeout,
        );
    };
    (@cases $run:ident; $($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn world_1() {
                    super::$run(concat!(stringify!($case), "::world_1"), 1, stringify!($case), super::conformance::$case);
                }
                #[test]
                fn world_2() {
                    super::$run(concat!(stringify!($case), "::world_2"), 2, stringify!($case), super::conformance::$case);
                }
                #[test]
                fn world_4() {
                    super::$run(concat!(stringify!($case), "::world_4"), 4, stringify!($case), super::conformance::$case);
                }
            }
        )*

        #[test]
        fn every_case_is_run_here() {
            let here = [$(stringify!($case)),*];
            let suite: Vec<&str> = conformance::CASES.iter().map(|(name, _)| *name).collect();
            assert_eq!(here.as_slice(), suite.as_slice(), "conformance_tests! must list every case of CASES");
        }
    };
}

/// Every rank calls every rank (itself included) concurrently.
pub(crate) fn pass(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let me = u64::from(ctx.rank().get());
    // Two calls per target at a time: with every rank doing the same, a
    // target queues at most 2 * world <= 8 jobs, within the suite's limits.
    for round in 0..5u64 {
        let calls: Vec<_> = ctx
            .world()
            .ranks()
            .flat_map(|rank| (0..2u64).map(move |i| (rank, round * 2 + i)))
            .map(|(rank, i)| (i, client.spawn_on(rank, Add((me * 1000, i)))))
            .collect();
        for (i, call) in calls {
            assert_eq!(ctx.wait(call).expect("add"), me * 1000 + i);
        }
    }
    Ending::Clean
}

/// One runtime serves many requests in sequence.
pub(crate) fn reuse(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let target = ctx.next(1);
    let before = ctx.rt().stats().metrics.submitted;
    for i in 0..1000u64 {
        let bytes = i.to_le_bytes().to_vec();
        assert_eq!(
            ctx.wait(client.spawn_on(target, Echo(bytes.clone())))
                .expect("echo"),
            bytes
        );
    }
    assert!(ctx.rt().stats().metrics.submitted >= before + 1000);
    Ending::Clean
}

/// A handler's error arrives as a typed failure with its text.
pub(crate) fn handler_error(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let error = ctx
        .wait(client.spawn_on(ctx.next(1), Fail("boom".into())))
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::Remote { kind: FailureKind::Returned, text, .. } if text == "boom"),
        "{error:?}"
    );
    Ending::Clean
}

/// A handler's panic arrives as a typed failure with the panic message,
/// and the target keeps working.
pub(crate) fn handler_panic(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let target = ctx.next(1);
    let error = ctx
        .wait(client.spawn_on(target, Explode("kaboom".into())))
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::Remote { kind: FailureKind::Panicked, text, .. } if text == "kaboom"),
        "{error:?}"
    );
    assert_eq!(
        ctx.wait(client.spawn_on(target, Add((1, 1))))
            .expect("still serving"),
        2
    );
    Ending::Clean
}

/// A call past its deadline fails with `DeadlineExceeded`; the result that
/// arrives later is counted as late and discarded.
pub(crate) fn deadline_and_late_result(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(ctx.world().get() - 1);
        // Not cooperative: the handler finishes and its result comes late.
        let options = SpawnOptions::deadline(Duration::from_millis(50));
        let error = ctx
            .wait(client.spawn_on_with(target, Sleep((400, false)), options))
            .unwrap_err();
        assert!(
            matches!(error, RuntimeError::DeadlineExceeded { after } if after == Duration::from_millis(50))
        );
        ctx.wait_until("the late result", |ctx| {
            ctx.rt().stats().metrics.late_results_discarded >= 1
        });
        assert!(ctx.rt().stats().metrics.deadline_expiries >= 1);
    }
    Ending::Clean
}

/// A call cancelled while still queued at the target never runs its
/// handler.
pub(crate) fn cancel_before_start(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(ctx.world().get() - 1);
        let (counted_before, ..) = ctx.stats_of(target);
        let cancels_before = ctx.cancels_received_by(target);
        // Occupy both work-domain workers of the target.
        let blockers = [
            client.spawn_on(target, Block(())),
            client.spawn_on(target, Block(())),
        ];
        ctx.wait_until("both workers blocked", |ctx| ctx.stats_of(target).3 == 2);
        let queued = client.spawn_on(target, Count(()));
        // With the blockers this rank may already keep its whole share of
        // the target's queue in flight (world 4): then the call waits here,
        // is never sent, and dropping it sends nothing.
        let sent = ctx.rt().stats().flow.waiting == 0;
        assert!(
            sent || ctx.world().get() > 2,
            "at world 1 and 2 the share leaves room behind the blockers"
        );
        drop(queued);
        // The cancellation travels on the control lane, the release below on
        // the action lane: wait until the target has the cancellation, so the
        // release cannot overtake it. (A call to this rank is cancelled in
        // place, without a frame.)
        if target != ctx.rank() && sent {
            ctx.wait_until("the cancellation to arrive", move |ctx| {
                ctx.cancels_received_by(target) > cancels_before
            });
        }
        ctx.release(target, true);
        for blocker in blockers {
            ctx.wait(blocker).expect("blocker");
        }
        // A marker call behind the cancelled one proves the queue drained.
        let marker = ctx
            .wait(client.spawn_on(target, Count(())))
            .expect("marker");
        assert_eq!(
            marker,
            counted_before + 1,
            "the cancelled call must never have run"
        );
        ctx.release(target, false);
    }
    Ending::Clean
}

/// A running handler observes the cancellation of its call.
pub(crate) fn cancel_while_running(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(1);
        let (_, started, observed, _) = ctx.stats_of(target);
        let call = client.spawn_on(target, Sleep((120_000, true)));
        ctx.wait_until("the handler to start", move |ctx| {
            ctx.stats_of(target).1 > started
        });
        drop(call);
        ctx.wait_until("the handler to see the cancellation", move |ctx| {
            ctx.stats_of(target).2 > observed
        });
    }
    Ending::Clean
}

/// Dropping a future removes its waiter and sends a cancellation.
pub(crate) fn future_drop_sends_cancel(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(1);
        let requested = ctx.rt().stats().metrics.cancellation_requested;
        let (_, started, observed, _) = ctx.stats_of(target);
        let call = client.spawn_on(target, Sleep((120_000, true)));
        ctx.wait_until("the handler to start", move |ctx| {
            ctx.stats_of(target).1 > started
        });
        assert_eq!(ctx.rt().stats().pending_calls, 1);
        drop(call);
        assert_eq!(ctx.rt().stats().pending_calls, 0, "the waiter goes at once");
        assert!(ctx.rt().stats().metrics.cancellation_requested > requested);
        ctx.wait_until("the cancellation to arrive", move |ctx| {
            ctx.stats_of(target).2 > observed
        });
    }
    Ending::Clean
}

/// Leaving a scope cancels what it still tracks, even a leaked future.
pub(crate) fn scope_exit_cancels(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let target = ctx.next(1);
        let (_, started, observed, _) = ctx.stats_of(target);
        let state_probe = ctx.rt().client();
        ctx.rt().scope(|s| {
            let call = s.spawn_on(target, Sleep((120_000, true)));
            let probe = s.block_on(async {
                loop {
                    let stats = state_probe
                        .spawn_on(target, Stats(()))
                        .await
                        .expect("stats");
                    if stats.1 > started {
                        break stats;
                    }
                }
            });
            assert!(probe.1 > started);
            // Leaked: only the scope's exit can cancel it now.
            std::mem::forget(call);
        });
        ctx.wait_until("the scope's cancellation", move |ctx| {
            ctx.stats_of(target).2 > observed
        });
    }
    Ending::Clean
}

/// A broadcast from every root and a reduce to it (joining is associative
/// but not commutative, so the order of the ranks shows), an all-reduce,
/// and 50 broadcasts back to back, in which the root may run ahead.
pub(crate) fn broadcast_and_reduce(ctx: &mut RankCtx) -> Ending {
    let size = ctx.world().get();
    let me = ctx.rank();
    for root in ctx.world().ranks() {
        let value = (me == root).then(|| vec![format!("from {}", root.get()); 3]);
        let got: Vec<String> = ctx
            .rt()
            .broadcast(root, value, PATIENCE)
            .expect("broadcast");
        assert_eq!(got, vec![format!("from {}", root.get()); 3]);
        let joined = ctx
            .rt()
            .reduce(root, me.get().to_string(), |a, b| a + "," + &b, PATIENCE)
            .expect("reduce");
        let order: Vec<String> = (0..size)
            .map(|i| ((root.get() + i) % size).to_string())
            .collect();
        assert_eq!(joined, (me == root).then(|| order.join(",")));
    }
    let total = ctx
        .rt()
        .all_reduce(u64::from(me.get()) + 1, |a, b| a + b, PATIENCE)
        .expect("all-reduce");
    assert_eq!(total, u64::from(size) * u64::from(size + 1) / 2);
    for i in 0..50_u64 {
        let value = (me == Rank::ZERO).then_some(i);
        let got = ctx
            .rt()
            .broadcast(Rank::ZERO, value, PATIENCE)
            .expect("broadcast");
        assert_eq!(got, i);
    }
    Ending::Clean
}

/// Every rank keeps 48 slow calls in flight at rank 0 at once, six times
/// the suite's whole queue of 8: the calls beyond each rank's share wait on
/// their caller's side, and none is refused.
pub(crate) fn back_pressure(ctx: &mut RankCtx) -> Ending {
    const CALLS: usize = 48;
    let client = ctx.rt().client();
    let before = ctx.rt().stats().flow.waited;
    let payload = vec![7u8; 16];
    let calls: Vec<_> = (0..CALLS)
        .map(|_| client.spawn_on(Rank::ZERO, Soak(payload.clone())))
        .collect();
    for call in calls {
        match ctx.wait(call) {
            Ok(len) => assert_eq!(len, payload.len() as u64),
            Err(error) => panic!("rank {}: {error:?}", ctx.rank().get()),
        }
    }
    let waited = ctx.rt().stats().flow.waited - before;
    assert!(waited > 0, "48 calls fit no rank's share of a queue of 8");
    Ending::Clean
}

/// With both workers of the target blocked, calls beyond this rank's
/// share of the target's queue wait here instead of being refused, and
/// all run once the workers are free; calls that ask to fail fast are
/// refused at once instead, and exactly the admitted ones run.
pub(crate) fn saturation(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(ctx.world().get() - 1);
        // A call to this rank is refused by its own domain's share.
        let side = if target == ctx.rank() {
            Side::Local
        } else {
            Side::Remote
        };
        let total = 40;
        for backpressure in [Backpressure::FailFast, Backpressure::Wait] {
            let (counted_before, ..) = ctx.stats_of(target);
            let blockers = [
                client.spawn_on(target, Block(())),
                client.spawn_on(target, Block(())),
            ];
            ctx.wait_until("both workers blocked", |ctx| ctx.stats_of(target).3 == 2);
            let options = SpawnOptions::default().with_backpressure(backpressure);
            let calls: Vec<_> = (0..total)
                .map(|_| client.spawn_on_with(target, Count(()), options))
                .collect();
            let waited = ctx.rt().stats().flow.waiting;
            ctx.release(target, true);
            let (mut done, mut refused) = (0u64, 0u64);
            for call in calls {
                match ctx.wait(call) {
                    Ok(_) => done += 1,
                    Err(RuntimeError::ResourceExhausted {
                        limit: LimitField::MaxActionQueue,
                        side: s,
                    }) if s == side => {
                        refused += 1;
                    }
                    Err(other) => panic!("unexpected {other:?}"),
                }
            }
            for blocker in blockers {
                ctx.wait(blocker).expect("blocker");
            }
            assert_eq!(done + refused, total, "every call ended exactly once");
            if backpressure == Backpressure::Wait {
                assert_eq!(refused, 0, "calls beyond the share wait, never refused");
                assert!(waited > 0, "the share of a queue of 8 is below 40 calls");
            } else {
                assert!(refused > 0, "the share of a queue of 8 is below 40 calls");
                assert_eq!(waited, 0, "fail-fast calls never wait");
            }
            let (counted_after, ..) = ctx.stats_of(target);
            assert_eq!(
                counted_after - counted_before,
                done,
                "exactly the admitted calls ran"
            );
            ctx.release(target, false);
        }
    }
    Ending::Clean
}

/// A cancellation reaches a running handler while the action lane is
/// saturated with large requests, and before they drained: the handler
/// sees it while slow handlers of the flood are still working through it.
pub(crate) fn control_under_saturation(ctx: &mut RankCtx) -> Ending {
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(1);
        let (_, started, observed, _) = ctx.stats_of(target);
        let (soaked_before, _) = ctx
            .wait(client.spawn_on(target, Soaked(())))
            .expect("soak query");
        let sleeper = client.spawn_on(target, Sleep((120_000, true)));
        ctx.wait_until("the handler to start", move |ctx| {
            ctx.stats_of(target).1 > started
        });
        let payload = vec![7u8; 256 * 1024];
        let flood: Vec<_> = (0..48)
            .map(|_| client.spawn_on(target, Soak(payload.clone())))
            .collect();
        drop(sleeper);
        let mut done = 0;
        for call in flood {
            match ctx.wait(call) {
                Ok(len) => {
                    assert_eq!(len, payload.len() as u64);
                    done += 1;
                }
                Err(RuntimeError::ResourceExhausted { .. }) => {}
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        ctx.wait_until("the cancellation to be seen", move |ctx| {
            ctx.stats_of(target).2 > observed
        });
        let (soaked_after, soaked_at_cancel) = ctx
            .wait(client.spawn_on(target, Soaked(())))
            .expect("soak query");
        assert_eq!(
            soaked_after - soaked_before,
            done,
            "every admitted soak ran"
        );
        // A call to this rank is cancelled in place, with no lane to cross.
        if target == ctx.rank() {
            return Ending::Clean;
        }
        assert!(
            done > 1,
            "the flood kept the workers busy ({done} admitted)"
        );
        assert!(
            soaked_at_cancel < soaked_after,
            "the cancellation was seen only after the flood drained \
             ({soaked_at_cancel} of {soaked_after} soaks done)"
        );
    }
    Ending::Clean
}

/// Eight threads on every rank call the next rank at once; one of them
/// holds every 64th of its calls inside `encode` until the others finished
/// a hundred calls, so its call reaches the transport after calls that
/// began later, while the suite's small dedup table evicts finished
/// entries all the time. No call may be refused as a duplicate it never
/// was.
pub(crate) fn many_threads_no_false_refusals(ctx: &mut RankCtx) -> Ending {
    const THREADS: u64 = 8;
    const CALLS: u64 = 300;
    let target = ctx.next(1);
    let hold = Arc::new(Hold {
        others: THREADS - 1,
        ..Hold::default()
    });
    let finished = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let client = ctx.rt().client();
            let hold = Arc::clone(&hold);
            let finished = Arc::clone(&finished);
            std::thread::spawn(move || {
                // Counted even if a call fails, so the owner stops waiting.
                let _finished = Finished(finished);
                for i in 0..CALLS {
                    let n = thread * CALLS + i;
                    let held = thread == 0 && i % 64 == 0;
                    let call = SlowEncode {
                        n,
                        hold: held.then(|| Arc::clone(&hold)),
                    };
                    let outcome = block_on_thread(client.spawn_on(target, call));
                    assert!(matches!(outcome, Ok(v) if v == n), "call {n}: {outcome:?}");
                    if thread != 0 {
                        hold.completed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if thread != 0 {
                    hold.others_done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    ctx.wait_until("the calling threads", |_| {
        finished.load(Ordering::SeqCst) == THREADS
    });
    for thread in threads {
        thread.join().expect("a calling thread failed");
    }
    Ending::Clean
}

/// Counts a calling thread as finished when it ends, by return or panic.
struct Finished(Arc<AtomicU64>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Bursts of calls, each burst's last call dropped at once: its
/// cancellation overtakes the burst on the control lane. Every other call
/// of the burst still runs and answers.
pub(crate) fn cancel_overtaking_a_burst(ctx: &mut RankCtx) -> Ending {
    const BURST: u64 = 400;
    let client = ctx.rt().client();
    let target = ctx.next(1);
    if target == ctx.rank() {
        // Calls to this rank cross no lane and no dedup table.
        return Ending::Clean;
    }
    for burst in 0..4 {
        let mut calls: Vec<_> = (0..BURST)
            .map(|i| client.spawn_on(target, Mark(burst * BURST + i)))
            .collect();
        drop(calls.pop());
        for (i, call) in calls.into_iter().enumerate() {
            let outcome = ctx.wait(call);
            let expected = burst * BURST + i as u64;
            assert!(
                matches!(outcome, Ok(v) if v == expected),
                "burst {burst}, call {i}: {outcome:?}"
            );
        }
    }
    Ending::Clean
}

/// Waits for `future` on a thread that is not the runtime's owner: the
/// owner's progress completes it and wakes this thread.
fn block_on_thread<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

/// The runtime's own barrier (`Runtime::barrier`), ten times in a row: in
/// each round every rank counts itself at rank 0 before the barrier, so
/// after it rank 0 must hold every rank's count of that round.
pub(crate) fn runtime_barrier(ctx: &mut RankCtx) -> Ending {
    let world = u64::from(ctx.world().get());
    let zero = Rank::ZERO;
    for round in 1..=10_u64 {
        let client = ctx.rt().client();
        ctx.wait(client.spawn_on(zero, Count(()))).expect("count");
        ctx.rt().barrier(PATIENCE).expect("barrier");
        let (counted, ..) = ctx.stats_of(zero);
        // Nobody left before everybody counted; some may have counted for
        // the next round already.
        assert!(
            (world * round..=world * (round + 1)).contains(&counted),
            "round {round}: rank 0 counted {counted} of {world} ranks"
        );
    }
    Ending::Clean
}

/// A sequence of structs, a map and an enum cross to every rank and back:
/// 300 items (one segment, however many), each kind of variant.
pub(crate) fn collections(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let me = ctx.rank().get();
    let kinds = [
        Kind::Empty,
        Kind::Single(Item {
            name: "one".into(),
            sizes: vec![1, 2, 3],
        }),
        Kind::Tagged {
            tag: format!("rank {me}"),
            weight: 0.5,
        },
    ];
    for (round, kind) in kinds.into_iter().enumerate() {
        let catalog = Catalog {
            items: (0..300_u32)
                .map(|i| Item {
                    name: format!("item {i} of rank {me}"),
                    sizes: (0..i % 5).collect(),
                })
                .collect(),
            counts: [("round".to_owned(), round as u64)].into_iter().collect(),
            kind,
        };
        let calls: Vec<_> = ctx
            .world()
            .ranks()
            .map(|rank| client.spawn_on(rank, catalog.clone()))
            .collect();
        for call in calls {
            let mut expected = catalog.clone();
            expected.counts.insert("served".into(), 300);
            assert_eq!(ctx.wait(call).expect("catalog"), expected);
        }
    }
    Ending::Clean
}

/// Payloads around and well above the size from which a frame is written
/// around its payload instead of copying it (64 KiB), and large values
/// whose segment count changes from call to call (each variant of an
/// enum), cross to every rank and back byte for byte.
pub(crate) fn large_payloads(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let me = ctx.rank().get();
    for len in [(64 << 10) - 1, 64 << 10, (1 << 20) + 3, 3 << 20] {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + me as usize) as u8).collect();
        let calls: Vec<_> = ctx
            .world()
            .ranks()
            .map(|rank| client.spawn_on(rank, Echo(bytes.clone())))
            .collect();
        for call in calls {
            assert!(ctx.wait(call).expect("echo") == bytes, "{len} bytes");
        }
    }
    // Numbers on either side of the size where a vector travels in its
    // own allocation (64 KiB), in two widths.
    for count in [(8 << 10) - 1, 8 << 10, (1 << 17) + 3, 3 << 17] {
        let numbers: Vec<f64> = (0..count).map(|i| i as f64 * 0.5 - f64::from(me)).collect();
        let halves: Vec<u16> = (0..4 * count)
            .map(|i| (i * 7 + me as usize) as u16)
            .collect();
        for rank in ctx.world().ranks() {
            let back = ctx.wait(client.spawn_on(rank, EchoF64(numbers.clone())));
            assert!(back.expect("f64 echo") == numbers, "{count} f64s");
            let back = ctx.wait(client.spawn_on(rank, EchoU16(halves.clone())));
            assert!(back.expect("u16 echo") == halves, "{} u16s", 4 * count);
            let y: Vec<f64> = numbers.iter().map(|x| x * 3.0).collect();
            let expected: Vec<f64> = numbers.iter().map(|x| x * 5.0).collect();
            let axpy = Axpy((numbers.clone(), y, 2.0));
            let (x, sum) = ctx.wait(client.spawn_on(rank, axpy)).expect("axpy");
            assert!(x == numbers && sum == expected, "axpy of {count}");
        }
    }
    let item = |i: u32| Item {
        name: format!("item {i} of rank {me}"),
        sizes: (0..i % 50).collect(),
    };
    let kinds = [
        Kind::Single(item(7)),
        Kind::Empty,
        Kind::Tagged {
            tag: "x".repeat(100_000),
            weight: 2.5,
        },
        Kind::Single(item(9)),
    ];
    for (round, kind) in kinds.into_iter().enumerate() {
        let catalog = Catalog {
            items: (0..2_000).map(item).collect(),
            counts: [("round".to_owned(), round as u64)].into_iter().collect(),
            kind,
        };
        for rank in ctx.world().ranks() {
            let mut expected = catalog.clone();
            expected.counts.insert("served".into(), 2_000);
            let back = ctx.wait(client.spawn_on(rank, catalog.clone()));
            assert_eq!(back.expect("catalog"), expected, "round {round}");
        }
    }
    Ending::Clean
}

/// The default ending is the test: a barrier and a clean shutdown.
pub(crate) fn clean_shutdown(ctx: &mut RankCtx) -> Ending {
    let client = ctx.rt().client();
    let sum = ctx
        .wait(client.spawn_on(ctx.next(1), Add((2, 3))))
        .expect("add");
    assert_eq!(sum, 5);
    Ending::Clean
}

/// A handler that never returns makes rank 0's shutdown time out with
/// exact counts; the other ranks shut down cleanly.
pub(crate) fn shutdown_timeout(ctx: &mut RankCtx) -> Ending {
    ctx.barrier();
    if ctx.rank() != Rank::ZERO {
        let report = ctx.take_runtime().shutdown(SHUTDOWN);
        return check_clean(report);
    }
    let client = ctx.rt().client();
    let blocker = client.spawn_on(Rank::ZERO, Block(()));
    ctx.wait_until("the handler to block", |ctx| {
        ctx.state.blocked.load(Ordering::SeqCst) == 1
    });
    drop(blocker);
    let state = Arc::clone(&ctx.state);
    let runtime = ctx.take_runtime();
    let error = runtime
        .shutdown(Duration::from_millis(300))
        .expect_err("a stuck handler cannot be joined");
    state.open_gate();
    let report = error.report;
    // Exactly the one stuck local job; no waiter, no remote entry. (Frames
    // still travelling to peers that are shutting down are counted too,
    // and depend on timing, so they are not asserted here.)
    assert_eq!(report.action_jobs, 1, "{report}");
    assert_eq!(report.pending_calls, 0, "{report}");
    assert_eq!(report.dedup_entries, 0, "{report}");
    assert!(!report.is_clean());
    Ending::Done
}

fn check_clean(report: Result<ShutdownReport, dinah_std::ShutdownTimeout>) -> Ending {
    let report = report.expect("clean shutdown");
    assert!(report.is_clean(), "{report}");
    Ending::Done
}
