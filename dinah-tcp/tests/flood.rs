//! Runs of four ranks that set up and complete while thousands of
//! strangers connect to their listeners (and, under `dinah-run`, to the
//! launcher's control port): silent, garbage, instant disconnects, half
//! hellos, announced 4 GiB messages. Loopback only; every wait is bounded.

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use dinah_core::{ProtocolLimits, RuntimeLimits, WorldSize};
use dinah_std::Runtime;
use dinah_tcp::{Membership, TcpConfig, TcpTransport};

#[path = "support/flood.rs"]
mod flood;
#[path = "support/launch.rs"]
mod launch;

use flood::Flood;
use launch::{dinah_run, in_rank, say, self_as_rank};

const RUN_ID: u64 = 0xf100d;

/// What one rank saw.
#[derive(Debug)]
struct RankOutcome {
    /// The sum of every rank's number plus one, from `all_reduce`.
    sum: u64,
    /// Strangers its listener refused during set-up.
    rejected_total: u64,
    /// The refusals it kept.
    rejected_kept: usize,
}

/// Sets up `membership`'s rank over TCP, sums every rank's number plus
/// one, meets the others in a barrier, and shuts down cleanly.
fn rank(membership: Membership) -> RankOutcome {
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

#[test]
fn a_run_under_dinah_run_completes_while_10000_strangers_hit_the_launcher_and_the_ranks() {
    const TEST: &str =
        "a_run_under_dinah_run_completes_while_10000_strangers_hit_the_launcher_and_the_ranks";
    if in_rank(TEST, || {
        let me: u32 = std::env::var("DINAH_RANK").unwrap().parse().unwrap();
        // Rank 0 floods the launcher's control port with 5,000
        // connections, and reports its own address once 4,000 are in.
        let launcher_flood = (me == 0).then(|| {
            let launcher: SocketAddr = std::env::var("DINAH_LAUNCHER").unwrap().parse().unwrap();
            let flood = Flood::start(vec![launcher], 5_000);
            assert!(flood.wait_for(4_000));
            flood
        });
        let membership = Membership::from_env().expect("the rendezvous completes");
        // Each rank floods the listener of one of ranks 0 to 2 (rank 3
        // only dials) with 1,250 connections and sets up once 1,000 are
        // in.
        let next = membership.addrs()[((me + 1) % 3) as usize];
        let flood = Flood::start(vec![next], 1_250);
        assert!(flood.wait_for(1_000));
        let outcome = rank(membership);
        let mut reports = vec![flood.finish()];
        reports.extend(launcher_flood.map(Flood::finish));
        let attempted: u64 = reports.iter().map(|r| r.attempted).sum();
        let connected: u64 = reports.iter().map(|r| r.connected).sum();
        say(&format!("sum {}", outcome.sum));
        say(&format!("strangers sent {attempted}"));
        say(&format!(
            "strangers connected {connected}, refused by this rank {}",
            outcome.rejected_total
        ));
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(4, &["--timeout", "100s", "-v"], TEST));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let mut strangers = 0;
    for rank in 0..4 {
        let said = run.said_by(rank);
        assert_eq!(said.first(), Some(&"sum 10"), "{run:?}");
        strangers += said
            .get(1)
            .and_then(|line| line.strip_prefix("strangers sent "))
            .and_then(|n| n.parse::<u64>().ok())
            .expect("each rank says how many strangers it sent");
    }
    assert_eq!(strangers, 10_000, "{run:?}");
    // The launcher refused the strangers that reached it, and says so.
    let refused: u64 = run
        .stderr
        .lines()
        .find_map(|line| {
            line.strip_prefix("dinah-run: refused ")?
                .strip_suffix(" control connection(s) that were not ranks of this run")
        })
        .and_then(|n| n.parse().ok())
        .expect("dinah-run reports the refused connections");
    assert!((2_500..=5_000).contains(&refused), "{run:?}");
    // `-v` showed the first three one by one and summed up the rest, at
    // most once a second within the 100 s run, so every refusal is counted
    // once and the thousands cost only a few lines.
    let shown = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("dinah-run: refused a control connection from "))
        .count();
    let summaries: Vec<u64> = run
        .stderr
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("dinah-run: refused ")?;
            let (count, _) = rest.split_once(" more control connection(s), the last from ")?;
            count.parse().ok()
        })
        .collect();
    assert_eq!(shown, 3, "{run:?}");
    assert!(!summaries.is_empty() && summaries.len() <= 101, "{run:?}");
    assert_eq!(
        shown as u64 + summaries.iter().sum::<u64>(),
        refused,
        "{run:?}"
    );
}
