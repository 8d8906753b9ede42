//! Running a batch with the caller's thread as one of its workers.
//!
//! Handing a batch called from outside the domain's pool to the pool whole
//! (Rayon's `install`) costs a chain of wake-ups: the caller sleeps, a
//! worker wakes, splits the work, wakes the next worker, and at the end
//! wakes the caller. For a short batch of cheap tasks those wake-ups take
//! longer than running the whole batch on one thread, and only a spinning
//! caller, which takes a core from the workers, hides them.
//!
//! Here the caller works instead, as the calling thread does in TBB's
//! `task_arena::execute` or an OpenMP parallel region, and the domain's
//! workers join it when the work left is worth waking them for:
//!
//! - **Alone first.** The caller runs tasks from the front in runs of 1,
//!   2, 4, ... up to [`MAX_SOLO_RUN`] tasks (a run doubles while it took
//!   less than [`PROBE_TIME`]), reading the clock after each run. Once it
//!   has run for at least [`PROBE_TIME`] and the time per task so far,
//!   times the tasks left, exceeds [`HELP_WORTH`], helpers are called (see
//!   [`helpers_worth_it`]). A short batch never wakes a worker; a heavy one
//!   loses at most one task's time, or [`PROBE_TIME`], of parallelism. A
//!   batch of at most [`EAGER_TASKS_PER_WORKER`] tasks per worker skips
//!   this and calls its helpers at once.
//! - **Then together.** Up to `workers - 1` helper jobs are spawned in the
//!   domain's pool (joined before the batch's frame ends, so they may
//!   borrow the batch; `helpers.rs` says why not a Rayon scope), and the
//!   caller and the helpers claim runs of tasks from the front under one
//!   mutex: about `left / (CLAIM_DIVISOR * participants)` tasks a claim
//!   (guided self-scheduling, so the last claims are single tasks and the
//!   participants finish together), and at most what runs in about
//!   [`CLAIM_TIME`], so a participant the system preempts holds back
//!   little. A claim splits the remaining Rayon producer at the claimed
//!   length, which moves nothing. The caller takes its first claim before
//!   it spawns the helpers, so it always runs part of the batch, and
//!   yields its core once after calling them (see `together` for why).
//! - **The end.** The caller spins (the domain's adaptive batch spin) until
//!   its helpers have returned, then leaves the scope, which parks if one
//!   is still running.
//! - **Heavy batches are handed off.** When the work left is estimated at
//!   [`HAND_OFF_WORTH`] or more, the caller stops after its runs alone: it
//!   spawns one job per worker (`workers` of them), which claim the rest
//!   as above, and parks until they return. The reason is
//!   the pool's spare thread: a pool of `workers` threads with the caller
//!   as one more participant has a thread with nothing to do, and Rayon
//!   wakes it anyway (a sleeping worker that finds a job wakes the next
//!   sleeper, in case the job spawns more). Woken, it searches for work
//!   and yields about thirty times before it sleeps again; with every core
//!   busy each yield waits a time slice, so it stays runnable for many time
//!   slices and takes turns with the threads doing the work, taking a
//!   noticeable share of their time in a long, heavy batch. Handing off
//!   costs the caller a wake-up at the end: small against a heavy batch,
//!   but not against a short one, so short batches keep the caller
//!   working.
//!
//! So a batch never runs more than `workers` of its tasks at once: the
//! caller counts as one of them until it hands off. (Batches called at
//! once from several threads may together, each caller running its own.)
//!
//! # Memory ordering
//!
//! The claims hand producers between threads under the claim mutex.
//! Everything the helpers did is visible to the caller once it has joined
//! them (`helpers.rs`: their count of running jobs is decremented with
//! `Release` and read with `Acquire`), which the caller does before it
//! returns, normally or unwinding.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rayon::iter::IndexedParallelIterator;
use rayon::iter::plumbing::{Producer, ProducerCallback};

use super::helpers::Helpers;
use super::wait::AdaptiveSpin;

/// Batches of at most this many tasks per worker call their helpers at once.
const EAGER_TASKS_PER_WORKER: usize = 8;

/// Helpers are called once the work left is estimated above this on the
/// caller alone: above what waking a worker and waiting for it at the end
/// costs, so a helper that is called saves more time than it costs.
const HELP_WORTH: Duration = Duration::from_micros(50);

/// A run of the caller alone doubles while it took less than this, and
/// the caller decides whether to call helpers only once it has run alone
/// for this long.
const PROBE_TIME: Duration = Duration::from_micros(5);

