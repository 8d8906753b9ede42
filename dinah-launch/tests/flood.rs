//! A run of four ranks under `dinah-run` that sets up and completes while
//! 10,000 strangers connect to the launcher's control port and to the
//! ranks' listeners. Loopback only; every wait is bounded.

use std::net::SocketAddr;

use dinah_tcp::Membership;

#[path = "../../dinah-tcp/tests/support/flood.rs"]
mod flood;
#[path = "../../dinah-tcp/tests/support/flood_rank.rs"]
mod flood_rank;
#[path = "support/launch.rs"]
mod launch;

use flood::Flood;
use flood_rank::rank;
use launch::{dinah_run, in_rank, say, self_as_rank};

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
