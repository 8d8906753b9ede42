//! `Shared<T>` coverage (v0.1 point 048): clones see one value, contended
//! increments are never lost, and poisoning is reported explicitly.

use std::sync::Barrier;

use dinah_std::{Shared, SynchronizationError};

#[test]
fn clones_see_the_same_value() -> Result<(), SynchronizationError> {
    let original = Shared::new(vec![1]);
    let clone = original.clone();
    clone.lock()?.push(2);
    assert_eq!(*original.lock()?, [1, 2]);
    assert!(original.ptr_eq(&clone));
    Ok(())
}

#[test]
fn contended_increments_are_never_lost() -> Result<(), SynchronizationError> {
    const THREADS: usize = 8;
    const INCREMENTS: u64 = 2_000;
    let counter = Shared::new(0_u64);
    let start = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (counter, start) = (counter.clone(), &start);
                scope.spawn(move || -> Result<(), SynchronizationError> {
                    start.wait();
                    for _ in 0..INCREMENTS {
                        *counter.lock()? += 1;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            assert_eq!(worker.join().ok(), Some(Ok(())));
        }
    });
    assert_eq!(*counter.lock()?, THREADS as u64 * INCREMENTS);
    assert_eq!(counter.strong_count(), 1, "every clone was released");
    Ok(())
}

#[test]
fn poisoning_is_reported_to_every_clone() {
    let shared = Shared::new(10_u32);
    let clone = shared.clone();
    let panicked = std::thread::spawn(move || {
        let mut guard = clone.lock().expect("not poisoned yet");
        *guard = 11;
        panic!("poisoning the shared value on purpose");
    })
    .join();
    assert!(panicked.is_err());
    assert!(shared.is_poisoned());
    assert_eq!(shared.lock().err(), Some(SynchronizationError::Poisoned));
    assert_eq!(
        shared.try_lock().err(),
        Some(SynchronizationError::Poisoned)
    );
    assert_eq!(
        SynchronizationError::Poisoned.to_string(),
        "shared value is poisoned: a thread panicked while holding its lock"
    );

    // Recovery is the caller's explicit decision, and the half-done update
    // is visible to whoever makes it.
    shared.clear_poison();
    assert_eq!(shared.lock().as_deref().copied(), Ok(11));
}

#[test]
fn try_lock_does_not_block() -> Result<(), SynchronizationError> {
    let shared = Shared::new("free");
    let guard = shared.lock()?;
    let other = shared.clone();
    let busy = std::thread::scope(|scope| {
        scope
            .spawn(move || other.try_lock().map(|guard| guard.is_some()))
            .join()
    });
    assert_eq!(busy.ok(), Some(Ok(false)));
    drop(guard);
    assert_eq!(shared.try_lock()?.as_deref().copied(), Some("free"));
    Ok(())
}

#[test]
fn strong_count_follows_clones_and_the_last_handle_takes_the_value() {
    let shared = Shared::from(String::from("value"));
    let clones: Vec<_> = (0..3).map(|_| shared.clone()).collect();
    assert_eq!(shared.strong_count(), 4);
    drop(clones);
    assert_eq!(shared.strong_count(), 1);
    assert_eq!(shared.into_inner(), Some(Ok(String::from("value"))));
    assert_eq!(Shared::<u8>::default().into_inner(), Some(Ok(0)));
}
