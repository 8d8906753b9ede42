//! `dinah-run` interrupted: `SIGINT` or `SIGTERM` sent to the launcher is
//! passed on to every rank, the ranks get the interrupt grace to exit, and
//! then they are killed; a second signal kills them at once. The exit code
//! is `128 + N` for signal N, as a shell reports an interrupted command.
//!
//! The ranks are `/bin/sh` one-liners. Rank 0 sends the signal to its
//! parent, the launcher, once every rank has set its trap (each leaves a
//! file in a directory of this test's own). Timeouts bound every wait.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[path = "support/launch.rs"]
mod launch;

use launch::{dinah_run, sh};

/// A fresh directory for the ranks' "trap set" files.
fn ready_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dinah-interrupts-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test's directory");
    dir
}

/// A rank script: `trap` as its first command; then it marks itself
/// ready, rank 0 waits (at most 30 s) for every rank's mark and runs
/// `signal` (commands run against the launcher, `$PPID`), and every rank
/// idles until a signal ends it.
fn script(trap: &str, signal: &str) -> String {
    format!(
        r#"{trap}
touch "$READY/$DINAH_RANK"
if [ "$DINAH_RANK" = 0 ]; then
  i=0
  while [ "$(ls "$READY" | wc -l)" -lt "$DINAH_WORLD_SIZE" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
  {signal}
fi
while :; do sleep 0.05; done"#
    )
}

#[test]
fn sigint_is_passed_on_to_every_rank_and_the_run_ends_with_130() {
    let dir = ready_dir("int");
    let env = format!("READY={}", dir.display());
    let run = sh(
        3,
        &["-x", &env],
        &script(r#"trap 'echo "got INT"; exit 0' INT"#, "kill -INT $PPID"),
    );
    assert_eq!(run.code(), Some(130), "{run:?}");
    for rank in 0..3 {
        assert_eq!(run.lines_of(rank), ["got INT"], "{run:?}");
    }
    assert!(
        run.stderr
            .contains("interrupted by signal 2 (SIGINT), passed on to every rank"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("killed"), "{run:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ranks_that_outlive_sigterm_are_killed_after_the_interrupt_grace() {
    let dir = ready_dir("term");
    let env = format!("READY={}", dir.display());
    // The ranks note the signal and carry on.
    let run = sh(
        2,
        &["-x", &env, "--interrupt-grace", "300ms", "-v"],
        &script(r#"trap 'echo "got TERM"' TERM"#, "kill -TERM $PPID"),
    );
    assert_eq!(run.code(), Some(143), "{run:?}");
    for rank in 0..2 {
        assert_eq!(run.lines_of(rank), ["got TERM"], "{run:?}");
    }
    assert!(
        run.stderr
            .contains("dinah-run: passed SIGTERM on to 2 rank(s)"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("interrupted by signal 15 (SIGTERM), passed on to every rank"),
        "{run:?}"
    );
    assert!(run.stderr.contains("killed rank(s) 0, 1"), "{run:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_second_interrupt_kills_the_ranks_at_once() {
    let dir = ready_dir("twice");
    let env = format!("READY={}", dir.display());
    // The ranks note the signal and carry on; rank 0 sends the second one
    // once the first reached it. Without the second signal the ranks would
    // be killed only after the grace of a minute.
    let script = script(
        r#"trap 'touch "$READY/int-$DINAH_RANK"' INT"#,
        r#"kill -INT $PPID
  i=0
  while [ ! -e "$READY/int-0" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
  kill -INT $PPID"#,
    );
    let started = Instant::now();
    let run = dinah_run(&[
        "-n",
        "2",
        "--timeout",
        "90s",
        "--interrupt-grace",
        "60s",
        "-x",
        &env,
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert_eq!(run.code(), Some(130), "{run:?}");
    assert!(run.stderr.contains("killed rank(s) 0, 1"), "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the ranks waited for the grace: {run:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
