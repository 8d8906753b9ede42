//! The engine behind
//! [`Scheduler::run_parallel_bounded`](super::Scheduler::run_parallel_bounded).
//!
//! # Algorithm
//!
//! One call owns the queue (`&mut TaskQueue`) for its whole duration, so it
//! needs no synchronisation with anybody but its own workers:
//!
//! - The output is one `Vec<R>` allocated with room for every queued task
//!   (`len` of them). Its spare capacity, `&mut [MaybeUninit<R>]`, is the
//!   slot array: task `i` writes its result into slot `i`.
//! - A [`Mutex`] guards the *claim state*: the queue itself, the index of
//!   the next unclaimed task and the slots of the unclaimed tasks. A claim
//!   locks it once, pops a run of consecutive tasks into the worker's own
//!   buffer, splits the matching slots off the front of the slot array
//!   (`split_at_mut`, so each slot is reachable from exactly one worker)
//!   and unlocks. Tasks run after the lock is released.
//! - A claim takes at most `remaining / (CLAIM_DIVISOR * workers)` tasks,
//!   clamped to `1..=MAX_CLAIM` (guided self-scheduling: the last
//!   `CLAIM_DIVISOR * workers` tasks are claimed one by one, which evens
//!   out the finish), and at most the worker's own limit, which starts at
//!   one task and adapts so that a claim runs for about `CLAIM_TIME`. Cheap
//!   tasks are thus claimed by the hundred; heavy ones one at a time, so a
//!   worker preempted by the operating system holds back almost nothing.
//!   There is no barrier between claims: whoever is free claims next.
//! - The caller's thread is a worker, and the helpers are scoped threads
//!   ([`thread::scope`]) started only while unclaimed work remains.
//! - A queue of at most `EAGER_TASKS_PER_WORKER` tasks per worker starts
//!   its helpers at once. A longer queue first goes through [`run_alone`]:
//!   the sequential drain (pop, run, push the result; no lock, no slot)
//!   with a clock read after 1, 2, 4, ... up to `MAX_SOLO_RUN` tasks. As
//!   soon as the work left (time so far per task, times tasks left) is
//!   estimated above `SPAWN_WORTH`, the rest of the queue goes to the
//!   parallel phase above, whose slots follow the results already pushed.
//!   A long batch of tiny tasks therefore never pays for starting a thread
//!   and waiting to join it, which can take longer than running the whole
//!   batch on one thread, while a heavy batch loses about one task's time
//!   of parallelism, which the estimate needs.
//!
//! Claiming runs of tasks under one lock keeps the parallel phase's cost
//! per task close to the sequential drain's: the lock is taken once per
//! run, and all each task adds is the copy into the worker's buffer and
//! the slot write. Claiming one task at a time through an atomic index
//! would bounce the counter's cache line between the cores on every task,
//! and a `Mutex` per slot would take a lock per task; either adds many
//! times more per task than the copy and the write do.
//!
//! # Panics
//!
//! While the caller works alone, a panic simply unwinds, as in the
//! sequential drain: nothing else runs, and the tasks behind the panicking
//! one are still queued in order.
//!
//! In the parallel phase every task runs inside [`panic::catch_unwind`]. A
//! panic sets the `stop` flag, and the worker reports the task's index and
//! payload and returns. Workers check `stop` before starting each task; a
//! worker that stops reports the tasks it claimed but never started, and
//! the unwritten part of the run it left (its gap). After the join, the
//! call pushes the unstarted tasks back (in index order), followed by the
//! tasks still in the queue (which come later in FIFO order), drops every
//! claimed slot outside the gaps (the completed results) and resumes the
//! earliest panic.
//!
//! # Memory ordering
//!
//! - `stop` uses `Relaxed` loads and stores. It is a hint ("start no new
//!   task") and publishes no data: a stale read only delays the moment a
//!   worker stops, and every task it starts meanwhile is accounted for
//!   like any other started task.
//! - Results, unstarted tasks, panic payloads, write counts and gaps reach
//!   the caller as the workers' return values, through
//!   [`thread::scope`]'s joins, which make everything a helper did visible
//!   to the caller.
//! - Tasks and slots move between workers only under the claim [`Mutex`],
//!   whose lock and unlock order the hand-over.

