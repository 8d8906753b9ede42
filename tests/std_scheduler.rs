//! `Scheduler` regression coverage (v0.1 points 047, 054 and 056): immediate
//! submission, single dispatch, FIFO draining, empty queues, task errors
//! kept as values, bounded parallel execution with a proof of overlap,
//! panic propagation with the tasks that never started left queued in
//! order, and the typed zero-worker error.
//!
//! No test measures time. Concurrency is forced with rendezvous points; a
//! rendezvous that is never completed fails its test after a generous
//! patience instead of hanging the suite.

use std::num::NonZeroUsize;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use dinah_core::TaskQueue;
use dinah_std::{Scheduler, SchedulerError};

type Task<'a> = Box<dyn FnOnce() -> Result<usize, String> + Send + 'a>;

/// How long a rendezvous waits before declaring that its parties did not
/// run concurrently (a deadlock guard, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(60);

/// A reusable barrier whose `wait` gives up after [`PATIENCE`].
struct Rendezvous {
    parties: usize,
    /// Arrivals in the current generation, and the generation number.
    state: Mutex<(usize, u64)>,
    released: Condvar,
}

impl Rendezvous {
    fn new(parties: usize) -> Self {
        Self {
            parties,
            state: Mutex::new((0, 0)),
            released: Condvar::new(),
        }
    }

    /// Waits until `parties` callers (this one included) have arrived.
    fn wait(&self) -> Result<(), String> {
        let mut state = self.state.lock().map_err(|_| "rendezvous poisoned")?;
        let generation = state.1;
        state.0 += 1;
        if state.0 == self.parties {
            *state = (0, generation + 1);
            self.released.notify_all();
            return Ok(());
        }
        let (state, timeout) = self
            .released
            .wait_timeout_while(state, PATIENCE, |state| state.1 == generation)
            .map_err(|_| "rendezvous poisoned")?;
        if timeout.timed_out() {
            return Err(format!(
                "only {} of {} tasks ran at the same time",
                state.0, self.parties
            ));
        }
        Ok(())
    }
}

fn push_all<'a, const N: usize>(
    queue: &mut TaskQueue<Task<'a>, N>,
    tasks: impl IntoIterator<Item = Task<'a>>,
) {
    for task in tasks {
        assert!(
            queue.try_push(task).is_ok(),
            "the test queue is large enough"
        );
    }
}

/// Deterministic busy work whose amount depends on `index`.
fn work(index: usize) -> usize {
    (0..(index % 7) * 500).fold(index, |acc, step| acc.wrapping_mul(31).wrapping_add(step))
}

fn expected(index: usize) -> Result<usize, String> {
    if index % 4 == 3 {
        Err(format!("task {index} failed"))
    } else {
        Ok(work(index))
    }
}

fn expected_task<'a>(index: usize) -> Task<'a> {
    Box::new(move || {
        let value = work(index);
        if index % 4 == 3 {
            Err(format!("task {index} failed"))
        } else {
            Ok(value)
        }
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[test]
fn schedule_runs_the_task_before_returning() {
    let ran = AtomicBool::new(false);
    let result: Result<&str, ()> = Scheduler::new().schedule(|| {
        ran.store(true, Ordering::Relaxed);
        Ok("done")
    });
    assert!(ran.load(Ordering::Relaxed));
    assert_eq!(result, Ok("done"));
    let failed: Result<(), &str> = Scheduler::default().schedule(|| Err("refused"));
    assert_eq!(failed, Err("refused"));
}

#[test]
fn dispatch_next_runs_only_the_oldest_task() {
    let calls: [AtomicUsize; 3] = Default::default();
    let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..3).map(|index| -> Task<'_> {
            let calls = &calls;
            Box::new(move || {
                calls[index].fetch_add(1, Ordering::Relaxed);
                Ok(index)
            })
        }),
    );
    let scheduler = Scheduler::new();
    let counts = || {
        calls
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    };

    assert_eq!(scheduler.dispatch_next(&mut queue), Some(Ok(0)));
    assert_eq!(counts(), [1, 0, 0]);
    assert_eq!(queue.len(), 2);
    assert_eq!(scheduler.dispatch_next(&mut queue), Some(Ok(1)));
    assert_eq!(scheduler.dispatch_next(&mut queue), Some(Ok(2)));
    assert_eq!(scheduler.dispatch_next(&mut queue), None);
    assert_eq!(counts(), [1, 1, 1]);
}

