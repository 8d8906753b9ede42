//! `AdmissionCounter` under every interleaving loom explores: admissions
//! beyond the capacity wait for a release and see what the released work
//! did; a close never lets work slip past a shutdown that found the counter
//! idle; and a shutdown asleep until the counter is idle is always woken.

use ::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use ::loom::sync::{Arc, Condvar, Mutex};
use ::loom::thread;
use dinah_core::{AdmissionCounter, AdmissionState, AdmitError};

/// Asks for an admission a few times, yielding to loom's scheduler
/// between refusals (an unbounded spin would exhaust loom's branch budget).
fn admit(counter: &AdmissionCounter) -> bool {
    for _ in 0..3 {
        match counter.try_admit() {
            Ok(()) => return true,
            Err(AdmitError::Full { .. }) => thread::yield_now(),
            Err(AdmitError::Closed) => panic!("nobody closes this counter"),
        }
    }
    false
}

/// One unit of work under a capacity of one: a read and a write of
/// `data` that are not atomic together. If two units could overlap, or a
/// unit could start without seeing the one before it, an update would be
/// lost.
fn work(counter: &AdmissionCounter, data: &AtomicUsize) {
    let before = data.load(Ordering::Relaxed);
    data.store(before + 1, Ordering::Relaxed);
    assert!(
        !counter.release(),
        "an open counter never asks for a wake-up"
    );
}

/// Capacity one, the slot held by the main thread when two more threads
/// start asking. One of them may be admitted on the released count the
/// other read and published, so this also checks that publication's
/// ordering. Every unit that got in added one, none lost.
#[test]
fn admissions_past_the_capacity_wait_for_and_see_a_release() {
    ::loom::model(|| {
        let counter = Arc::new(AdmissionCounter::new(1));
        let data = Arc::new(AtomicUsize::new(0));
        counter.try_admit().expect("the first admission");
        let others: Vec<_> = (0..2)
            .map(|_| {
                let counter = Arc::clone(&counter);
                let data = Arc::clone(&data);
                thread::spawn(move || {
                    let admitted = admit(&counter);
                    if admitted {
                        work(&counter, &data);
                    }
                    admitted
                })
            })
            .collect();
        work(&counter, &data);
        let mut units = 1;
        for other in others {
            units += usize::from(other.join().expect("worker panicked"));
        }
        assert_eq!(data.load(Ordering::Relaxed), units, "an update was lost");
        assert!(counter.is_idle());
        assert_eq!(counter.in_flight(), 0);
    });
}

/// A shutdown closes the counter while a job is in flight and another
/// thread tries to get in. Once the shutdown finds the counter idle, the
/// job's effect is visible, and the latecomer either was refused or had
/// finished and its effect is visible too.
#[test]
fn nothing_slips_past_a_shutdown_that_found_the_counter_idle() {
    ::loom::model(|| {
        let counter = Arc::new(AdmissionCounter::new(2));
        let job_done = Arc::new(AtomicBool::new(false));
        let late_done = Arc::new(AtomicBool::new(false));
        counter.try_admit().expect("the job's admission");
        let shutdown = {
            let counter = Arc::clone(&counter);
            let job_done = Arc::clone(&job_done);
            let late_done = Arc::clone(&late_done);
            thread::spawn(move || {
                counter.close(AdmissionState::Draining);
                while !counter.is_idle() {
                    thread::yield_now();
                }
                assert!(
                    job_done.load(Ordering::Relaxed),
                    "idle before the job ended"
                );
                late_done.load(Ordering::Relaxed)
            })
        };
        let late = {
            let counter = Arc::clone(&counter);
            let late_done = Arc::clone(&late_done);
            thread::spawn(move || match counter.try_admit() {
                Ok(()) => {
                    late_done.store(true, Ordering::Relaxed);
                    let _ = counter.release();
                    true
                }
                Err(AdmitError::Closed) => false,
                Err(AdmitError::Full { .. }) => panic!("room for two"),
            })
        };
        job_done.store(true, Ordering::Relaxed);
        let _ = counter.release();
        let late_admitted = late.join().expect("latecomer panicked");
        let late_seen = shutdown.join().expect("shutdown panicked");
        if late_admitted {
            assert!(late_seen, "admitted work slipped past the shutdown");
        }
        assert_eq!(counter.try_admit(), Err(AdmitError::Closed));
    });
}

/// The waiting of `dinah-std`'s domains: a shutdown sleeps on a condition
/// variable until the counter is idle, and the release that returned
/// `true` notifies under the same lock.
struct Waiting {
    counter: AdmissionCounter,
    lock: Mutex<()>,
    idle: Condvar,
}

impl Waiting {
    fn wake(&self) {
        let _guard = self.lock.lock().unwrap();
        self.idle.notify_all();
    }

    fn release(&self) {
        if self.counter.release() {
            self.wake();
        }
    }

    fn try_admit(&self) -> bool {
        match self.counter.try_admit() {
            Ok(()) => true,
            Err(AdmitError::Closed) => false,
            Err(AdmitError::Full { .. }) => panic!("room for two"),
        }
    }

    fn wait_idle(&self) {
        let mut guard = self.lock.lock().unwrap();
        while !self.counter.is_idle() {
            guard = self.idle.wait(guard).unwrap();
        }
    }
}

/// A job ends while a latecomer's admission races the close: loom reports
/// a deadlock if the sleeping shutdown is never woken.
#[test]
fn a_sleeping_shutdown_is_always_woken() {
    ::loom::model(|| {
        let waiting = Arc::new(Waiting {
            counter: AdmissionCounter::new(2),
            lock: Mutex::new(()),
            idle: Condvar::new(),
        });
        assert!(waiting.try_admit(), "the job's admission");
        let shutdown = {
            let waiting = Arc::clone(&waiting);
            thread::spawn(move || {
                waiting.counter.close(AdmissionState::Draining);
                waiting.wait_idle();
            })
        };
        let late = {
            let waiting = Arc::clone(&waiting);
            thread::spawn(move || {
                if waiting.try_admit() {
                    waiting.release();
                }
            })
        };
        waiting.release();
        late.join().expect("latecomer panicked");
        shutdown.join().expect("shutdown panicked");
        assert!(waiting.counter.is_idle());
    });
}
