//! `Drainers` with an `MpmcQueue` under every interleaving loom explores:
//! once every submitter returned and every drainer it started stopped,
//! every item ran exactly once and no place is left taken.

use ::loom::sync::atomic::{AtomicUsize, Ordering};
use ::loom::sync::{Arc, Mutex};
use ::loom::thread::{self, JoinHandle};
use dinah_core::{ArrayMpmcQueue, Drainers};

struct Pool {
    queue: ArrayMpmcQueue<u32, 2>,
    drainers: Drainers,
    ran: AtomicUsize,
    started: Mutex<Vec<JoinHandle<()>>>,
}

/// A drainer: pops and runs items until the queue is empty, then leaves
/// unless an item arrived meanwhile.
fn drain(pool: &Pool) {
    loop {
        while pool.queue.pop().is_some() {
            pool.ran.fetch_add(1, Ordering::SeqCst);
        }
        if !pool.drainers.leave(|| pool.queue.is_empty()) {
            return;
        }
    }
}

/// A submitter: pushes an item and starts a drainer if told to.
fn submit(pool: &Arc<Pool>, item: u32) {
    pool.queue.try_push(item).expect("room for every item");
    if pool.drainers.enter() {
        let drainer = {
            let pool = Arc::clone(pool);
            thread::spawn(move || drain(&pool))
        };
        pool.started.lock().unwrap().push(drainer);
    }
}

/// Two submitters racing, with at most `max` drainers.
fn two_submitters(max: usize) {
    ::loom::model(move || {
        let pool = Arc::new(Pool {
            queue: ArrayMpmcQueue::new(),
            drainers: Drainers::new(max),
            ran: AtomicUsize::new(0),
            started: Mutex::new(Vec::new()),
        });
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || submit(&pool, 2))
        };
        submit(&pool, 1);
        other.join().expect("submitter panicked");
        let started: Vec<_> = pool.started.lock().unwrap().drain(..).collect();
        assert!(!started.is_empty(), "somebody started a drainer");
        for drainer in started {
            drainer.join().expect("drainer panicked");
        }
        assert_eq!(
            pool.ran.load(Ordering::SeqCst),
            2,
            "an item was left behind"
        );
        assert!(pool.queue.is_empty());
        assert_eq!(pool.drainers.active(), 0);
    });
}

#[test]
fn two_submitters_one_drainer() {
    two_submitters(1);
}

#[test]
fn two_submitters_two_drainers() {
    two_submitters(2);
}
