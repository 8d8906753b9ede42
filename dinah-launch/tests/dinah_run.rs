//! The `dinah-run` binary end to end: exit codes, output prefixes, the
//! kill on the first failure, both timeouts, the rendezvous and the
//! lifeline.
//!
//! Tiny rank programs are `/bin/sh` one-liners, or this test binary itself
//! (see `support/launch.rs`). Timeouts bound every wait; nothing asserts
//! on elapsed time.

use std::io::Read;
use std::thread;
use std::time::{Duration, Instant};

use dinah_tcp::Membership;

#[path = "support/launch.rs"]
mod launch;

use launch::{PATIENCE, SAID, dinah_run, in_rank, say, self_as_rank, sh, start};

#[test]
fn every_rank_exiting_zero_is_success_and_output_is_prefixed() {
    let run = sh(
        3,
        &[],
        r#"echo "out $DINAH_RANK of $DINAH_WORLD_SIZE run $DINAH_RUN_ID"; echo "err $DINAH_RANK" >&2"#,
    );
    assert_eq!(run.code(), Some(0), "{run:?}");
    let mut run_ids = Vec::new();
    for rank in 0..3 {
        let lines = run.lines_of(rank);
        assert_eq!(lines.len(), 1, "{run:?}");
        let rest = lines[0]
            .strip_prefix(&format!("out {rank} of 3 run "))
            .expect("rank and world size");
        run_ids.push(rest.parse::<u64>().expect("a numeric run ID"));
        assert!(
            run.stderr
                .lines()
                .any(|line| line == format!("[{rank}] err {rank}")),
            "{run:?}"
        );
    }
    assert!(
        run_ids.iter().all(|&id| id == run_ids[0]),
        "one run ID for the run: {run_ids:?}"
    );
}