#[test]
fn run_until_empty_drains_in_fifo_order_and_keeps_errors() {
    let order = Mutex::new(Vec::new());
    let mut queue: TaskQueue<Task<'_>, 16> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..10).map(|index| -> Task<'_> {
            let order = &order;
            Box::new(move || {
                order.lock().map_err(|_| "poisoned")?.push(index);
                expected(index)
            })
        }),
    );
    let results = Scheduler::new().run_until_empty(&mut queue);
    assert_eq!(results, (0..10).map(expected).collect::<Vec<_>>());
    assert!(queue.is_empty());
    drop(queue);
    assert_eq!(
        order.into_inner().ok(),
        Some((0..10).collect()),
        "later tasks still ran, in order"
    );
}

#[test]
fn empty_queues_give_empty_results() {
    let scheduler = Scheduler::new();
    let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    assert_eq!(scheduler.dispatch_next(&mut queue), None);
    assert!(scheduler.run_until_empty(&mut queue).is_empty());
    for workers in [1, 2, 64] {
        assert_eq!(scheduler.run_parallel(&mut queue, workers), Ok(Vec::new()));
    }
    assert!(queue.is_empty());
}

#[test]
fn zero_workers_is_a_typed_error_and_runs_nothing() {
    let ran = AtomicBool::new(false);
    let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    push_all(
        &mut queue,
        [Box::new(|| {
            ran.store(true, Ordering::Relaxed);
            Ok::<usize, String>(0)
        }) as Task<'_>],
    );
    let error = Scheduler::new()
        .run_parallel(&mut queue, 0)
        .expect_err("zero workers");
    assert_eq!(error, SchedulerError::ZeroWorkers);
    assert_eq!(
        error.to_string(),
        "parallel run needs at least one worker, got zero"
    );
    let _: &dyn std::error::Error = &error;
    assert_eq!(queue.len(), 1);
    assert!(!ran.load(Ordering::Relaxed));
}

#[test]
fn parallel_results_follow_fifo_order_for_every_worker_limit() {
    let scheduler = Scheduler::new();
    for workers in [1, 2, 3, 7, 64] {
        let mut queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
        push_all(&mut queue, (0..64).map(expected_task));
        let results = scheduler.run_parallel(&mut queue, workers);
        assert_eq!(
            results,
            Ok((0..64).map(expected).collect()),
            "{workers} workers"
        );
        assert!(queue.is_empty());
    }
}

#[test]
fn one_worker_keeps_fifo_order_on_the_callers_thread() {
    let caller = std::thread::current().id();
    let order = Mutex::new(Vec::new());
    let mut queue: TaskQueue<Task<'_>, 32> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..32).map(|index| -> Task<'_> {
            let (order, caller) = (&order, caller);
            Box::new(move || {
                assert_eq!(std::thread::current().id(), caller);
                order.lock().map_err(|_| "poisoned")?.push(index);
                Ok(index)
            })
        }),
    );
    let results = Scheduler::new().run_parallel_bounded(&mut queue, NonZeroUsize::MIN);
    assert_eq!(results, (0..32).map(Ok).collect::<Vec<_>>());
    drop(queue);
    assert_eq!(order.into_inner().ok(), Some((0..32).collect()));
}

#[test]
fn task_errors_do_not_stop_later_tasks() {
    let ran = AtomicUsize::new(0);
    let mut queue: TaskQueue<Task<'_>, 128> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..128).map(|index| -> Task<'_> {
            let ran = &ran;
            Box::new(move || {
                ran.fetch_add(1, Ordering::Relaxed);
                if index < 64 {
                    Err(format!("early task {index} failed"))
                } else {
                    Ok(index)
                }
            })
        }),
    );
    let results = Scheduler::new()
        .run_parallel(&mut queue, 3)
        .expect("three workers");
    assert_eq!(ran.load(Ordering::Relaxed), 128);
    for (index, result) in results.iter().enumerate() {
        if index < 64 {
            assert_eq!(result, &Err(format!("early task {index} failed")));
        } else {
            assert_eq!(result, &Ok(index));
        }
    }
}

#[test]
fn two_tasks_run_at_the_same_time() {
    // Neither task can pass the rendezvous alone: both returning `Ok`
    // proves they overlapped.
    let rendezvous = Rendezvous::new(2);
    let mut queue: TaskQueue<Task<'_>, 2> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..2).map(|index| -> Task<'_> {
            let rendezvous = &rendezvous;
            Box::new(move || rendezvous.wait().map(|()| index))
        }),
    );
    let results = Scheduler::new().run_parallel(&mut queue, 2);
    assert_eq!(results, Ok(vec![Ok(0), Ok(1)]));
    assert!(queue.is_empty());
}