use core::mem::{self, MaybeUninit};
use core::num::NonZeroUsize;
use core::ops::Range;
use core::ptr;
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::TaskQueue;

/// A claim takes about `remaining / (CLAIM_DIVISOR * workers)` tasks.
const CLAIM_DIVISOR: usize = 4;

/// The most tasks one claim takes (bounds each worker's task buffer).
const MAX_CLAIM: usize = 1024;

/// A worker aims for claims that run about this long (see [`Call::work`]).
const CLAIM_TIME: Duration = Duration::from_micros(20);

/// Queues of at most this many tasks per worker start every helper at once.
/// Longer queues are first worked on by the caller alone (see
/// [`run_alone`]), which costs a heavy workload about one task's time of
/// parallelism: at most about `1 / EAGER_TASKS_PER_WORKER` of the ideal.
const EAGER_TASKS_PER_WORKER: usize = 32;

/// The caller measures at least this long before judging the work left.
const PROBE_TIME: Duration = Duration::from_micros(5);

/// Helpers start once the work left is estimated to take longer than this
/// on one thread: above the cost of starting a scoped thread and waiting to
/// join it, so the helpers that are started save more time than they cost.
const SPAWN_WORTH: Duration = Duration::from_micros(100);

/// The most tasks the caller runs alone between two clock reads.
const MAX_SOLO_RUN: usize = 256;

/// What a panic carries.
type Payload = Box<dyn Any + Send + 'static>;

/// Runs every task of `queue` on up to `max_workers` workers and returns
/// the results in queue order (see the `Scheduler` documentation for the
/// contract).
pub(super) fn run<F, R, const N: usize>(
    queue: &mut TaskQueue<F, N>,
    max_workers: NonZeroUsize,
) -> Vec<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let len = queue.len();
    let mut results: Vec<R> = Vec::with_capacity(len);
    if len > EAGER_TASKS_PER_WORKER.saturating_mul(max_workers.get()) {
        run_alone(queue, &mut results);
    }
    // Tasks `0..done` ran on the caller's thread alone and their results are
    // in `results`; the rest run in parallel, with slot `i` of the spare
    // capacity holding the result of task `done + i`.
    let (done, rest) = (results.len(), queue.len());
    if rest == 0 {
        return results;
    }
    let call = Call {
        claims: Mutex::new(Claims {
            queue: &mut *queue,
            next: 0,
            unclaimed: &mut results.spare_capacity_mut()[..rest],
        }),
        stop: AtomicBool::new(false),
        workers: max_workers.get().min(rest),
    };
    let reports = call.execute();
    let claimed = call.into_claimed();

    let mut written = 0;
    let mut crashed = false;
    let mut gaps: Vec<Range<usize>> = Vec::new();
    let mut panics: Vec<(usize, Payload)> = Vec::new();
    let mut unstarted: Vec<(usize, Vec<F>)> = Vec::new();
    for report in reports {
        written += report.written;
        crashed |= report.crashed;
        gaps.extend(report.gap);
        panics.extend(report.panic);
        unstarted.extend(report.unstarted);
    }

    let earliest = panics
        .iter()
        .enumerate()
        .min_by_key(|(_, (index, _))| *index)
        .map(|(position, _)| position);
    let Some(earliest) = earliest else {
        // Internal invariant (it protects the `set_len` below): without a
        // panic every task was claimed and every claimed task ran.
        assert!(
            written == rest && claimed == rest && gaps.is_empty(),
            "parallel run lost a result"
        );
        // SAFETY: capacity `len = done + rest` was reserved above and the
        // first `done` elements are initialised (pushed). The slots of the
        // parallel phase are the first `rest` elements of the spare
        // capacity, i.e. elements `done..len`. Claims split `0..claimed`
        // (here all of `0..rest`) into disjoint runs, and a worker leaves a
        // run only after writing every slot of it with `MaybeUninit::write`
        // or after reporting the unwritten rest as a gap; there is no gap,
        // so every slot is initialised. The writes happened on threads
        // joined by `thread::scope`, so they are visible here, and no borrow
        // of the slots outlives `call`.
        unsafe { results.set_len(done + rest) };
        return results;
    };

    requeue_unstarted(queue, unstarted);
    if !crashed {
        // SAFETY: every worker reported normally (no crash), so, as argued
        // at `set_len` above, each claimed slot outside the reported gaps was
        // written, and `results` (length `done`) covers none of them.
        unsafe { drop_written(&mut results.spare_capacity_mut()[..claimed], gaps) };
    }
    let (_, payload) = panics.swap_remove(earliest);
    drop(panics);
    // Unwinding drops `results`: the `done` results of the tasks that ran
    // before the parallel phase.
    panic::resume_unwind(payload)
}

