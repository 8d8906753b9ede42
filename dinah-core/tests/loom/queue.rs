//! `TaskQueue` shared the way its documentation prescribes: behind a lock,
//! with work taken out under the lock and run after releasing it.
//!
//! `TaskQueue` itself has no atomics; this model checks the dispatch
//! pattern a scheduler builds on it: every job runs exactly once, jobs
//! leave the queue in FIFO order, and a submitter that finds the queue full
//! gets its job back and can retry without losing it.

use ::loom::sync::atomic::{AtomicU32, Ordering};
use ::loom::sync::{Arc, Mutex};
use ::loom::thread;
use dinah_core::TaskQueue;

/// The queue and the order in which jobs left it, under one lock.
struct Shared {
    queue: TaskQueue<u32, 2>,
    dispatched: Vec<u32>,
}

/// Takes the oldest job under the lock, runs it (sets its bit in `ran`)
/// after releasing the lock; `false` when the queue was empty.
fn dispatch_one(shared: &Mutex<Shared>, ran: &AtomicU32) -> bool {
    let job = {
        let mut guard = shared.lock().expect("no panic under the lock");
        let job = guard.queue.pop();
        if let Some(job) = job {
            guard.dispatched.push(job);
        }
        job
    };
    match job {
        Some(job) => {
            let before = ran.fetch_or(1 << job, Ordering::Relaxed);
            assert_eq!(before & (1 << job), 0, "job {job} ran twice");
            true
        }
        None => false,
    }
}

#[test]
fn locked_dispatch_runs_each_job_once_in_fifo_order() {
    ::loom::model(|| {
        let mut queue = TaskQueue::new();
        queue.try_push(0).expect("room");
        queue.try_push(1).expect("room");
        let shared = Arc::new(Mutex::new(Shared {
            queue,
            dispatched: Vec::new(),
        }));
        // One bit per job, set when it runs.
        let ran = Arc::new(AtomicU32::new(0));
        // Two workers drain until they find the queue empty; they never wait.
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (shared, ran) = (Arc::clone(&shared), Arc::clone(&ran));
                thread::spawn(move || while dispatch_one(&shared, &ran) {})
            })
            .collect();
        // The submitter (this thread) retries while the queue is full; a
        // rejected job comes back and is offered again, never lost.
        let mut job = 2;
        loop {
            let result = shared.lock().expect("no panic").queue.try_push(job);
            match result {
                Ok(()) => break,
                Err(error) => {
                    job = error.into_inner();
                    thread::yield_now();
                }
            }
        }
        for worker in workers {
            worker.join().expect("worker panicked");
        }
        // Whatever the workers left, the owner drains itself.
        while dispatch_one(&shared, &ran) {}
        assert_eq!(ran.load(Ordering::Relaxed), 0b111);
        let shared = shared.lock().expect("no panic");
        assert_eq!(shared.dispatched, [0, 1, 2]);
        assert!(shared.queue.is_empty());
    });
}
