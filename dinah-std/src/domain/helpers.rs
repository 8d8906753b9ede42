//! Helper jobs that borrow from the caller's frame, joined before it ends.
//!
//! A batch's helpers run a closure that borrows the batch (its tasks, its
//! result slots, its claim state) from the calling thread's stack. Rayon's
//! `in_place_scope` allows exactly that, but its spawned jobs carry a
//! reference to the scope (and to whatever the closure borrows) as an
//! argument of the function that signals their completion, and that
//! function still runs after the signal has let the caller free the scope.
//! Miri's Tree Borrows model calls that freeing Undefined Behaviour (a
//! protected reference outlived its memory; the pattern of rayon issue
//! #952 and rust-lang/rust#55005), and the miri lane met it in these
//! batches on some thread schedules. Nothing reads the memory after the
//! signal, so no machine misbehaves, but the model is what Miri checks.
//!
//! [`Helpers`] spawns plain `'static` Rayon jobs instead. Each owns a
//! reference count of a small shared [`Rendezvous`] and reaches the
//! borrowed closure only through a raw pointer, turned into a reference
//! inside the job's body, for the duration of the call. A job signals its
//! end by decrementing the rendezvous' count, after which it touches only
//! the memory its own reference count keeps alive. The caller waits for
//! the count to reach zero before the borrowed closure's frame can end:
//! in [`Helpers::join`], or in `Drop` while the caller unwinds.
//!
//! # Memory ordering
//!
//! A helper's decrement of `running` is `Release` and the caller's loads
//! are `Acquire`, so everything a helper did (result slots written, claims
//! made) is visible to the caller once it has seen the count at zero.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, Thread};
use std::time::Duration;

use super::wait::AdaptiveSpin;

/// What a panic carries.
type Payload = Box<dyn Any + Send + 'static>;

/// The closure every helper runs, with its borrow erased (see
/// [`Helpers::spawn`] for why that is sound).
struct Job(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync` (so calling it from any thread through a
// shared reference is allowed), and `Helpers` keeps it alive until every
// job holding this pointer has finished with it.
unsafe impl Send for Job {}

/// What the caller and its helpers share; owned by reference counts, so a
/// helper never needs the caller's frame once it has signalled its end.
struct Rendezvous {
    /// Helpers that have not finished.
    running: AtomicUsize,
    /// The caller, unparked by the last helper to finish.
    caller: Thread,
    /// The first panic of a helper, resumed on the caller.
    panic: Mutex<Option<Payload>>,
}

/// Helper jobs running a closure that borrows for `'a`; joined (waited for)
/// before `'a` can end.
pub(super) struct Helpers<'a> {
    rendezvous: Arc<Rendezvous>,
    borrow: PhantomData<&'a (dyn Fn() + Sync + 'a)>,
}

impl<'a> Helpers<'a> {
    /// Spawns `count` jobs in `pool`, each calling `job` once.
    pub(super) fn spawn(
        pool: &rayon::ThreadPool,
        count: usize,
        job: &'a (dyn Fn() + Sync + 'a),
    ) -> Self {
        let rendezvous = Arc::new(Rendezvous {
            running: AtomicUsize::new(count),
            caller: thread::current(),
            panic: Mutex::new(None),
        });
        let erased: *const (dyn Fn() + Sync + 'a) = job;
        // SAFETY: only the lifetime bound of the trait object changes (the
        // two pointer types have the same layout). The pointer is
        // dereferenced only by the jobs spawned here, each before it
        // decrements `running`, and the returned `Helpers` (which borrows
        // `job` for `'a`) waits for `running` to reach zero before it is
        // gone: in `join`, or in `drop` if the caller unwinds. It is never
        // leaked: it is private to this module's callers in the domain,
        // which join it or let it drop.
        let erased: *const (dyn Fn() + Sync + 'static) = unsafe { std::mem::transmute(erased) };
        for _ in 0..count {
            let job = Job(erased);
            let rendezvous = Arc::clone(&rendezvous);
            pool.spawn(move || {
                let job = job;
                // SAFETY: see above; the pointee outlives this call.
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)() }));
                if let Err(payload) = outcome {
                    let mut first = rendezvous
                        .panic
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    first.get_or_insert(payload);
                }
                // From here on only memory this job's reference count keeps
                // alive is touched.
                let caller = rendezvous.caller.clone();
                if rendezvous.running.fetch_sub(1, Ordering::AcqRel) == 1 {
                    caller.unpark();
                }
            });
        }
        Self {
            rendezvous,
            borrow: PhantomData,
        }
    }

    /// Waits for every helper, spinning on `spin` first if given, and then
    /// parked; resumes the first helper panic, if any, on the caller.
    pub(super) fn join(self, spin: Option<&AdaptiveSpin>) {
        if let Some(spin) = spin {
            spin.spin(Duration::MAX, || self.finished());
        }
        self.park_until_finished();
        let panic = self
            .rendezvous
            .panic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(self);
        if let Some(payload) = panic {
            panic::resume_unwind(payload);
        }
    }

    fn finished(&self) -> bool {
        self.rendezvous.running.load(Ordering::Acquire) == 0
    }

    fn park_until_finished(&self) {
        // `park` may return spuriously, or for an `unpark` meant for an
        // earlier wait of this thread: the count decides.
        while !self.finished() {
            thread::park();
        }
    }
}

impl Drop for Helpers<'_> {
    /// Waits for every helper (a panic of theirs is dropped if the caller
    /// is unwinding with its own).
    fn drop(&mut self) {
        self.park_until_finished();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::domain::tests::pool;

    #[test]
    fn every_helper_runs_once_and_its_writes_are_seen() {
        let pool = pool(2);
        for count in [0, 1, 2, 5] {
            let calls = AtomicUsize::new(0);
            let slots: Vec<Mutex<Option<usize>>> = (0..count).map(|_| Mutex::new(None)).collect();
            let job = || {
                let me = calls.fetch_add(1, Ordering::Relaxed);
                *slots[me].lock().unwrap() = Some(me);
            };
            Helpers::spawn(&pool, count, &job).join(None);
            assert_eq!(calls.load(Ordering::Relaxed), count);
            for (index, slot) in slots.iter().enumerate() {
                assert_eq!(*slot.lock().unwrap(), Some(index));
            }
        }
    }

    #[test]
    fn a_helper_panic_resumes_on_the_caller_after_all_finished() {
        let pool = pool(2);
        let finished = AtomicUsize::new(0);
        let panicked = AtomicBool::new(false);
        let job = || {
            if !panicked.swap(true, Ordering::SeqCst) {
                panic!("helper failed");
            }
            finished.fetch_add(1, Ordering::SeqCst);
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            Helpers::spawn(&pool, 3, &job).join(None);
        }));
        let payload = result.expect_err("the helper's panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"helper failed"));
        assert_eq!(
            finished.load(Ordering::SeqCst),
            2,
            "the others finished first"
        );
    }

    #[test]
    fn a_caller_that_unwinds_still_waits_for_its_helpers() {
        let pool = pool(2);
        let finished = AtomicUsize::new(0);
        let job = || {
            thread::sleep(Duration::from_millis(2));
            finished.fetch_add(1, Ordering::SeqCst);
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            let _helpers = Helpers::spawn(&pool, 2, &job);
            panic!("caller failed");
        }));
        assert!(result.is_err());
        // Dropping the guard while unwinding waited for both helpers.
        assert_eq!(finished.load(Ordering::SeqCst), 2);
    }
}