#[test]
fn all_tasks_overlap_when_they_fit_within_the_limit() {
    for workers in [3, 8] {
        let rendezvous = Rendezvous::new(workers);
        let mut queue: TaskQueue<Task<'_>, 8> = TaskQueue::new();
        push_all(
            &mut queue,
            (0..workers).map(|index| -> Task<'_> {
                let rendezvous = &rendezvous;
                Box::new(move || rendezvous.wait().map(|()| index))
            }),
        );
        let results = Scheduler::new().run_parallel(&mut queue, workers);
        assert_eq!(results, Ok((0..workers).map(Ok).collect()));
    }
}

/// Tracks how many tasks run at once and the highest count seen.
#[derive(Default)]
struct Occupancy {
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Occupancy {
    fn enter(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn exactly_max_workers_tasks_run_at_once() {
    // Groups of three tasks meet at a rendezvous, so three run together;
    // the limit keeps a fourth from ever joining them.
    let occupancy = Occupancy::default();
    let rendezvous = Rendezvous::new(3);
    let mut queue: TaskQueue<Task<'_>, 9> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..9).map(|index| -> Task<'_> {
            let (occupancy, rendezvous) = (&occupancy, &rendezvous);
            Box::new(move || {
                occupancy.enter();
                let met = rendezvous.wait();
                occupancy.leave();
                met.map(|()| index)
            })
        }),
    );
    let results = Scheduler::new().run_parallel(&mut queue, 3);
    assert_eq!(results, Ok((0..9).map(Ok).collect()));
    assert_eq!(occupancy.peak.load(Ordering::SeqCst), 3);
}

#[test]
fn never_more_than_max_workers_tasks_run_at_once() {
    for workers in [2, 5] {
        let occupancy = Occupancy::default();
        let mut queue: TaskQueue<Task<'_>, 400> = TaskQueue::new();
        push_all(
            &mut queue,
            (0..400).map(|index| -> Task<'_> {
                let occupancy = &occupancy;
                Box::new(move || {
                    occupancy.enter();
                    let value = work(index);
                    std::thread::yield_now();
                    occupancy.leave();
                    Ok(value)
                })
            }),
        );
        let results = Scheduler::new()
            .run_parallel(&mut queue, workers)
            .expect("workers");
        assert_eq!(
            results,
            (0..400).map(|index| Ok(work(index))).collect::<Vec<_>>()
        );
        let peak = occupancy.peak.load(Ordering::SeqCst);
        assert!(
            (1..=workers).contains(&peak),
            "{peak} tasks ran at once with a limit of {workers}"
        );
    }
}

#[test]
fn a_panic_leaves_exactly_the_unstarted_tasks_queued_in_order() {
    // Tasks 0 and 1 are claimed first (one task per claim at this queue
    // length). Neither can finish before the other has started, because
    // they meet at a rendezvous; then both panic, and each worker stops
    // after its panic, so tasks 2..8 never start. The payload of the
    // earlier task is resumed.
    let rendezvous = Rendezvous::new(2);
    let started: [AtomicBool; 8] = Default::default();
    let mut queue: TaskQueue<Task<'_>, 8> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..8).map(|index| -> Task<'_> {
            let (rendezvous, started) = (&rendezvous, &started);
            Box::new(move || {
                started[index].store(true, Ordering::SeqCst);
                if index < 2 {
                    rendezvous.wait()?;
                    panic!("task {index} failed on purpose");
                }
                Ok(index)
            })
        }),
    );
    let payload = panic::catch_unwind(AssertUnwindSafe(|| {
        Scheduler::new().run_parallel(&mut queue, 2)
    }))
    .expect_err("a task panicked");
    assert_eq!(panic_message(&*payload), "task 0 failed on purpose");
    let started_now: Vec<bool> = started
        .iter()
        .map(|flag| flag.load(Ordering::SeqCst))
        .collect();
    assert_eq!(
        started_now,
        [true, true, false, false, false, false, false, false]
    );

    // The queue holds tasks 2..8, in their original order.
    let requeued = Scheduler::new().run_until_empty(&mut queue);
    assert_eq!(requeued, (2..8).map(Ok).collect::<Vec<_>>());
}

