//! `Executor` regression coverage (v0.1 point 057): the closure's value and
//! error come back unchanged, the closure runs exactly once, and a panic
//! unwinds into the caller with its original payload.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dinah_std::Executor;

#[test]
fn returns_the_value_of_a_successful_task() {
    let executor = Executor::new();
    assert_eq!(
        executor.execute(|| Ok::<_, ()>(vec![1, 2, 3])),
        Ok(vec![1, 2, 3])
    );
}

#[test]
fn runs_the_task_exactly_once() {
    let calls = AtomicUsize::new(0);
    let result: Result<usize, ()> =
        Executor::new().execute(|| Ok(calls.fetch_add(1, Ordering::Relaxed)));
    assert_eq!(result, Ok(0), "the task saw no earlier call");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "and none happened after it"
    );
}

#[test]
fn preserves_the_identity_of_a_task_error() {
    // The error is the very allocation the task returned, not a copy or a
    // re-wrapped value.
    let original: Arc<str> = Arc::from("disk full");
    let returned = Arc::clone(&original);
    let result: Result<(), Arc<str>> = Executor::default().execute(move || Err(returned));
    let error = result.expect_err("the task failed");
    assert!(Arc::ptr_eq(&error, &original));
    assert_eq!(&*error, "disk full");
}

#[test]
#[should_panic(expected = "executor task failed on purpose")]
fn propagates_a_task_panic() {
    let _: Result<(), ()> = Executor::new().execute(|| panic!("executor task failed on purpose"));
}

#[derive(Debug, PartialEq, Eq)]
struct CustomPayload(u32);

#[test]
fn propagates_the_original_panic_payload() {
    let calls = AtomicUsize::new(0);
    let payload = panic::catch_unwind(AssertUnwindSafe(|| {
        Executor::new().execute(|| -> Result<(), ()> {
            calls.fetch_add(1, Ordering::Relaxed);
            panic::panic_any(CustomPayload(17))
        })
    }))
    .expect_err("the task panicked");
    assert_eq!(
        payload.downcast_ref::<CustomPayload>(),
        Some(&CustomPayload(17))
    );
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "a panicking task is not retried"
    );
}

#[test]
fn runs_on_the_callers_thread() {
    let caller = std::thread::current().id();
    let ran_on = Executor::new().execute(|| Ok::<_, ()>(std::thread::current().id()));
    assert_eq!(ran_on, Ok(caller));
}
