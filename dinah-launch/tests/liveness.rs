//! Liveness over TCP: a rank stopped with `SIGSTOP` keeps its connections
//! open, and is declared down by the others within the liveness timeout;
//! they shut down cleanly without it, then wake it, and it finds them gone.
//!
//! The ranks are this test binary under `dinah-run` (see
//! `support/launch.rs`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use dinah_core::{ProtocolLimits, RuntimeLimits};
use dinah_std::Runtime;
use dinah_tcp::{LaunchEnv, TcpConfig, TcpTransport};

#[path = "../../tests/support/freeze.rs"]
mod freeze;
#[path = "support/launch.rs"]
mod launch;

use freeze::{Freezer, wake};
use launch::{dinah_run, in_rank, say, self_as_rank};

/// The liveness timeout of these ranks.
const LIVENESS: Duration = Duration::from_secs(1);

/// The timeout of the collective that waits on the stopped rank: the
/// stopped rank must be declared down long before it.
const PATIENT: Duration = Duration::from_secs(60);

/// Where the rank that stops itself leaves its pid for rank 0.
fn pid_file(run_id: u64) -> PathBuf {
    std::env::temp_dir().join(format!("dinah-liveness-{run_id}.pid"))
}

/// Waits (at most 30 s) for the stopped rank's pid.
fn read_pid(run_id: u64) -> u32 {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(pid) = std::fs::read_to_string(pid_file(run_id)) {
            if pid.ends_with('\n') {
                return pid.trim().parse().expect("rank 2 wrote its pid");
            }
        }
        assert!(Instant::now() < until, "rank 2 never wrote its pid");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_stopped_rank_is_declared_down_and_the_others_shut_down_cleanly() {
    const TEST: &str = "a_stopped_rank_is_declared_down_and_the_others_shut_down_cleanly";
    if in_rank(TEST, stopped_rank_program) {
        return;
    }
    let run = dinah_run(&self_as_rank(3, &["--timeout", "100s"], TEST));
    assert_eq!(run.code(), Some(0), "{run:?}");
    for rank in [0, 1] {
        assert_eq!(
            run.said_by(rank),
            [
                "rank 2 declared down (silent) before the call's timeout: true",
                "shut down cleanly: true"
            ],
            "{run:?}"
        );
    }
    assert_eq!(
        run.said_by(2),
        ["woke up and found its peers gone: true"],
        "{run:?}"
    );
}

/// One rank of the run: rank 2 stops itself; ranks 0 and 1 wait on it.
#[expect(
    clippy::print_stderr,
    reason = "rank 2 reports how often the kernel resumed it unwoken, for the CI log"
)]
fn stopped_rank_program() {
    let launch = LaunchEnv::from_env().expect("started by dinah-run");
    let (me, run_id) = (launch.rank().get(), launch.run_id());
    let builder = Runtime::builder(run_id, ProtocolLimits::default(), RuntimeLimits::default())
        .expect("default limits");
    let membership = launch.rendezvous().expect("the rendezvous completes");
    let config = TcpConfig::default().with_liveness_timeout(Some(LIVENESS));
    let (handle, driver) =
        TcpTransport::connect_with(membership, builder.hello().unwrap(), config).unwrap();
    let mut runtime = builder.start(handle, driver).unwrap();
    runtime.barrier(PATIENT).expect("all three meet");
    if me == 2 {
        let freezer = Freezer::prepare();
        std::fs::write(pid_file(run_id), format!("{}\n", freezer.pid())).unwrap();
        // Stopped here until rank 0 wakes it.
        let resumed_unwoken = freezer.freeze_until_woken();
        eprintln!("rank 2: resumed without a wake {resumed_unwoken} time(s)");
        let found = runtime.all_reduce(1u64, |a, b| a + b, Duration::from_secs(10));
        say(&format!(
            "woke up and found its peers gone: {}",
            found.is_err()
        ));
        drop(runtime.shutdown(Duration::from_secs(5)));
        return;
    }
    let pid = read_pid(run_id);
    let started = Instant::now();
    // Rank 2 takes part in this collective, so it cannot finish.
    let error = runtime
        .all_reduce(1u64, |a, b| a + b, PATIENT)
        .expect_err("rank 2 is stopped");
    let text = error.to_string();
    say(&format!(
        "rank 2 declared down (silent) before the call's timeout: {}",
        started.elapsed() < PATIENT / 2 && text.contains("rank 2") && text.contains("silent")
    ));
    if !text.contains("silent") {
        say(&format!("unexpected error: {text}"));
    }
    let report = runtime.shutdown(Duration::from_secs(20));
    say(&format!(
        "shut down cleanly: {}",
        report.as_ref().is_ok_and(|r| r.is_clean())
    ));
    if let Err(report) = &report {
        say(&format!("shutdown: {report}"));
    }
    if me == 0 {
        // Kept awake until it has ended.
        wake(pid).join().expect("the keeper thread");
        let _ = std::fs::remove_file(pid_file(run_id));
    }
}
