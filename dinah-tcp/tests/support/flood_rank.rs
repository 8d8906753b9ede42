//! One rank of a flood test: sets up over TCP while strangers connect,
//! sums, meets the others and shuts down, and says what its listener
//! refused. Shared by `dinah-tcp/tests/flood.rs` and
//! `dinah-launch/tests/flood.rs` (the same run under `dinah-run`).
#![allow(
    dead_code,
    reason = "each test file uses the part of the harness it needs"
)]

use std::time::Duration;

use dinah_core::{ProtocolLimits, RuntimeLimits};
use dinah_std::Runtime;
use dinah_tcp::{Membership, TcpConfig, TcpTransport};

/// The run ID of every flood test.
pub(crate) const RUN_ID: u64 = 0xf100d;

/// What one rank saw.
#[derive(Debug)]
pub(crate) struct RankOutcome {
    /// The sum of every rank's number plus one, from `all_reduce`.
    pub(crate) sum: u64,
    /// Strangers its listener refused during set-up.
    pub(crate) rejected_total: u64,
    /// The refusals it kept.
    pub(crate) rejected_kept: usize,
}

/// Sets up `membership`'s rank over TCP, sums every rank's number plus
/// one, meets the others in a barrier, and shuts down cleanly.
pub(crate) fn rank(membership: Membership) -> RankOutcome {
    let me = u64::from(membership.rank().get());
    let builder = Runtime::builder(RUN_ID, ProtocolLimits::default(), RuntimeLimits::default())
        .expect("default limits are valid");
    let (handle, driver) =
        TcpTransport::connect_with(membership, builder.hello().unwrap(), TcpConfig::default())
            .expect("the set-up completes despite the strangers");
    let (rejected_total, rejected_kept) = (driver.rejected_total(), driver.rejected().len());
    let mut runtime = builder.start(handle, driver).expect("the runtime starts");
    // The runtime's statistics report the refusals too.
    let refusals = runtime.stats().driver.refusals;
    assert_eq!(refusals.total(), rejected_total);
    assert_eq!(
        refusals.first().count() as u64,
        rejected_total.min(dinah_std::transport::KEPT_REFUSALS as u64)
    );
    assert!(refusals.first().all(|r| r.addr.is_some()));
    let timeout = Duration::from_secs(30);
    let sum = runtime
        .all_reduce(me + 1, |a, b| a + b, timeout)
        .expect("every rank answers");
    runtime.barrier(timeout).expect("every rank meets");
    runtime
        .shutdown(timeout)
        .expect("every rank shuts down cleanly");
    RankOutcome {
        sum,
        rejected_total,
        rejected_kept,
    }
}
