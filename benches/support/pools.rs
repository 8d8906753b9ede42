//! The pools the local benchmarks compare, built the same way everywhere:
//! a Rayon pool and a dinah domain of `workers` threads.

use std::num::NonZeroUsize;

use dinah_core::DomainId;
use dinah_std::{Domain, DomainConfig};

/// A dedicated Rayon pool of `workers` threads.
pub(crate) fn rayon_pool(workers: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("rayon pool")
}

/// A domain of `workers` workers admitting up to 1,024 queued jobs.
pub(crate) fn domain(workers: usize) -> Domain {
    let config = DomainConfig::new(
        DomainId::MIN,
        NonZeroUsize::new(workers).expect("non-zero"),
        NonZeroUsize::new(1024).expect("non-zero"),
    );
    Domain::start(config, None).expect("domain")
}