/// Drops the values in `slots` outside `gaps`.
///
/// # Safety
///
/// Every element of `slots` outside the (disjoint, in-bounds) `gaps` must
/// be initialised, and nothing else may read or drop those values
/// afterwards.
unsafe fn drop_written<R>(slots: &mut [MaybeUninit<R>], mut gaps: Vec<Range<usize>>) {
    gaps.sort_unstable_by_key(|gap| gap.start);
    let mut from = 0;
    for gap in gaps
        .into_iter()
        .chain(core::iter::once(slots.len()..slots.len()))
    {
        let written: *mut [MaybeUninit<R>] = &mut slots[from..gap.start];
        // SAFETY: `from..gap.start` lies between two gaps, so by the
        // function's contract it holds initialised values that nobody else
        // drops; each is dropped exactly once, here. `MaybeUninit<R>` has the
        // layout of `R`, so the cast keeps length and alignment.
        unsafe { ptr::drop_in_place(written as *mut [R]) };
        from = gap.end;
    }
}

/// Runs tasks from the front of `queue` on the caller's thread alone,
/// pushing their results, until the queue is empty or the work left is
/// estimated to be worth starting helpers for (see [`SPAWN_WORTH`]).
///
/// This is the sequential drain plus a clock: the caller checks the time
/// after 1 task, then after runs of 2, 4, ... up to [`MAX_SOLO_RUN`]
/// tasks (a run doubles only while it took less than [`PROBE_TIME`]). A
/// heavy first task is thus noticed at once, the clock (slow to read on
/// some virtual machines) is read rarely for tiny tasks, and a heavy task
/// hidden behind cheap ones goes unnoticed for at most one run. A panic
/// unwinds straight through, as in the sequential drain: the tasks behind
/// the panicking one are still queued, in order.
fn run_alone<F, R, const N: usize>(queue: &mut TaskQueue<F, N>, results: &mut Vec<R>)
where
    F: FnOnce() -> R,
{
    let started = Instant::now();
    let mut previous = started;
    let mut run = 1;
    loop {
        for _ in 0..run {
            let Some(task) = queue.pop() else {
                return;
            };
            results.push(task());
        }
        let left = queue.len();
        if left == 0 {
            return;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(started);
        // Work left ≈ elapsed / done * left, compared without division.
        if elapsed >= PROBE_TIME
            && elapsed.as_nanos() * left as u128 >= SPAWN_WORTH.as_nanos() * results.len() as u128
        {
            return;
        }
        if now.duration_since(previous) < PROBE_TIME {
            run = (run * 2).min(MAX_SOLO_RUN);
        }
        previous = now;
    }
}

/// Puts the tasks that never started back into `queue`, in queue order:
/// first the ones workers had claimed (sorted by index), then the ones still
/// queued, which come later.
fn requeue_unstarted<F, const N: usize>(
    queue: &mut TaskQueue<F, N>,
    mut claimed: Vec<(usize, Vec<F>)>,
) {
    claimed.sort_unstable_by_key(|(start, _)| *start);
    let never_claimed: Vec<F> = core::iter::from_fn(|| queue.pop()).collect();
    for task in claimed
        .into_iter()
        .flat_map(|(_, tasks)| tasks)
        .chain(never_claimed)
    {
        // The call removed at least this many tasks and nothing else can
        // have queued anything (it holds `&mut queue`), so this never fails.
        let requeued = queue.try_push(task);
        debug_assert!(requeued.is_ok(), "a task that was queued must fit again");
    }
}

/// The state one `run` shares with its workers.
struct Call<'q, 'o, F, R, const N: usize> {
    claims: Mutex<Claims<'q, 'o, F, R, N>>,
    /// Set when a task panics: start no new task.
    stop: AtomicBool,
    /// The number of workers the claims are sized for (at least 1).
    workers: usize,
}

/// The claim state, guarded by [`Call::claims`].
struct Claims<'q, 'o, F, R, const N: usize> {
    queue: &'q mut TaskQueue<F, N>,
    /// The index of the next task to claim, counted from the first task of
    /// the parallel phase (as are all indices below).
    next: usize,
    /// The result slots of the tasks not claimed yet.
    unclaimed: &'o mut [MaybeUninit<R>],
}

/// A run of consecutive tasks claimed by one worker.
struct Claim<'o, R> {
    /// The index of the first task of the run.
    start: usize,
    /// The result slots of the run, one per task.
    slots: &'o mut [MaybeUninit<R>],
}

