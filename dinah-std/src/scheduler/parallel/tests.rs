//! Unit tests of the parallel engine, sized to run under Miri too.

use core::num::NonZeroUsize;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dinah_core::TaskQueue;

use super::{claim_size, run};

/// Queue length large enough for multi-task claims (`claim_size > 1`) and
/// for the caller to start alone (more than 32 tasks per worker).
const LONG: usize = if cfg!(miri) { 70 } else { 3_000 };

/// Queue lengths covering eager helper start (up to 32 tasks per worker)
/// and the caller starting alone.
const LENGTHS: [usize; 3] = [5, 40, LONG];

fn workers(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

/// A result that counts its drops, to prove each one is dropped exactly once.
struct Counted<'a> {
    index: usize,
    drops: &'a AtomicUsize,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

fn panic_message(payload: &(dyn core::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<not a string>")
}

#[test]
fn claims_shrink_to_single_tasks() {
    assert_eq!(claim_size(10_000, 2), 1_024);
    assert_eq!(claim_size(4_000, 2), 500);
    assert_eq!(claim_size(8, 2), 1);
    assert_eq!(claim_size(7, 2), 1);
    assert_eq!(claim_size(1, 64), 1);
    assert_eq!(claim_size(usize::MAX, usize::MAX), 1);
}

#[test]
fn results_follow_queue_order_for_every_worker_count() {
    let cases = [1, 2, 3, 7, 64]
        .into_iter()
        .flat_map(|max_workers| LENGTHS.map(|len| (max_workers, len)));
    for (max_workers, len) in cases {
        let mut queue: TaskQueue<_, LONG> = TaskQueue::new();
        for index in 0..len {
            let task = move || {
                if index % 5 == 0 {
                    Err(index)
                } else {
                    Ok(index * 2)
                }
            };
            assert!(queue.try_push(task).is_ok());
        }
        let results = run(&mut queue, workers(max_workers));
        assert!(queue.is_empty());
        assert_eq!(results.len(), len);
        for (index, result) in results.into_iter().enumerate() {
            let expected = if index % 5 == 0 {
                Err(index)
            } else {
                Ok(index * 2)
            };
            assert_eq!(
                result, expected,
                "task {index} of {len} on {max_workers} workers"
            );
        }
    }
}

#[test]
fn zero_sized_results_and_borrowed_state() {
    let ran = AtomicUsize::new(0);
    let mut queue: TaskQueue<_, LONG> = TaskQueue::new();
    for _ in 0..LONG {
        let ran = &ran;
        let task = move || {
            ran.fetch_add(1, Ordering::Relaxed);
            Ok::<(), ()>(())
        };
        assert!(queue.try_push(task).is_ok());
    }
    let results = run(&mut queue, workers(3));
    assert_eq!(results, vec![Ok(()); LONG]);
    assert_eq!(ran.load(Ordering::Relaxed), LONG);
}

#[test]
fn every_result_is_dropped_once() {
    let drops = AtomicUsize::new(0);
    let mut queue: TaskQueue<_, LONG> = TaskQueue::new();
    for index in 0..LONG {
        let drops = &drops;
        assert!(
            queue
                .try_push(move || Ok::<_, ()>(Counted { index, drops }))
                .is_ok()
        );
    }
    let results = run(&mut queue, workers(2));
    assert!(
        results
            .iter()
            .enumerate()
            .all(|(i, r)| r.as_ref().is_ok_and(|c| c.index == i))
    );
    assert_eq!(drops.load(Ordering::Relaxed), 0);
    drop(results);
    assert_eq!(drops.load(Ordering::Relaxed), LONG);
}

#[test]
fn a_panic_requeues_exactly_the_tasks_that_never_started() {
    for (max_workers, len) in [(2, 40), (3, 40), (2, LONG), (3, LONG)] {
        let drops = AtomicUsize::new(0);
        let started: Vec<AtomicBool> = (0..len).map(|_| AtomicBool::new(false)).collect();
        let mut queue: TaskQueue<_, LONG> = TaskQueue::new();
        for index in 0..len {
            let (drops, started) = (&drops, &started);
            let task = move || {
                started[index].store(true, Ordering::Relaxed);
                assert_ne!(index, 7, "task 7 fails");
                Ok::<_, ()>(Counted { index, drops })
            };
            assert!(queue.try_push(task).is_ok());
        }
        let payload =
            panic::catch_unwind(AssertUnwindSafe(|| run(&mut queue, workers(max_workers))))
                .err()
                .map(|payload| panic_message(&*payload).to_owned());
        assert!(payload.is_some_and(|message| message.contains("task 7 fails")));

        let never_started: Vec<usize> = (0..len)
            .filter(|&index| !started[index].load(Ordering::Relaxed))
            .collect();
        let completed = len - never_started.len() - 1;
        assert!(started[7].load(Ordering::Relaxed));
        assert_eq!(
            drops.load(Ordering::Relaxed),
            completed,
            "completed results are dropped"
        );
        assert_eq!(queue.len(), never_started.len());
        let requeued: Vec<usize> = core::iter::from_fn(|| queue.pop())
            .map(|task| task().map(|counted| counted.index).unwrap_or(usize::MAX))
            .collect();
        assert_eq!(requeued, never_started, "requeued in original order");
    }
}

#[test]
fn concurrent_panics_resume_the_earliest_payload() {
    // Six tasks on two workers: claims take one task each, so tasks 0 and 1
    // start first, meet at the barrier and both panic; each worker stops
    // after its panic, so tasks 2..6 never start.
    let barrier = Barrier::new(2);
    let mut queue: TaskQueue<_, 6> = TaskQueue::new();
    for index in 0..6_usize {
        let barrier = &barrier;
        let task = move || -> Result<usize, ()> {
            barrier.wait();
            panic!("task {index} panicked");
        };
        assert!(queue.try_push(task).is_ok());
    }
    let payload = panic::catch_unwind(AssertUnwindSafe(|| run(&mut queue, workers(2))))
        .err()
        .map(|payload| panic_message(&*payload).to_owned());
    assert_eq!(payload.as_deref(), Some("task 0 panicked"));
    assert_eq!(queue.len(), 4);
}

/// A queue whose first task is slow enough (1 ms, with 99 to go) for the
/// caller to hand the rest over to the parallel phase after it.
fn slow_first_queue<'a>(
    drops: &'a AtomicUsize,
    panic_at: Option<usize>,
) -> TaskQueue<impl FnOnce() -> Result<Counted<'a>, ()> + Send + 'a, 100> {
    let mut queue = TaskQueue::new();
    for index in 0..100 {
        let task = move || {
            if index == 0 {
                std::thread::sleep(core::time::Duration::from_millis(1));
            }
            assert_ne!(Some(index), panic_at, "task {index} fails");
            Ok(Counted { index, drops })
        };
        assert!(queue.try_push(task).is_ok());
    }
    queue
}

#[test]
fn results_stay_in_order_across_the_hand_over() {
    let drops = AtomicUsize::new(0);
    let mut queue = slow_first_queue(&drops, None);
    let results = run(&mut queue, workers(2));
    assert!(queue.is_empty());
    assert_eq!(results.len(), 100);
    assert!(
        results
            .iter()
            .enumerate()
            .all(|(i, r)| r.as_ref().is_ok_and(|c| c.index == i))
    );
    drop(results);
    assert_eq!(drops.load(Ordering::Relaxed), 100);
}

#[test]
fn a_panic_after_the_hand_over_drops_every_result_once() {
    let drops = AtomicUsize::new(0);
    let mut queue = slow_first_queue(&drops, Some(60));
    let payload = panic::catch_unwind(AssertUnwindSafe(|| run(&mut queue, workers(2))))
        .err()
        .map(|payload| panic_message(&*payload).to_owned());
    assert!(payload.is_some_and(|message| message.contains("task 60 fails")));
    // Every task that ran, except the panicking one, produced a result that
    // has been dropped; the others are back in the queue.
    let requeued = queue.len();
    assert_eq!(drops.load(Ordering::Relaxed), 100 - requeued - 1);
    let mut previous = None;
    for task in core::iter::from_fn(|| queue.pop()) {
        let index = task().map(|counted| counted.index).unwrap_or(usize::MAX);
        assert!(
            index > 0 && index != 60 && previous < Some(index),
            "requeued in order"
        );
        previous = Some(index);
    }
}
