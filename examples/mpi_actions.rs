//! dinah over MPI: one process per rank, typed remote actions between
//! them, checked against the same computation done sequentially.
//!
//! Rank 0 counts the primes below 5,000,000 by handing 100,000-wide ranges
//! to every rank (itself included), sends 8 MiB of data in 512 KiB chunks
//! to be summed (sum of squares, wrapping), and compares both results with
//! a sequential computation (the prime count also with its known value). It
//! then shows a deadline that expires (the remote handler sees the
//! cancellation) and a call cancelled by dropping its future. The other
//! ranks serve meanwhile, waiting in a barrier that rank 0 joins when it is
//! done; then every rank prints its statistics and shutdown report.
//!
//! A wrong answer, a failed call or a failed barrier makes that rank abort
//! the job, so `mpirun` exits non-zero: the `mpi` CI lane runs this example
//! under 4 ranks and checks exactly that.
//!
//! ```sh
//! cargo xtask demo --mpi
//! # or by hand (as root, add --allow-run-as-root):
//! cargo build --release --features mpi --example mpi_actions
//! mpirun -n 4 --oversubscribe target/release/examples/mpi_actions
//! ```
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dinah::mpi::MpiTransport;
use dinah::mpi::mpi::traits::Communicator;
use dinah::mpi::mpi::{self, Threading};
use dinah::prelude::*;

type BoxError = Box<dyn std::error::Error>;

const RUN_ID: u64 = 0x4d50_4900_0000_0001;
const PRIME_LIMIT: u64 = 5_000_000;
/// The number of primes below `PRIME_LIMIT`, known independently of the
/// sieve below.
const PRIMES_BELOW_LIMIT: u64 = 348_513;
const PRIME_CHUNK: u64 = 100_000;
const DATA_WORDS: usize = 1 << 20;
const DATA_CHUNK: usize = 64 * 1024;
/// How long the other ranks wait in the final barrier for rank 0: far
/// longer than rank 0's work, even unoptimised on an oversubscribed
/// machine, and shorter than the CI lane's limit for the run, so a rank
/// that never arrives fails the barrier with a message of its own.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

/// The domain of the control actions, so they never queue behind work.
fn control_domain() -> DomainId {
    DomainId::new(2).expect("non-zero")
}

/// Counts the primes in `start..end`.
#[derive(WireValue, Action)]
#[action(name = "mpi_actions.CountPrimes/1", output = u64)]
struct CountPrimes {
    start: u64,
    end: u64,
}

/// Sums the squares (wrapping) of the little-endian u64 words it carries.
#[derive(WireValue, Action)]
#[action(name = "mpi_actions.SumSquares/1", output = u64)]
struct SumSquares(Vec<u8>);

/// Works for the given milliseconds unless cancelled first.
#[derive(WireValue, Action)]
#[action(name = "mpi_actions.Work/1", output = u64)]
struct Work(u64);

/// This rank's (work started, cancellations observed).
#[derive(WireValue, Action)]
#[action(name = "mpi_actions.Observed/1", output = (u64, u64))]
struct Observed;

/// What a rank's handlers observed.
#[derive(Default)]
struct Counters {
    started: AtomicU64,
    cancelled: AtomicU64,
}

fn main() -> Result<(), BoxError> {
    let (universe, threading) =
        mpi::initialize_with_threading(Threading::Funneled).ok_or("MPI was initialised already")?;
    if threading < Threading::Funneled {
        return Err(format!("MPI granted {threading:?}; dinah needs Funneled").into());
    }
    let world = universe.world();
    let counters = Arc::new(Counters::default());
    let builder = builder(&counters)?;
    let (handle, driver) = MpiTransport::new().connect(&world, builder.hello()?)?;
    let mut runtime = builder.start(handle, driver)?;
    let me = runtime.rank();

    let outcome = run(&mut runtime);
    if let Err(error) = &outcome {
        println!("rank {}: failed: {error}", me.get());
        // The other ranks would wait for this one in the barrier, then in
        // shutdown and `MPI_Finalize`: end the whole job at once with a
        // non-zero status instead.
        world.abort(1);
    }
    println!("rank {} stats: {}", me.get(), runtime.stats());
    let report = runtime.shutdown(Duration::from_secs(30));
    match &report {
        Ok(report) => println!(
            "rank {} shutdown: clean = {}, {report}",
            me.get(),
            report.is_clean()
        ),
        Err(timeout) => println!("rank {} shutdown: {timeout}", me.get()),
    }
    // Every runtime is gone: now MPI may finalise.
    drop(universe);
    outcome?;
    report?;
    Ok(())
}

