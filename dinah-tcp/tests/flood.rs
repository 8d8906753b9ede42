//! Runs of four ranks that set up and complete while thousands of
//! strangers connect to their listeners: silent, garbage, instant
//! disconnects, half hellos, announced 4 GiB messages. Loopback only;
//! every wait is bounded. (The same under `dinah-run`, with strangers at
//! the launcher too, is in `dinah-launch/tests/flood.rs`.)

use std::net::SocketAddr;
use std::thread;

use dinah_core::WorldSize;
use dinah_tcp::Membership;

#[path = "support/flood.rs"]
mod flood;
#[path = "support/flood_rank.rs"]
mod flood_rank;

use flood::Flood;
use flood_rank::{RankOutcome, rank};

/// Four ranks in this process set up while `strangers` connections hit
/// the listeners of ranks 0 to 2 (rank 3 only dials: it has no one above
/// it to accept). Ranks 0 to 2 start first, so their set-up, which waits
/// for rank 3, runs through the flood; rank 3 starts when nine tenths of
/// the strangers have connected, and dials through the rest.
fn four_ranks_under_a_flood(strangers: u64) {
    let mut members = Membership::loopback(WorldSize::new(4).unwrap()).unwrap();
    let targets: Vec<SocketAddr> = members[0].addrs()[..3].to_vec();
    let last = members.pop().expect("four members");
    let mut ranks: Vec<_> = members
        .into_iter()
        .map(|membership| thread::spawn(move || rank(membership)))
        .collect();
    let flood = Flood::start(targets, strangers);
    assert!(flood.wait_for(strangers / 10 * 9), "the flood got going");
    ranks.push(thread::spawn(move || rank(last)));
    let outcomes: Vec<RankOutcome> = ranks
        .into_iter()
        .map(|rank| rank.join().expect("no rank panics"))
        .collect();
    let report = flood.finish();
    assert_eq!(report.attempted, strangers, "{report:?}");
    // Connections made while the listeners accepted: at least the nine
    // tenths before rank 3 started, less any the backlogs turned away.
    assert!(report.connected >= strangers / 2, "{report:?} {outcomes:?}");
    for outcome in &outcomes {
        assert_eq!(outcome.sum, 1 + 2 + 3 + 4, "{outcomes:?}");
        assert!(outcome.rejected_kept <= 64, "{outcomes:?}");
        assert!(
            outcome.rejected_kept as u64 <= outcome.rejected_total,
            "{outcomes:?}"
        );
    }
    // Every stranger that sent garbage before set-up ended was refused
    // by the listener it reached.
    let refused: u64 = outcomes.iter().map(|o| o.rejected_total).sum();
    assert!(
        refused >= strangers / 10,
        "the listeners refused strangers during set-up: {outcomes:?} {report:?}"
    );
}

#[test]
fn four_ranks_set_up_and_complete_while_1000_strangers_connect() {
    four_ranks_under_a_flood(1_000);
}

#[test]
fn four_ranks_set_up_and_complete_while_10000_strangers_connect() {
    four_ranks_under_a_flood(10_000);
}
