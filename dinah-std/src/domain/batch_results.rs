//! The results of a batch, in task order, cheap to drop when every task
//! succeeded.
//!
//! A result vector of `Result<T, Box<TaskFailure<E>>>` has drop glue for
//! every element, whatever `T` is: dropping 10,000 results walks all of
//! them (and, since workers on other cores wrote them, pulls every line of
//! the vector into the caller's cache), which cost more than running the
//! 10,000 no-op tasks. Here a failure is a [`BatchFailure`], which owns its
//! boxed [`TaskFailure`] through [`ManuallyDrop`] and so has no drop glue
//! of its own; [`BatchResults`] counts the failures and frees them itself,
//! walking the vector only when there are some. With a `T` without drop
//! glue, a batch where every task succeeded is freed in one deallocation.
//!
//! No element can be moved out of a [`BatchResults`] except through its
//! own consuming iterator (there is no mutable access to the slice), so
//! every failure is freed exactly once, and all of it is safe code.

use std::fmt;
use std::iter::FusedIterator;
use std::mem::{self, ManuallyDrop};
use std::ops::Deref;
use std::vec;

use dinah_core::TaskFailure;

/// The result of one task of a batch, as handed out by value: its value,
/// or its boxed failure.
///
/// The failure is boxed because a [`TaskFailure`] keeps a panic message
/// inline (a few hundred bytes); unboxed, a 10,000-task result vector would
/// take megabytes even when every task succeeds.
pub type BatchResult<T, E> = Result<T, Box<TaskFailure<E>>>;

/// The failure of one task of a batch, as seen inside [`BatchResults`]:
/// dereferences to its [`TaskFailure`].
///
/// It can only be read in place; [`BatchResults::into_iter`] and
/// [`BatchResults::into_vec`] hand failures out as
/// `Box<TaskFailure<E>>`.
pub struct BatchFailure<E>(ManuallyDrop<Box<TaskFailure<E>>>);

impl<E> BatchFailure<E> {
    /// Wraps a failure; the owning [`BatchResults`] must count it.
    pub(crate) fn new(failure: Box<TaskFailure<E>>) -> Self {
        Self(ManuallyDrop::new(failure))
    }

    /// The owned failure, which drops normally from here on.
    fn into_box(self) -> Box<TaskFailure<E>> {
        ManuallyDrop::into_inner(self.0)
    }
}

impl<E> Deref for BatchFailure<E> {
    type Target = TaskFailure<E>;

    fn deref(&self) -> &TaskFailure<E> {
        &self.0
    }
}

impl<E: fmt::Debug> fmt::Debug for BatchFailure<E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, formatter)
    }
}

impl<E: fmt::Display> fmt::Display for BatchFailure<E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, formatter)
    }
}

/// The in-place form of a failure back to its owned form.
fn owned<T, E>(result: Result<T, BatchFailure<E>>) -> BatchResult<T, E> {
    result.map_err(BatchFailure::into_box)
}

/// The results of [`Domain::run_batch`](crate::Domain::run_batch) and
/// [`Domain::run_queue`](crate::Domain::run_queue), one per task, in task
/// order.
///
/// Dereferences to a slice of `Result<T, BatchFailure<E>>`, so results are
/// indexed and iterated like a vector's; iterating it by value (or
/// [`into_vec`](Self::into_vec)) hands out [`BatchResult`]s, which own
/// their failures. Dropping it costs one deallocation when no task failed
/// and `T` needs no drop: a failure has no drop glue of its own (this type
/// frees the failures, and walks the results only when there are some).
///
/// # Examples
///
/// ```
/// use std::num::NonZeroUsize;
/// use dinah_core::{DomainId, TaskFailureKind};
/// use dinah_std::{Domain, DomainConfig};
///
/// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN), None)?;
/// let tasks: Vec<_> = [4_u32, 0, 2].iter().map(|&x| move || 8_u32.checked_div(x).ok_or(x)).collect();
/// let results = domain.run_batch(tasks)?;
/// assert_eq!(results.len(), 3);
/// assert_eq!(results.failed(), 1);
/// assert_eq!(results[1].as_ref().unwrap_err().kind(), TaskFailureKind::ReturnedError);
/// let values: Vec<u32> = results.into_iter().filter_map(Result::ok).collect();
/// assert_eq!(values, [2, 4]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BatchResults<T, E> {
    results: Vec<Result<T, BatchFailure<E>>>,
    failed: usize,
}

impl<T, E> BatchResults<T, E> {
    /// Takes over `results`, of which exactly `failed` are failures.
    pub(crate) fn new(results: Vec<Result<T, BatchFailure<E>>>, failed: usize) -> Self {
        debug_assert_eq!(
            results.iter().filter(|result| result.is_err()).count(),
            failed,
            "the failure count must match the results"
        );
        Self { results, failed }
    }

    /// How many tasks failed (returned an error, panicked or were cancelled).
    #[must_use]
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// The results as a vector of owned [`BatchResult`]s, in task order.
    #[must_use]
    pub fn into_vec(self) -> Vec<BatchResult<T, E>> {
        self.into_iter().collect()
    }

    /// Moves the vector out, leaving this empty with nothing to free.
    fn take(&mut self) -> Vec<Result<T, BatchFailure<E>>> {
        self.failed = 0;
        mem::take(&mut self.results)
    }
}

impl<T, E> Drop for BatchResults<T, E> {
    fn drop(&mut self) {
        if self.failed > 0 {
            self.take().into_iter().map(owned).for_each(drop);
        }
    }
}

