//! What a worker domain is built from.

use std::num::NonZeroUsize;
use std::time::Duration;

use dinah_core::{DomainId, LimitField, LimitProblem, LimitsError, RuntimeLimits, WorkerId};

/// The default time a waiting caller spins before it parks.
///
/// Waking a parked thread takes far longer than a short spin, so a result
/// that arrives within about one wake-up round trip is cheaper to catch by
/// spinning. Spinning much longer than that costs more CPU than it can
/// save. The default is a little longer than a typical wake-up round trip,
/// and short enough that a waiter whose result is far off does not burn a
/// core for long; the domain also shortens the spin while it keeps failing
/// (see [`DomainConfig::spin_before_park`]).
pub const DEFAULT_SPIN_BEFORE_PARK: Duration = Duration::from_micros(50);

/// The configuration of one worker [`Domain`](crate::Domain).
///
/// A domain runs `workers` threads and admits at most
/// [`capacity`](Self::capacity) `= queue_capacity + workers` jobs at once,
/// counting each job from the moment it is admitted until its outcome has
/// been delivered: `queue_capacity` jobs waiting while every worker is busy
/// with one job. Build one with [`new`](Self::new) or
/// [`from_limits`](Self::from_limits) and adjust it with the `with_*`
/// methods.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroUsize;
/// use dinah_core::{DomainId, RuntimeLimits};
/// use dinah_std::DomainConfig;
///
/// let id = DomainId::new(1)?;
/// let config = DomainConfig::new(id, NonZeroUsize::MIN.saturating_add(1), NonZeroUsize::MIN.saturating_add(63))
///     .with_name("solver");
/// assert_eq!(config.capacity(), Some(66));
///
/// let from_limits = DomainConfig::from_limits(id, &RuntimeLimits::default())?;
/// assert_eq!(from_limits.workers.get(), 2);
/// assert_eq!(from_limits.queue_capacity.get(), 256);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DomainConfig {
    /// The domain's identity, used in thread names, trace events and job
    /// contexts.
    pub id: DomainId,
    /// Worker threads; fixed for the domain's lifetime.
    pub workers: NonZeroUsize,
    /// Jobs that may wait while every worker is busy.
    pub queue_capacity: NonZeroUsize,
    /// The longest a caller waiting for a result (a job handle, a batch)
    /// spins before it parks. The domain shortens the spin while spinning
    /// does not pay off (results keep arriving after it, for example on a
    /// busy machine or for long batches) and probes the full length again
    /// now and then. `Duration::ZERO` always parks at once.
    pub spin_before_park: Duration,
    /// The prefix of the worker thread names (`{name}-{index}`); `None`
    /// names them `dinah-domain-{id}-{index}`.
    pub name: Option<String>,
    /// The [`WorkerId`] of the domain's first worker thread; thread
    /// `index` of the pool is `first_worker + index`. Defaults to
    /// [`WorkerId::MIN`], which suits one domain on its own. Domains that
    /// share an [`Instrumentation`](crate::Instrumentation) should get
    /// ranges that do not overlap, so a trace names each worker once; a
    /// [`Runtime`](crate::Runtime) does that for its domains itself, in the
    /// order they were declared.
    pub first_worker: WorkerId,
}

impl DomainConfig {
    /// A configuration with `workers` threads and room for
    /// `queue_capacity` waiting jobs, spinning
    /// [`DEFAULT_SPIN_BEFORE_PARK`] before parking.
    #[must_use]
    pub fn new(id: DomainId, workers: NonZeroUsize, queue_capacity: NonZeroUsize) -> Self {
        Self {
            id,
            workers,
            queue_capacity,
            spin_before_park: DEFAULT_SPIN_BEFORE_PARK,
            name: None,
            first_worker: WorkerId::MIN,
        }
    }

    /// The configuration of domain `id` under `limits`:
    /// `limits.workers_per_domain` workers and `limits.max_action_queue`
    /// waiting jobs.
    ///
    /// The capacity of such a domain is one domain's share of
    /// [`RuntimeLimits::completion_capacity`], so completion queues sized
    /// from the limits hold every outcome the domains can produce.
    ///
    /// # Errors
    ///
    /// The [`LimitsError`] of [`RuntimeLimits::validate`] if the limits are
    /// invalid; [`LimitProblem::TooLarge`] on
    /// [`LimitField::MaxActionQueue`] if the queue does not fit a `usize`
    /// on this target.
    pub fn from_limits(id: DomainId, limits: &RuntimeLimits) -> Result<Self, LimitsError> {
        limits.validate()?;
        let too_large = LimitsError {
            field: LimitField::MaxActionQueue,
            problem: LimitProblem::TooLarge {
                max: usize::MAX as u64,
            },
        };
        let queue = usize::try_from(limits.max_action_queue).map_err(|_| too_large)?;
        // `validate` rejected zero for both fields.
        let zero = |field| LimitsError {
            field,
            problem: LimitProblem::Zero,
        };
        let workers = NonZeroUsize::new(usize::from(limits.workers_per_domain))
            .ok_or(zero(LimitField::WorkersPerDomain))?;
        let queue_capacity = NonZeroUsize::new(queue).ok_or(zero(LimitField::MaxActionQueue))?;
        Ok(Self::new(id, workers, queue_capacity))
    }