#[test]
fn the_run_id_option_reaches_every_rank() {
    let run = sh(2, &["--run-id", "0x2a"], r#"echo "$DINAH_RUN_ID""#);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(run.lines_of(0), ["42"]);
    assert_eq!(run.lines_of(1), ["42"]);
}

#[test]
fn a_failing_rank_fails_the_run_and_the_others_are_killed() {
    // Rank 1 fails; the others would sleep for ten minutes.
    let run = sh(
        3,
        &[],
        r#"if [ "$DINAH_RANK" = 1 ]; then echo failing; exit 3; fi; exec sleep 600"#,
    );
    assert_eq!(run.code(), Some(3), "the failing rank's code: {run:?}");
    assert!(
        run.stderr
            .contains("dinah-run: rank 1 exited with code 3; killed rank(s) 0, 2"),
        "{run:?}"
    );
    assert_eq!(run.lines_of(1), ["failing"]);
}

#[test]
fn a_rank_killed_by_a_signal_is_reported_as_such() {
    let run = sh(
        2,
        &[],
        r#"if [ "$DINAH_RANK" = 0 ]; then kill -9 $$; fi; exec sleep 600"#,
    );
    assert_eq!(run.code(), Some(128 + 9), "{run:?}");
    assert!(
        run.stderr
            .contains("rank 0 was killed by signal 9 (SIGKILL)"),
        "{run:?}"
    );
}

#[test]
fn the_grace_period_lets_the_others_finish() {
    // Rank 0 fails at once; rank 1 finishes its work within the grace.
    let run = sh(
        2,
        &["--grace", "60s"],
        r#"if [ "$DINAH_RANK" = 0 ]; then exit 5; fi; sleep 1; echo finished"#,
    );
    assert_eq!(run.code(), Some(5), "{run:?}");
    assert_eq!(run.lines_of(1), ["finished"], "{run:?}");
    assert!(
        !run.stderr.contains("killed rank"),
        "nobody was killed: {run:?}"
    );
}

#[test]
fn ranks_that_never_report_time_out_at_startup() {
    let run = sh(2, &["--startup-timeout", "300ms"], "exec sleep 600");
    assert_eq!(run.code(), Some(124), "{run:?}");
    assert!(
        run.stderr
            .contains("2 rank(s) did not report an address within 300ms (the first is rank 0)"),
        "{run:?}"
    );
    assert!(run.stderr.contains("killed rank(s) 0, 1"), "{run:?}");
}

#[test]
fn a_run_past_its_timeout_is_killed() {
    const TEST: &str = "a_run_past_its_timeout_is_killed";
    if in_rank(TEST, || {
        let membership = Membership::from_env().expect("rendezvous");
        say(&format!("rank {} joined", membership.rank().get()));
        thread::sleep(Duration::from_secs(600));
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(2, &["--timeout", "2s"], TEST));
    assert_eq!(run.code(), Some(124), "{run:?}");
    assert!(
        run.stderr
            .contains("the run timed out after 2s with 2 rank(s) still running"),
        "{run:?}"
    );
    assert_eq!(run.said_by(0), ["rank 0 joined"], "{run:?}");
    assert_eq!(run.said_by(1), ["rank 1 joined"], "{run:?}");
}

#[test]
fn the_rendezvous_gives_every_rank_every_address() {
    const TEST: &str = "the_rendezvous_gives_every_rank_every_address";
    if in_rank(TEST, || {
        let membership = Membership::from_env().expect("rendezvous");
        let own = membership
            .listener()
            .expect("the reported listener")
            .local_addr()
            .unwrap();
        assert_eq!(
            own,
            membership.addr(membership.rank()),
            "the list holds this rank's listener"
        );
        let addrs: Vec<String> = membership.addrs().iter().map(ToString::to_string).collect();
        say(&format!("addrs {}", addrs.join(",")));
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(4, &["--timeout", "60s"], TEST));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let lists: Vec<String> = (0..4)
        .map(|rank| {
            run.said_by(rank)
                .into_iter()
                .find_map(|l| l.strip_prefix("addrs "))
                .expect("a list")
                .to_owned()
        })
        .collect();
    assert!(
        lists.iter().all(|list| *list == lists[0]),
        "every rank got the same list: {lists:?}"
    );
    let ports: std::collections::BTreeSet<&str> = lists[0]
        .split(',')
        .map(|a| a.rsplit_once(':').unwrap().1)
        .collect();
    assert_eq!(ports.len(), 4, "four distinct ports: {lists:?}");
}

#[test]
fn hosts_put_each_rank_on_its_own_address() {
    const TEST: &str = "hosts_put_each_rank_on_its_own_address";
    if in_rank(TEST, || {
        let membership = Membership::from_env().expect("rendezvous");
        let own = membership.addr(membership.rank());
        say(&format!("listens on {}", own.ip()));
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(
        3,
        &["--timeout", "60s", "--hosts", "127.0.0.2,127.0.0.3"],
        TEST,
    ));
    assert_eq!(run.code(), Some(0), "{run:?}");
    for (rank, ip) in [(0, "127.0.0.2"), (1, "127.0.0.3"), (2, "127.0.0.2")] {
        assert_eq!(run.said_by(rank), [format!("listens on {ip}")], "{run:?}");
    }
}

#[test]
fn a_stranger_on_the_control_port_is_refused_without_failing_the_run() {
    const TEST: &str = "a_stranger_on_the_control_port_is_refused_without_failing_the_run";
    if in_rank(TEST, || {
        if std::env::var("DINAH_RANK").unwrap() == "0" {
            // Something that does not speak the protocol.
            let launcher = std::env::var("DINAH_LAUNCHER").unwrap();
            let mut stranger = std::net::TcpStream::connect(launcher).unwrap();
            stranger.set_read_timeout(Some(PATIENCE)).unwrap();
            std::io::Write::write_all(&mut stranger, b"GET / HTTP/1.0\r\n\r\n").unwrap();
            let mut rest = Vec::new();
            // Closed with unread bytes in its buffer, the launcher's end
            // may reset rather than close: both are a hang-up.
            let hung_up = match stranger.read_to_end(&mut rest) {
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            };
            say(&format!(
                "stranger hung up on: {hung_up}, answered {} bytes",
                rest.len()
            ));
        }
        let membership = Membership::from_env().expect("the real rendezvous still works");
        say(&format!("joined {} ranks", membership.world().get()));
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(2, &["--timeout", "60s", "-v"], TEST));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(
        run.said_by(0),
        [
            "stranger hung up on: true, answered 0 bytes",
            "joined 2 ranks"
        ],
        "{run:?}"
    );
    assert_eq!(run.said_by(1), ["joined 2 ranks"], "{run:?}");
    assert!(
        run.stderr
            .contains("dinah-run: refused a control connection from 127.0.0.1:"),
        "{run:?}"
    );
}

#[test]
fn a_rank_that_exits_without_reporting_breaks_the_rendezvous() {
    const TEST: &str = "a_rank_that_exits_without_reporting_breaks_the_rendezvous";
    if in_rank(TEST, || {
        if std::env::var("DINAH_RANK").unwrap() == "0" {
            return; // exits 0 without reporting
        }
        let error = Membership::from_env().expect_err("the list can never be complete");
        say(&format!("refused: {error}"));
        std::process::exit(9);
    }) {
        return;
    }
    let run = dinah_run(&self_as_rank(
        2,
        &["--timeout", "60s", "--grace", "60s"],
        TEST,
    ));
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("rank 0 exited with code 0 before reporting its address"),
        "{run:?}"
    );
    assert!(
        run.said_by(1)
            == ["refused: the rendezvous was refused: rank 0 exited before reporting its address"],
        "{run:?}"
    );
}

#[test]
fn ranks_exit_when_their_launcher_dies() {
    const TEST: &str = "ranks_exit_when_their_launcher_dies";
    if in_rank(TEST, || {
        let _membership = Membership::from_env().expect("rendezvous");
        say(&format!("ready {}", std::process::id()));
        thread::sleep(Duration::from_secs(600));
    }) {
        return;
    }
    let mut launcher = start(&self_as_rank(2, &["--timeout", "120s"], TEST));
    let mut stdout = launcher.stdout.take().unwrap();
    // Read until both ranks said they are ready, with their pids.
    let reader = thread::spawn(move || {
        let mut text = String::new();
        let mut byte = [0];
        let mut pids = Vec::new();
        while pids.len() < 2 && stdout.read(&mut byte).unwrap_or(0) == 1 {
            text.push(char::from(byte[0]));
            if byte[0] == b'\n' {
                let line = text.lines().last().unwrap_or_default().to_owned();
                let ready = format!("{SAID}ready ");
                if let Some(pid) = line
                    .split_once(&ready)
                    .map(|(_, pid)| pid.trim().parse::<u32>().unwrap())
                {
                    pids.push(pid);
                }
            }
        }
        pids
    });
    let pids = reader.join().unwrap();
    assert_eq!(pids.len(), 2, "both ranks started");
    // SIGKILL: the launcher cannot clean up; only the lifeline can.
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    let deadline = Instant::now() + PATIENCE;
    for pid in pids {
        while is_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "rank pid {pid} outlived its launcher"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Is `pid` a live process (neither gone nor a zombie)?
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let run = dinah_run(&["--", "/bin/true"]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains("the number of ranks is missing (-n N)"),
        "{run:?}"
    );
    let run = dinah_run(&["-n", "0", "/bin/true"]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    let help = dinah_run(&["--help"]);
    assert_eq!(help.code(), Some(0));
    assert!(
        help.stdout.starts_with("dinah-run: start N local ranks"),
        "{help:?}"
    );
}

#[test]
fn a_program_that_cannot_start_fails_the_run_and_is_named() {
    let run = dinah_run(&["-n", "2", "--", "/nonexistent/dinah-no-such-program"]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr.contains(
            "dinah-run: cannot start rank 0 as `/nonexistent/dinah-no-such-program`: No such file or directory"
        ),
        "{run:?}"
    );
}

#[test]
fn verbose_reports_the_launchers_events() {
    let run = sh(1, &["-v"], "true");
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("dinah-run: rank 0 started as pid "),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("dinah-run: rank 0 exited with code 0"),
        "{run:?}"
    );
}