impl<T, E> Deref for BatchResults<T, E> {
    type Target = [Result<T, BatchFailure<E>>];

    fn deref(&self) -> &Self::Target {
        &self.results
    }
}

impl<T: fmt::Debug, E: fmt::Debug> fmt::Debug for BatchResults<T, E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.results.iter()).finish()
    }
}

impl<'a, T, E> IntoIterator for &'a BatchResults<T, E> {
    type Item = &'a Result<T, BatchFailure<E>>;
    type IntoIter = std::slice::Iter<'a, Result<T, BatchFailure<E>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.results.iter()
    }
}

impl<T, E> IntoIterator for BatchResults<T, E> {
    type Item = BatchResult<T, E>;
    type IntoIter = BatchResultsIntoIter<T, E>;

    fn into_iter(mut self) -> BatchResultsIntoIter<T, E> {
        let failed = self.failed;
        BatchResultsIntoIter {
            results: self.take().into_iter(),
            failed,
        }
    }
}

/// The consuming iterator of [`BatchResults`]: owned results in task order.
/// Results it did not hand out are freed when it is dropped.
pub struct BatchResultsIntoIter<T, E> {
    results: vec::IntoIter<Result<T, BatchFailure<E>>>,
    /// Failures not handed out yet.
    failed: usize,
}

impl<T, E> BatchResultsIntoIter<T, E> {
    fn note(&mut self, result: Result<T, BatchFailure<E>>) -> BatchResult<T, E> {
        if result.is_err() {
            self.failed -= 1;
        }
        owned(result)
    }
}

impl<T, E> Iterator for BatchResultsIntoIter<T, E> {
    type Item = BatchResult<T, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let result = self.results.next()?;
        Some(self.note(result))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.results.size_hint()
    }
}

impl<T, E> DoubleEndedIterator for BatchResultsIntoIter<T, E> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let result = self.results.next_back()?;
        Some(self.note(result))
    }
}

impl<T, E> ExactSizeIterator for BatchResultsIntoIter<T, E> {}

impl<T, E> FusedIterator for BatchResultsIntoIter<T, E> {}

impl<T, E> Drop for BatchResultsIntoIter<T, E> {
    fn drop(&mut self) {
        if self.failed > 0 {
            self.results.by_ref().map(owned).for_each(drop);
        }
    }
}

impl<T: fmt::Debug, E: fmt::Debug> fmt::Debug for BatchResultsIntoIter<T, E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("BatchResultsIntoIter")
            .field("remaining", &self.results.len())
            .field("failed", &self.failed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    /// A batch's results where `failing` tasks failed, each failure holding
    /// a clone of `witness` so the test can count the live ones.
    fn results(count: usize, failing: &[usize], witness: &Rc<()>) -> BatchResults<usize, Rc<()>> {
        let results = (0..count)
            .map(|index| {
                if failing.contains(&index) {
                    Err(BatchFailure::new(Box::new(TaskFailure::returned(
                        Rc::clone(witness),
                    ))))
                } else {
                    Ok(index)
                }
            })
            .collect();
        BatchResults::new(results, failing.len())
    }

    #[test]
    fn dropping_the_results_frees_every_failure() {
        let witness = Rc::new(());
        let batch = results(8, &[1, 5, 7], &witness);
        assert_eq!(Rc::strong_count(&witness), 4);
        assert_eq!(batch.failed(), 3);
        drop(batch);
        assert_eq!(Rc::strong_count(&witness), 1);
    }

    #[test]
    fn results_read_in_place_in_task_order() {
        let witness = Rc::new(());
        let batch = results(4, &[2], &witness);
        assert_eq!(batch.len(), 4);
        assert_eq!(batch[0].as_ref().ok(), Some(&0));
        assert_eq!(batch[3].as_ref().ok(), Some(&3));
        let failure = batch[2].as_ref().unwrap_err();
        assert_eq!(failure.kind(), dinah_core::TaskFailureKind::ReturnedError);
        assert_eq!(
            (&batch).into_iter().filter(|result| result.is_ok()).count(),
            3
        );
        assert!(format!("{batch:?}").starts_with("[Ok(0), Ok(1), Err("));
    }

    #[test]
    fn a_partly_consumed_iterator_frees_the_rest() {
        let witness = Rc::new(());
        let mut iter = results(6, &[0, 3, 4], &witness).into_iter();
        let first = iter.next().expect("six results");
        assert!(first.is_err());
        assert_eq!(iter.next_back().map(|result| result.ok()), Some(Some(5)));
        assert_eq!(iter.len(), 4);
        drop(iter);
        // Only the failure handed out is still alive.
        assert_eq!(Rc::strong_count(&witness), 2);
        drop(first);
        assert_eq!(Rc::strong_count(&witness), 1);
    }

    #[test]
    fn into_vec_hands_out_owned_failures_in_order() {
        let witness = Rc::new(());
        let owned = results(5, &[1, 4], &witness).into_vec();
        assert_eq!(owned.len(), 5);
        let failed: Vec<usize> = owned
            .iter()
            .enumerate()
            .filter_map(|(index, result)| result.is_err().then_some(index))
            .collect();
        assert_eq!(failed, [1, 4]);
        assert_eq!(Rc::strong_count(&witness), 3);
        drop(owned);
        assert_eq!(Rc::strong_count(&witness), 1);
    }

    #[test]
    fn results_without_failures_convert_to_values() {
        let witness = Rc::new(());
        let batch = results(3, &[], &witness);
        assert_eq!(batch.failed(), 0);
        assert_eq!(batch.into_vec().into_iter().flatten().sum::<usize>(), 3);
    }
}