#[test]
fn a_panic_requeues_unstarted_tasks_and_finishes_running_ones() {
    for workers in [1, 2, 3] {
        let started: [AtomicBool; 64] = std::array::from_fn(|_| AtomicBool::new(false));
        let finished: [AtomicBool; 64] = std::array::from_fn(|_| AtomicBool::new(false));
        let mut queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
        push_all(
            &mut queue,
            (0..64).map(|index| -> Task<'_> {
                let (started, finished) = (&started, &finished);
                Box::new(move || {
                    started[index].store(true, Ordering::SeqCst);
                    let value = work(index);
                    assert_ne!(index, 20, "task 20 failed on purpose");
                    finished[index].store(true, Ordering::SeqCst);
                    Ok(value)
                })
            }),
        );
        let payload = panic::catch_unwind(AssertUnwindSafe(|| {
            Scheduler::new().run_parallel(&mut queue, workers)
        }))
        .expect_err("task 20 panicked");
        assert!(panic_message(&*payload).contains("task 20 failed on purpose"));

        let load = |flags: &[AtomicBool; 64], index: usize| flags[index].load(Ordering::SeqCst);
        let never_started: Vec<usize> = (0..64).filter(|&index| !load(&started, index)).collect();
        for index in (0..64).filter(|&index| index != 20 && load(&started, index)) {
            assert!(
                load(&finished, index),
                "task {index} started, so it finished"
            );
        }
        if workers == 1 {
            assert_eq!(never_started, (21..64).collect::<Vec<_>>());
        }

        // Exactly the tasks that never started are queued, in queue order.
        let requeued = Scheduler::new().run_until_empty(&mut queue);
        assert_eq!(
            requeued,
            never_started
                .iter()
                .map(|&index| Ok(work(index)))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn tasks_may_borrow_and_nest() {
    // A task may itself drain another queue in parallel: the scheduler holds
    // no lock that the nested call could wait on.
    let total = AtomicUsize::new(0);
    let mut outer: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    push_all(
        &mut outer,
        (0..4).map(|index| -> Task<'_> {
            let total = &total;
            Box::new(move || {
                let mut inner: TaskQueue<Task<'_>, 8> = TaskQueue::new();
                push_all(
                    &mut inner,
                    (0..8).map(|step| -> Task<'_> {
                        Box::new(move || {
                            total.fetch_add(1, Ordering::Relaxed);
                            Ok(index * 8 + step)
                        })
                    }),
                );
                let inner = Scheduler::new()
                    .run_parallel(&mut inner, 2)
                    .map_err(|error| error.to_string())?;
                Ok(inner.into_iter().filter_map(Result::ok).sum())
            })
        }),
    );
    let results = Scheduler::new().run_parallel(&mut outer, 4);
    let expected: Vec<Result<usize, String>> = (0..4)
        .map(|index| Ok((0..8).map(|step| index * 8 + step).sum()))
        .collect();
    assert_eq!(results, Ok(expected));
    assert_eq!(total.load(Ordering::Relaxed), 32);
}

#[test]
fn a_scheduler_is_reusable_after_a_panic() {
    let scheduler = Scheduler::new();
    let rendezvous = Rendezvous::new(2);
    let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..2).map(|index| -> Task<'_> {
            let rendezvous = &rendezvous;
            Box::new(move || {
                rendezvous.wait()?;
                panic!("task {index} of the first call fails");
            })
        }),
    );
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| scheduler.run_parallel(&mut queue, 2)));
    assert!(outcome.is_err());
    assert!(queue.is_empty(), "both tasks started");

    push_all(&mut queue, (0..4).map(expected_task));
    assert_eq!(
        scheduler.run_parallel(&mut queue, 2),
        Ok((0..4).map(expected).collect())
    );
}

#[test]
fn a_long_queue_of_heavy_tasks_starts_its_helpers() {
    // 200 tasks is more than 32 per worker, so the caller starts alone and
    // times the first task: 2 ms, with 199 to go, is worth a helper. Every
    // later task waits until a second thread has run a task, so all of them
    // return `Ok` only if the helper really started.
    let threads = Mutex::new(Vec::new());
    let record = |threads: &Mutex<Vec<std::thread::ThreadId>>| -> Result<usize, String> {
        let mut threads = threads.lock().map_err(|_| "poisoned")?;
        let current = std::thread::current().id();
        if !threads.contains(&current) {
            threads.push(current);
        }
        Ok(threads.len())
    };
    let mut queue: TaskQueue<Task<'_>, 200> = TaskQueue::new();
    push_all(
        &mut queue,
        (0..200).map(|index| -> Task<'_> {
            let (threads, record) = (&threads, &record);
            Box::new(move || {
                if index == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                    return record(threads).map(|_| index);
                }
                let deadline = std::time::Instant::now() + PATIENCE;
                while record(threads)? < 2 {
                    if std::time::Instant::now() > deadline {
                        return Err(format!("task {index}: no helper thread ever ran a task"));
                    }
                    std::thread::yield_now();
                }
                Ok(index)
            })
        }),
    );
    let results = Scheduler::new().run_parallel(&mut queue, 2);
    assert_eq!(results, Ok((0..200).map(Ok).collect()));
    drop(queue);
    assert_eq!(
        threads.into_inner().map(|threads| threads.len()).ok(),
        Some(2)
    );
}