/// The most tasks the caller runs alone between two clock reads.
const MAX_SOLO_RUN: usize = 1024;

/// A claim takes about `left / (CLAIM_DIVISOR * participants)` tasks.
const CLAIM_DIVISOR: usize = 4;

/// A claim takes at most about this much work, as estimated.
const CLAIM_TIME: Duration = Duration::from_micros(20);

/// Batches whose work left is estimated at this or more are handed off to
/// one job per worker while the caller parks (see the module docs): well
/// above the caller's wake-up at the end, below the time the pool's spare
/// thread would otherwise take from the workers.
pub(super) const HAND_OFF_WORTH: Duration = Duration::from_millis(1);

/// Who can run a batch: the pool its helpers run in, how many may help,
/// and how the caller spins while the last ones finish.
pub(super) struct Crew<'a> {
    /// The domain's pool.
    pub(super) pool: &'a rayon::ThreadPool,
    /// Helper jobs the batch may use besides the caller.
    pub(super) helpers: usize,
    /// The domain's adaptive spin for waits on batches.
    pub(super) spin: &'a AdaptiveSpin,
    /// Estimated work left at which the caller hands the batch off
    /// ([`HAND_OFF_WORTH`] outside tests).
    pub(super) hand_off: Duration,
}

/// Calls `op` on every item of `items`, on the calling thread and the
/// crew's helpers, and returns how many calls returned (all of them unless
/// `op` panicked, in which case the panic propagates after every helper has
/// stopped).
pub(super) fn drive<I, Op>(crew: &Crew<'_>, items: I, op: Op) -> usize
where
    I: IndexedParallelIterator,
    Op: Fn(I::Item) + Sync,
{
    let len = items.len();
    items.with_producer(Drive { crew, len, op })
}

/// The callback that receives the batch's producer.
struct Drive<'c, 'a, Op> {
    crew: &'c Crew<'a>,
    len: usize,
    op: Op,
}

impl<T, Op> ProducerCallback<T> for Drive<'_, '_, Op>
where
    Op: Fn(T) + Sync,
{
    type Output = usize;

    fn callback<P: Producer<Item = T>>(self, producer: P) -> usize {
        let Self { crew, len, op } = self;
        let mut front = Front {
            rest: Some(producer),
            left: len,
        };
        let (done, per_task) = if crew.helpers == 0 {
            // The caller is the only worker.
            let done = front
                .take(len)
                .map_or(0, |(piece, count)| run(piece, count, &op));
            (done, None)
        } else if len <= EAGER_TASKS_PER_WORKER.saturating_mul(crew.helpers + 1) {
            (0, None)
        } else {
            alone(&mut front, &op)
        };
        if front.left == 0 {
            return done;
        }
        let heavy = per_task.is_some_and(|per_task| {
            per_task.saturating_mul(saturating_u32(front.left)) >= crew.hand_off
        });
        if heavy {
            return done + hand_off(crew, front, per_task, &op);
        }
        done + together(crew, front, per_task, &op)
    }
}

/// The tasks not yet claimed: a producer and its length.
struct Front<P> {
    rest: Option<P>,
    left: usize,
}

impl<P: Producer> Front<P> {
    /// Splits off the first `count` items (at least 1, at most what is
    /// left) and returns them with their number, or `None` if nothing is
    /// left.
    fn take(&mut self, count: usize) -> Option<(P, usize)> {
        let rest = self.rest.take()?;
        let count = count.clamp(1, self.left.max(1));
        if count >= self.left {
            let all = self.left;
            self.left = 0;
            return Some((rest, all));
        }
        let (piece, rest) = rest.split_at(count);
        self.rest = Some(rest);
        self.left -= count;
        Some((piece, count))
    }
}

/// Runs every item of `piece` (of `count` items) and returns `count`: the
/// per-task loop, Rayon's own sequential iterator.
#[inline]
fn run<P: Producer>(piece: P, count: usize, op: &impl Fn(P::Item)) -> usize {
    piece.into_iter().for_each(op);
    count
}

/// The caller alone, until the batch is done or the work left is worth
/// helpers; returns the tasks done and the time per task measured.
fn alone<P: Producer>(front: &mut Front<P>, op: &impl Fn(P::Item)) -> (usize, Option<Duration>) {
    let started = Instant::now();
    let mut done = 0_usize;
    let mut run_len = 1_usize;
    let mut run_started = started;
    while let Some((piece, count)) = front.take(run_len) {
        done += run(piece, count, op);
        if front.left == 0 {
            break;
        }
        let now = Instant::now();
        if let Some(per_task) =
            helpers_worth_it(now.saturating_duration_since(started), done, front.left)
        {
            return (done, Some(per_task));
        }
        if now.saturating_duration_since(run_started) < PROBE_TIME {
            run_len = run_len.saturating_mul(2).min(MAX_SOLO_RUN);
        }
        run_started = now;
    }
    (done, None)
}

/// Whether helpers are worth calling after the caller alone ran `done`
/// tasks in `elapsed`, with `left` still to run: the time per task
/// measured, if the work left at that rate exceeds [`HELP_WORTH`].
///
/// Nothing is decided before the caller has run for [`PROBE_TIME`]: the
/// first runs are a task or two, and their time is mostly the clock reads
/// and the first touch of the results. Measured that early, a cheap task
/// looks many times more expensive than it is, so a short batch of cheap
/// tasks would be estimated as long, call a helper and then wait for the
/// helper's wake-up, which can take longer than the whole batch.
fn helpers_worth_it(elapsed: Duration, done: usize, left: usize) -> Option<Duration> {
    if elapsed < PROBE_TIME || done == 0 {
        return None;
    }
    let per_task = elapsed / saturating_u32(done);
    (per_task.saturating_mul(saturating_u32(left)) > HELP_WORTH).then_some(per_task)
}

/// `n` as a divisor or factor of a duration.
fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The caller and its helpers claim runs from `front` until it is empty;
/// returns the tasks they ran.
fn together<P: Producer>(
    crew: &Crew<'_>,
    front: Front<P>,
    per_task: Option<Duration>,
    op: &(impl Fn(P::Item) + Sync),
) -> usize {
    let participants = crew.helpers.min(front.left.saturating_sub(1)) + 1;
    let claims = Claims::new(front, participants, per_task);
    let ran = AtomicUsize::new(0);
    // The caller claims first, before any helper exists, so it always runs
    // part of its batch: otherwise helpers that start at once could claim
    // a short batch whole while the caller yields.
    let first = claims.claim();
    let help = || {
        ran.fetch_add(claims.run_all(None, op), Ordering::Relaxed);
    };
    let helpers = Helpers::spawn(crew.pool, participants - 1, &help);
    // A woken thread is often queued on its waker's core, where the busy
    // caller would hold it off for a time slice or until the load balancer
    // moves it, and the helper would start late by up to a time slice.
    // Yielding once lets it run and the idle core take one of the two.
    thread::yield_now();
    ran.fetch_add(claims.run_all(first, op), Ordering::Relaxed);
    helpers.join(Some(crew.spin));
    ran.load(Ordering::Relaxed)
}

/// Hands the tasks left in `front` to one job per worker and waits for
/// them, parked; returns the tasks they ran.
fn hand_off<P: Producer>(
    crew: &Crew<'_>,
    front: Front<P>,
    per_task: Option<Duration>,
    op: &(impl Fn(P::Item) + Sync),
) -> usize {
    let jobs = (crew.helpers + 1).min(front.left);
    let claims = Claims::new(front, jobs, per_task);
    let ran = AtomicUsize::new(0);
    let help = || {
        ran.fetch_add(claims.run_all(None, op), Ordering::Relaxed);
    };
    Helpers::spawn(crew.pool, jobs, &help).join(None);
    ran.load(Ordering::Relaxed)
}

/// The claim state shared by the caller and its helpers.
struct Claims<P> {
    front: Mutex<Front<P>>,
    participants: usize,
    max_claim: usize,
}

impl<P: Producer> Claims<P> {
    /// Claims over `front` for `participants`, each claim at most about
    /// [`CLAIM_TIME`] of work at `per_task` (unbounded without an
    /// estimate).
    fn new(front: Front<P>, participants: usize, per_task: Option<Duration>) -> Self {
        let max_claim = per_task
            .and_then(|per_task| {
                let nanos = per_task.as_nanos().max(1);
                usize::try_from(CLAIM_TIME.as_nanos() / nanos).ok()
            })
            .unwrap_or(usize::MAX)
            .max(1);
        Self {
            front: Mutex::new(front),
            participants,
            max_claim,
        }
    }

    /// Runs `first` (if any), then claims and runs runs of tasks until all
    /// are claimed; returns how many this participant ran.
    fn run_all(&self, first: Option<(P, usize)>, op: &impl Fn(P::Item)) -> usize {
        let mut mine = 0;
        let mut next = first.or_else(|| self.claim());
        while let Some((piece, count)) = next {
            mine += run(piece, count, op);
            next = self.claim();
        }
        mine
    }

    /// The next run of tasks and its length, or `None` when all are
    /// claimed.
    fn claim(&self) -> Option<(P, usize)> {
        // A panic never happens under this lock (it only splits
        // producers), so a poisoned lock still holds a consistent state.
        let mut front = self.front.lock().unwrap_or_else(PoisonError::into_inner);
        let count = (front.left / (CLAIM_DIVISOR * self.participants)).min(self.max_claim);
        front.take(count)
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;
    use std::sync::atomic::AtomicU8;
    use std::thread::{self, ThreadId};

    use rayon::prelude::*;

    use dinah_core::DomainId;

    use super::*;
    use crate::domain::tests::pool;
    use crate::domain::wait::Pace;
    use crate::{Domain, DomainConfig};

    /// Lengths that cover no task, the eager path and both phases.
    const LENGTHS: [usize; 7] = [0, 1, 2, 7, 33, 100, if cfg!(miri) { 300 } else { 5_000 }];

    #[test]
    fn every_item_is_visited_exactly_once() {
        let spin = AdaptiveSpin::new(Duration::from_micros(20), Pace::Pure);
        for (threads, hand_off) in [1, 2, 3]
            .into_iter()
            .flat_map(|threads| [Duration::MAX, Duration::ZERO].map(|hand_off| (threads, hand_off)))
        {
            let pool = pool(threads);
            for helpers in 0..threads {
                let crew = Crew {
                    pool: &pool,
                    helpers,
                    spin: &spin,
                    hand_off,
                };
                for len in LENGTHS {
                    let visits: Vec<AtomicU8> = (0..len).map(|_| AtomicU8::new(0)).collect();
                    let ran = drive(&crew, (0..len).into_par_iter(), |index| {
                        visits[index].fetch_add(1, Ordering::Relaxed);
                    });
                    assert_eq!(ran, len, "{helpers} helpers, {len} items, {hand_off:?}");
                    assert!(
                        visits.iter().all(|v| v.load(Ordering::Relaxed) == 1),
                        "{helpers} helpers, {len} items, {hand_off:?}: an item ran twice or never"
                    );
                }
            }
        }
    }

    #[test]
    fn a_handed_off_batch_runs_on_one_job_per_worker_after_the_caller() {
        // Tasks slow enough that the caller's first run decides at once,
        // and a crew that hands off whatever helpers are called for.
        let spin = AdaptiveSpin::new(Duration::from_micros(20), Pace::Pure);
        // More than the eager path's tasks per worker, so the caller runs
        // alone first.
        let tasks = 30;
        for threads in [1, 2, 3] {
            let pool = pool(threads);
            let crew = Crew {
                pool: &pool,
                helpers: threads - 1,
                spin: &spin,
                hand_off: Duration::ZERO,
            };
            let caller = thread::current().id();
            let active = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let order: Mutex<Vec<(usize, ThreadId)>> = Mutex::new(Vec::new());
            let ran = drive(&crew, (0..tasks).into_par_iter(), |index| {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                order
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((index, thread::current().id()));
                thread::sleep(Duration::from_micros(100));
                active.fetch_sub(1, Ordering::SeqCst);
            });
            assert_eq!(ran, tasks);
            let most = most.load(Ordering::SeqCst);
            assert!(most <= threads, "{most} tasks at once on {threads} workers");
            let order = order.into_inner().unwrap_or_else(PoisonError::into_inner);
            let mut indices: Vec<usize> = order.iter().map(|&(index, _)| index).collect();
            indices.sort_unstable();
            assert_eq!(indices, (0..tasks).collect::<Vec<_>>(), "each task once");
            // The caller ran the first task alone; with helpers allowed,
            // everything after the hand-off ran on the pool.
            assert_eq!(order[0], (0, caller));
            if threads > 1 {
                assert!(
                    order[1..].iter().all(|&(_, id)| id != caller),
                    "the caller kept working after it handed off"
                );
            }
        }
    }

    #[test]
    fn helpers_are_called_only_on_evidence_of_enough_work() {
        let us = Duration::from_micros;
        // One cheap task read through the clock: too little evidence,
        // however many tasks are left.
        assert_eq!(helpers_worth_it(Duration::from_nanos(100), 1, 9_999), None);
        assert_eq!(helpers_worth_it(us(4), 1_000, 1_000_000), None);
        // A long run of cheap tasks: the work left is under HELP_WORTH.
        assert_eq!(helpers_worth_it(us(6), 2_000, 8_000), None);
        // A heavy first task: called at once, with its time as the rate.
        assert_eq!(helpers_worth_it(us(140), 1, 255), Some(us(140)));
        // Cheap tasks but many of them left.
        assert_eq!(
            helpers_worth_it(us(6), 2_000, 1_000_000),
            Some(Duration::from_nanos(3))
        );
        // Little left after heavy tasks.
        assert_eq!(helpers_worth_it(us(100), 10, 4), None);
        assert_eq!(helpers_worth_it(us(100), 0, 4), None);
    }

    #[test]
    fn claims_split_the_front_in_order_and_shrink_to_single_items() {
        let mut next = 0;
        let mut sizes = Vec::new();
        /// Claims every item of a range's producer, checking the order.
        struct Collect<'a> {
            claims_sizes: &'a mut Vec<usize>,
            next: &'a mut usize,
        }
        impl ProducerCallback<usize> for Collect<'_> {
            type Output = ();
            fn callback<P: Producer<Item = usize>>(self, producer: P) {
                let claims = Claims {
                    front: Mutex::new(Front {
                        rest: Some(producer),
                        left: 1_000,
                    }),
                    participants: 2,
                    max_claim: 100,
                };
                while let Some((piece, count)) = claims.claim() {
                    let items: Vec<usize> = piece.into_iter().collect();
                    assert_eq!(items.len(), count);
                    for item in items {
                        assert_eq!(item, *self.next, "claims come from the front");
                        *self.next += 1;
                    }
                    self.claims_sizes.push(count);
                }
            }
        }
        (0..1_000_usize).into_par_iter().with_producer(Collect {
            claims_sizes: &mut sizes,
            next: &mut next,
        });
        assert_eq!(next, 1_000);
        assert_eq!(sizes[0], 100, "capped at max_claim");
        assert!(sizes.windows(2).all(|pair| pair[0] >= pair[1]), "{sizes:?}");
        assert_eq!(sizes.last(), Some(&1), "the last claims are single tasks");
    }

    /// Starts a domain of `workers` workers.
    fn domain(workers: usize) -> Domain {
        let workers = NonZeroUsize::new(workers).expect("non-zero");
        Domain::start(
            DomainConfig::new(DomainId::MIN, workers, NonZeroUsize::MIN),
            None,
        )
        .expect("the domain starts")
    }

    #[test]
    fn batches_with_owned_results_return_every_result_in_order() {
        // Owned results, so Miri's leak and double-free checks see every
        // slot written once and dropped once.
        for workers in [1, 2, 3] {
            let domain = domain(workers);
            for len in LENGTHS {
                let tasks: Vec<_> = (0..len)
                    .map(|i| {
                        move || {
                            if i % 5 == 3 {
                                Err(i.to_string())
                            } else {
                                Ok(vec![i])
                            }
                        }
                    })
                    .collect();
                let results = domain.run_batch(tasks).expect("admitted");
                assert_eq!(results.len(), len);
                assert_eq!(results.failed(), (0..len).filter(|i| i % 5 == 3).count());
                for (i, result) in results.into_iter().enumerate() {
                    match result {
                        Ok(value) => assert_eq!(value, vec![i]),
                        Err(failure) => assert_eq!(failure.error(), Some(&i.to_string())),
                    }
                }
            }
        }
    }

    #[test]
    fn the_caller_counts_as_one_of_the_batchs_workers() {
        let tasks_per_batch = if cfg!(miri) { 6 } else { 64 };
        for workers in [1, 2, 3] {
            let domain = domain(workers);
            let caller = thread::current().id();
            let active = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let threads: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());
            let tasks: Vec<_> = (0..tasks_per_batch)
                .map(|_| {
                    || {
                        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        threads
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(thread::current().id());
                        thread::sleep(Duration::from_micros(200));
                        active.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, ()>(())
                    }
                })
                .collect();
            let results = domain.run_batch(tasks).expect("admitted");
            assert_eq!(results.failed(), 0);
            let most = most.load(Ordering::SeqCst);
            assert!(most <= workers, "{most} tasks at once on {workers} workers");
            let threads = threads.into_inner().unwrap_or_else(PoisonError::into_inner);
            assert!(
                threads.contains(&caller),
                "the caller ran none of its batch"
            );
            if workers == 1 {
                assert!(threads.iter().all(|&id| id == caller));
            }
        }
    }
}
