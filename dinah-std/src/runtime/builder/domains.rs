//! Starting the planned worker domains, each with its completion queue.

use std::num::NonZeroUsize;
use std::sync::Arc;

use dinah_core::DomainId;

use super::RuntimeBuilder;
use crate::domain::{Domain, DomainConfig, DomainStartError};
use crate::runtime::error::BuildError;
use crate::runtime::job_outcome::Completions;

/// The started domains, their completion queues, and how many jobs they
/// can hold at once over all of them.
pub(super) type Started = (
    Vec<(DomainId, Domain)>,
    Vec<(DomainId, Arc<Completions>)>,
    usize,
);

impl RuntimeBuilder {
    /// Starts the planned domains of rank `rank`, each with a completion
    /// queue that wakes the owner through `waker`.
    pub(super) fn start_domains(
        &self,
        domains: Vec<(DomainId, NonZeroUsize)>,
        rank: dinah_core::Rank,
        waker: &std::task::Waker,
    ) -> Result<Started, BuildError> {
        let mut started = Vec::with_capacity(domains.len());
        let mut queues = Vec::with_capacity(domains.len());
        // Every job any domain can hold at once: each will answer once.
        let mut jobs = 0;
        // Workers are numbered across the domains, in declaration order, so
        // no two workers of this runtime share an ID.
        let mut first_worker = Some(dinah_core::WorkerId::MIN);
        for (id, workers) in domains {
            let queue = NonZeroUsize::new(self.limits.max_action_queue as usize)
                .unwrap_or(NonZeroUsize::MIN);
            let first =
                first_worker.ok_or(BuildError::Domain(DomainStartError::WorkerIdOverflow))?;
            let config = DomainConfig::new(id, workers, queue)
                .with_name(format!("dinah-{}-d{}", rank.get(), id.get()))
                .with_first_worker(first);
            first_worker = config
                .last_worker()
                .and_then(|last| dinah_core::WorkerId::new(last.get().checked_add(1)?).ok());
            // A domain holds at most its queue plus one job per worker, so
            // a completion slot reserved at admission always exists.
            let capacity = config
                .capacity()
                .and_then(NonZeroUsize::new)
                .unwrap_or(NonZeroUsize::MIN);
            jobs += capacity.get();
            let completions = Arc::new(Completions::new(capacity));
            completions.register_waker(waker);
            let domain =
                Domain::start(config, self.instrumentation.clone()).map_err(BuildError::Domain)?;
            started.push((id, domain));
            queues.push((id, completions));
        }
        Ok((started, queues, jobs))
    }
}