fn builder(counters: &Arc<Counters>) -> Result<RuntimeBuilder, BoxError> {
    let mut builder =
        Runtime::builder(RUN_ID, ProtocolLimits::default(), RuntimeLimits::default())?;
    builder.domain(DEFAULT_DOMAIN, NonZeroUsize::new(2).ok_or("two workers")?)?;
    builder.domain(control_domain(), NonZeroUsize::MIN)?;
    builder
        .register::<CountPrimes, _>(|CountPrimes { start, end }| Ok(count_primes(start, end)))?;
    builder.register::<SumSquares, _>(|SumSquares(bytes)| {
        if bytes.len() % 8 != 0 {
            return Err(ActionError::new("payload is not whole u64 words"));
        }
        Ok(sum_squares(bytes.chunks_exact(8).map(|w| {
            u64::from_le_bytes(w.try_into().expect("8 bytes"))
        })))
    })?;
    let c = Arc::clone(counters);
    builder.register_with_context::<Work, _>(DEFAULT_DOMAIN, move |Work(millis), ctx| {
        c.started.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_millis(millis);
        while Instant::now() < until {
            if ctx.is_cancelled() {
                c.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(ActionError::new("cancelled"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(millis)
    })?;
    let c = Arc::clone(counters);
    builder.register_in::<Observed, _>(control_domain(), move |Observed| {
        Ok((
            c.started.load(Ordering::SeqCst),
            c.cancelled.load(Ordering::SeqCst),
        ))
    })?;
    Ok(builder)
}

/// Rank 0 leads, then joins the barrier; the other ranks go straight to
/// the barrier and serve rank 0's calls while they wait in it.
fn run(runtime: &mut Runtime) -> Result<(), BoxError> {
    if runtime.rank() == Rank::ZERO {
        lead(runtime)?;
    }
    runtime.barrier(BARRIER_TIMEOUT)?;
    Ok(())
}

/// Rank 0: the computations, the deadline, the cancellation.
fn lead(runtime: &mut Runtime) -> Result<(), BoxError> {
    let client = runtime.client();
    let world = runtime.world();
    let ranks: Vec<Rank> = world.ranks().collect();
    // The MPI CI lanes read this line to check the world they launched.
    println!("mpi_actions: {} rank(s)", world.get());

    // 1. Primes below PRIME_LIMIT, one range per call, round-robin over the
    //    ranks (rank 0's own share runs locally, without the wire).
    let start = Instant::now();
    let calls: Vec<_> = (0..PRIME_LIMIT.div_ceil(PRIME_CHUNK))
        .map(|i| {
            let (start, end) = (i * PRIME_CHUNK, ((i + 1) * PRIME_CHUNK).min(PRIME_LIMIT));
            client.spawn_on(ranks[i as usize % ranks.len()], CountPrimes { start, end })
        })
        .collect();
    let mut distributed = 0;
    for call in calls {
        distributed += runtime.block_on(call)?;
    }
    let took = start.elapsed();
    let sequential = count_primes(0, PRIME_LIMIT);
    println!(
        "primes below {PRIME_LIMIT}: {distributed} over {} rank(s) in {took:.2?}, {sequential} sequentially",
        world.get()
    );
    check(
        sequential == PRIMES_BELOW_LIMIT,
        "the sequential prime count is wrong",
    )?;
    check(
        distributed == sequential,
        "the distributed prime count differs",
    )?;

    // 2. 8 MiB of data in 512 KiB chunks: sum of squares, wrapping.
    let data: Vec<u64> = (0..DATA_WORDS as u64).map(splitmix64).collect();
    let start = Instant::now();
    let calls: Vec<_> = data
        .chunks(DATA_CHUNK)
        .enumerate()
        .map(|(i, chunk)| {
            let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_le_bytes()).collect();
            client.spawn_on(ranks[i % ranks.len()], SumSquares(bytes))
        })
        .collect();
    let mut distributed = 0u64;
    for call in calls {
        distributed = distributed.wrapping_add(runtime.block_on(call)?);
    }
    let took = start.elapsed();
    let sequential = sum_squares(data.iter().copied());
    println!(
        "sum of squares of {DATA_WORDS} words: {distributed:#018x} in {took:.2?}, {sequential:#018x} sequentially"
    );
    check(
        distributed == sequential,
        "the distributed sum of squares differs",
    )?;

    // 3. A deadline that expires: 2 s of work allowed 200 ms. The target is
    //    told (best effort) and its handler stops early.
    let target = *ranks.last().ok_or("a world has a rank")?;
    let (_, cancelled_before) = runtime.block_on(client.spawn_on(target, Observed))?;
    let short = SpawnOptions::deadline(Duration::from_millis(200));
    match runtime.block_on(client.spawn_on_with(target, Work(2_000), short)) {
        Err(RuntimeError::DeadlineExceeded { after }) => println!(
            "work on rank {}: deadline of {after:?} exceeded",
            target.get()
        ),
        other => return Err(format!("work past its deadline ended with {other:?}").into()),
    }
    wait_for(runtime, "the handler to see the cancellation", |runtime| {
        let (_, cancelled) = runtime.block_on(client.spawn_on(target, Observed))?;
        Ok(cancelled > cancelled_before)
    })?;
    println!(
        "rank {}'s handler observed the cancellation and stopped early",
        target.get()
    );

    // 4. Cancelling by dropping the future: the running handler stops.
    let target = ranks[1 % ranks.len()];
    let (started_before, cancelled_before) = runtime.block_on(client.spawn_on(target, Observed))?;
    let call = client.spawn_on(target, Work(60_000));
    wait_for(runtime, "the work to start", |runtime| {
        Ok(runtime.block_on(client.spawn_on(target, Observed))?.0 > started_before)
    })?;
    drop(call);
    wait_for(runtime, "the cancellation to arrive", |runtime| {
        Ok(runtime.block_on(client.spawn_on(target, Observed))?.1 > cancelled_before)
    })?;
    println!(
        "a minute of work on rank {} was cancelled by dropping its future",
        target.get()
    );
    Ok(())
}

fn check(ok: bool, what: &str) -> Result<(), BoxError> {
    if ok { Ok(()) } else { Err(what.into()) }
}

/// Asks `done` until it holds, for at most a minute.
fn wait_for(
    runtime: &mut Runtime,
    what: &str,
    mut done: impl FnMut(&mut Runtime) -> Result<bool, BoxError>,
) -> Result<(), BoxError> {
    let start = Instant::now();
    while !done(runtime)? {
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!("gave up waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// The primes in `start..end`: a segmented sieve with the primes up to
/// the square root of `end`.
fn count_primes(start: u64, end: u64) -> u64 {
    if end <= 2 || start >= end {
        return 0;
    }
    let root = (end as f64).sqrt() as u64 + 1;
    let mut small = vec![true; root as usize + 1];
    let mut base = Vec::new();
    for p in 2..=root {
        if small[p as usize] {
            base.push(p);
            (p * p..=root)
                .step_by(p as usize)
                .for_each(|m| small[m as usize] = false);
        }
    }
    let low = start.max(2);
    let mut segment = vec![true; (end - low) as usize];
    for &p in &base {
        let first = (p * p).max(low.div_ceil(p) * p);
        (first..end)
            .step_by(p as usize)
            .for_each(|m| segment[(m - low) as usize] = false);
    }
    segment.iter().filter(|&&is_prime| is_prime).count() as u64
}

fn sum_squares(words: impl Iterator<Item = u64>) -> u64 {
    words.fold(0u64, |sum, w| sum.wrapping_add(w.wrapping_mul(w)))
}

/// A fixed pseudo-random word for index `i`.
fn splitmix64(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
