//! The task sets the local benchmarks share, and the check of their
//! results. The CPU work is a dependent multiply-add-xorshift chain, so no
//! variant can vectorise or skip it.

use std::hint::black_box;

/// `iterations` steps of the chain from `seed` (about 1.4 ns a step on the
/// reference machine).
pub(crate) fn mix(seed: u64, iterations: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..iterations {
        x = x
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x632B_E59B_D9B4_E019);
        x ^= x >> 29;
    }
    x
}

/// One task: `iterations` of [`mix`] seeded with its index (none: a no-op
/// returning its index).
pub(crate) fn task(index: u64, iterations: u64) -> impl FnOnce() -> Result<u64, ()> + Send {
    move || {
        let seed = black_box(index);
        Ok(if iterations == 0 {
            seed
        } else {
            mix(seed, black_box(iterations))
        })
    }
}

/// The task set: `count` tasks of `iterations` each, as plain closures (no
/// boxing, so no variant pays an allocation per task).
pub(crate) fn tasks(count: usize, iterations: u64) -> Vec<impl FnOnce() -> Result<u64, ()> + Send> {
    (0..count as u64)
        .map(|index| task(index, iterations))
        .collect()
}

/// Checks a run's results: one per task, every task succeeded, and no-op
/// tasks returned their index in order.
pub(crate) fn check<E>(results: &[Result<u64, E>], count: usize, iterations: u64) {
    assert_eq!(results.len(), count);
    if iterations == 0 {
        for (index, result) in results.iter().enumerate() {
            assert!(matches!(result, Ok(value) if *value == index as u64));
        }
    } else {
        assert!(results.iter().all(Result::is_ok));
    }
}