/// What a worker hands back when it returns.
struct Report<F> {
    /// How many slots this worker wrote.
    written: usize,
    /// The unwritten part of the run the worker left early (after a stop
    /// or a panic), if any: only its last run can be one.
    gap: Option<Range<usize>>,
    /// The index and payload of the task that panicked on this worker.
    panic: Option<(usize, Payload)>,
    /// Claimed tasks the worker did not start: the index of the first, and
    /// the tasks in order.
    unstarted: Option<(usize, Vec<F>)>,
    /// The worker's thread panicked outside a task (a bug): what it wrote
    /// is unknown.
    crashed: bool,
}

impl<F> Report<F> {
    /// The report of a worker that has not run anything yet.
    fn new() -> Self {
        Self {
            written: 0,
            gap: None,
            panic: None,
            unstarted: None,
            crashed: false,
        }
    }

    /// The report of a helper thread that panicked outside a task (which
    /// would be a bug here): its results are leaked rather than guessed at,
    /// its claimed tasks are lost, and the panic is resumed after every
    /// task that did panic.
    fn crashed(payload: Payload) -> Self {
        Self {
            panic: Some((usize::MAX, payload)),
            crashed: true,
            ..Self::new()
        }
    }
}

impl<'q, 'o, F, R, const N: usize> Call<'q, 'o, F, R, N>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    /// Starts the helper threads (while unclaimed tasks remain), works on
    /// the caller's thread, joins the helpers and returns every worker's
    /// report.
    fn execute(&self) -> Vec<Report<F>> {
        thread::scope(|scope| {
            let mut caller = Worker::new();
            let mut helpers = Vec::with_capacity(self.workers - 1);
            while helpers.len() + 1 < self.workers && self.has_unclaimed_tasks() {
                let helper = thread::Builder::new()
                    .name("dinah-scheduler".to_owned())
                    .spawn_scoped(scope, || {
                        let mut helper = Worker::new();
                        self.work(&mut helper);
                        helper.report
                    });
                match helper {
                    Ok(helper) => helpers.push(helper),
                    // The caller's thread alone can finish the work.
                    Err(_) => break,
                }
            }
            self.work(&mut caller);
            let mut reports = Vec::with_capacity(helpers.len() + 1);
            reports.push(caller.report);
            for helper in helpers {
                reports.push(helper.join().unwrap_or_else(Report::crashed));
            }
            reports
        })
    }

    /// Claims and runs tasks until none is left or a task panicked.
    ///
    /// Each worker sizes its own claims: the first takes one task, and the
    /// limit doubles after a claim that ran for less than [`CLAIM_TIME`] and
    /// halves after one that ran for more than four times that (the guided
    /// size caps it either way). Cheap tasks are claimed by the hundred, so
    /// the clock and the lock cost little per task; heavy tasks are claimed
    /// one or two at a time, so a worker that the operating system
    /// preempts holds back almost nothing the others could have run.
    fn work(&self, worker: &mut Worker<F>) {
        let mut limit = 1;
        let mut previous = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let Some(claim) = self.claim(&mut worker.batch, limit) else {
                return;
            };
            self.run(claim, worker);
            let now = Instant::now();
            let took = now.duration_since(previous);
            if took < CLAIM_TIME {
                limit = (limit * 2).min(MAX_CLAIM);
            } else if took > CLAIM_TIME * 4 {
                limit = (limit / 2).max(1);
            }
            previous = now;
        }
    }

    /// Runs a claimed run of tasks (moved into `worker.batch` by the claim)
    /// in order, writing each result to its slot, until the run ends, a task
    /// panics or `stop` is seen; records what happened in `worker.report`.
    fn run(&self, claim: Claim<'o, R>, worker: &mut Worker<F>) {
        let Claim { start, slots } = claim;
        let size = slots.len();
        let report = &mut worker.report;
        let mut tasks = worker.batch.drain(..);
        let mut written = 0;
        let mut panicked = false;
        for slot in slots {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let Some(task) = tasks.next() else {
                break;
            };
            match panic::catch_unwind(AssertUnwindSafe(task)) {
                Ok(result) => {
                    slot.write(result);
                    written += 1;
                }
                Err(payload) => {
                    self.stop.store(true, Ordering::Relaxed);
                    report.panic = Some((start + written, payload));
                    panicked = true;
                    break;
                }
            }
        }
        report.written += written;
        if written < size {
            report.gap = Some(start + written..start + size);
        }
        if tasks.len() > 0 {
            let first = start + written + usize::from(panicked);
            report.unstarted = Some((first, tasks.collect()));
        }
    }

    /// Claims the next run of at most `limit` tasks into `batch` (empty on
    /// entry) and returns their slots, or `None` when every task is claimed.
    fn claim(&self, batch: &mut Vec<F>, limit: usize) -> Option<Claim<'o, R>> {
        let mut claims = self.lock_claims();
        let unclaimed = claims.unclaimed.len();
        if unclaimed == 0 {
            return None;
        }
        let size = claim_size(unclaimed, self.workers).min(limit);
        batch.extend(core::iter::from_fn(|| claims.queue.pop()).take(size));
        // The queue holds exactly the unclaimed tasks (the call owns it), so
        // `batch.len() == size`; the slots follow what was really popped.
        let (slots, rest) = mem::take(&mut claims.unclaimed).split_at_mut(batch.len());
        claims.unclaimed = rest;
        let start = claims.next;
        claims.next += slots.len();
        Some(Claim { start, slots })
    }

    /// Is there a task left to claim (and no panic yet)?
    fn has_unclaimed_tasks(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && !self.lock_claims().unclaimed.is_empty()
    }

    /// How many tasks were claimed (from the start of the parallel phase).
    fn into_claimed(self) -> usize {
        self.claims
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .next
    }

    /// Locks the claim state. Nothing panics while holding the lock (no
    /// user code runs under it), so a poisoned lock is still consistent.
    fn lock_claims(&self) -> MutexGuard<'_, Claims<'q, 'o, F, R, N>> {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One worker's task buffer and report.
struct Worker<F> {
    /// The tasks of the current claim (empty between claims).
    batch: Vec<F>,
    report: Report<F>,
}

impl<F> Worker<F> {
    fn new() -> Self {
        Self {
            batch: Vec::new(),
            report: Report::new(),
        }
    }
}

/// How many tasks one claim takes when `remaining` are unclaimed.
fn claim_size(remaining: usize, workers: usize) -> usize {
    (remaining / CLAIM_DIVISOR.saturating_mul(workers)).clamp(1, MAX_CLAIM)
}

#[cfg(test)]
mod tests;