    /// This configuration with worker threads named `{name}-{index}`.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// This configuration with waiting callers spinning for `spin` before
    /// they park (`Duration::ZERO`: park at once).
    #[must_use]
    pub fn with_spin_before_park(mut self, spin: Duration) -> Self {
        self.spin_before_park = spin;
        self
    }

    /// This configuration with its workers numbered from `first` (see
    /// [`first_worker`](Self::first_worker)).
    #[must_use]
    pub fn with_first_worker(mut self, first: WorkerId) -> Self {
        self.first_worker = first;
        self
    }

    /// The [`WorkerId`] of the domain's last worker thread, or `None` if
    /// `first_worker + workers - 1` passes [`WorkerId::MAX`] (such a
    /// domain does not start).
    #[must_use]
    pub fn last_worker(&self) -> Option<WorkerId> {
        super::worker::nth(self.first_worker, self.workers.get() - 1)
    }

    /// The most jobs the domain admits at once, `queue_capacity + workers`,
    /// or `None` if that overflows a `usize`.
    #[must_use]
    pub fn capacity(&self) -> Option<usize> {
        self.queue_capacity.get().checked_add(self.workers.get())
    }

    /// The name of worker thread `index`.
    pub(crate) fn thread_name(&self, index: usize) -> String {
        match &self.name {
            Some(name) => format!("{name}-{index}"),
            None => format!("dinah-domain-{}-{index}", self.id.get()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).unwrap()
    }

    #[test]
    fn capacity_is_queue_plus_workers_and_checked() {
        let id = DomainId::MIN;
        assert_eq!(DomainConfig::new(id, nz(2), nz(8)).capacity(), Some(10));
        assert_eq!(
            DomainConfig::new(id, nz(2), nz(usize::MAX)).capacity(),
            None
        );
    }

    #[test]
    fn from_limits_takes_the_per_domain_bounds() {
        let mut limits = RuntimeLimits::default();
        limits.workers_per_domain = 3;
        limits.max_action_queue = 17;
        let config = DomainConfig::from_limits(DomainId::MIN, &limits).unwrap();
        assert_eq!((config.workers.get(), config.queue_capacity.get()), (3, 17));
        assert_eq!(config.spin_before_park, DEFAULT_SPIN_BEFORE_PARK);
        // One domain's share of the completion capacity.
        let share = limits.completion_capacity().unwrap() / u32::from(limits.max_domains);
        assert_eq!(config.capacity(), Some(share as usize));
    }

    #[test]
    fn from_limits_rejects_invalid_limits() {
        let mut limits = RuntimeLimits::default();
        limits.workers_per_domain = 0;
        assert_eq!(
            DomainConfig::from_limits(DomainId::MIN, &limits),
            Err(LimitsError {
                field: LimitField::WorkersPerDomain,
                problem: LimitProblem::Zero
            })
        );
    }

    #[test]
    fn workers_are_numbered_from_the_first_worker() {
        let config = DomainConfig::new(DomainId::MIN, nz(3), nz(1));
        assert_eq!(config.first_worker, WorkerId::MIN);
        assert_eq!(config.last_worker(), WorkerId::new(3).ok());
        let moved = config.with_first_worker(WorkerId::new(10).unwrap());
        assert_eq!(moved.last_worker(), WorkerId::new(12).ok());
        let too_far = moved.with_first_worker(WorkerId::new(u64::MAX - 1).unwrap());
        assert_eq!(too_far.last_worker(), None);
    }

    #[test]
    fn thread_names_use_the_name_or_the_id() {
        let config = DomainConfig::new(DomainId::new(7).unwrap(), nz(1), nz(1));
        assert_eq!(config.thread_name(0), "dinah-domain-7-0");
        assert_eq!(config.with_name("io").thread_name(3), "io-3");
    }
}
