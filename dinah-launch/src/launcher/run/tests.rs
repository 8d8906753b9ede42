//! [`launch`](super::launch) with `/bin/sh` one-liners as ranks: the typed
//! outcome of success, a failure, a start-up timeout, a refused size and
//! an interrupt before the start.
//! (`dinah-launch/tests/dinah_run.rs` runs the binary, with ranks that talk
//! to the launcher.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dinah_core::WorldSize;

use crate::launch_error::{LaunchError, LaunchPhase};
use crate::launcher::{
    ExitKind, Interrupts, LaunchConfig, LaunchEvent, LaunchReport, MAX_RANKS, OutputSink, Stream,
    launch, launch_until,
};

#[derive(Default)]
struct Record {
    lines: Mutex<Vec<(u32, Stream, String)>>,
    events: Mutex<Vec<LaunchEvent>>,
}

impl OutputSink for Record {
    fn line(&self, rank: u32, stream: Stream, line: &[u8]) {
        self.lines
            .lock()
            .unwrap()
            .push((rank, stream, String::from_utf8_lossy(line).into_owned()));
    }

    fn event(&self, event: &LaunchEvent) {
        self.events.lock().unwrap().push(event.clone());
    }
}

fn sh(
    ranks: u32,
    script: &str,
    configure: impl FnOnce(LaunchConfig) -> LaunchConfig,
) -> (LaunchReport, Arc<Record>) {
    let config = LaunchConfig::new(WorldSize::new(ranks).unwrap(), "/bin/sh")
        .args(["-c", script])
        .timeout(Duration::from_secs(60));
    let record = Arc::new(Record::default());
    let report = launch(
        &configure(config),
        Arc::clone(&record) as Arc<dyn OutputSink>,
    );
    (report, record)
}

#[test]
fn ranks_that_all_exit_zero_succeed() {
    let (report, record) = sh(3, r#"echo "rank $DINAH_RANK"; echo "to stderr" >&2"#, |c| {
        c.run_id(99)
    });
    assert!(report.is_success(), "{report}");
    assert_eq!(report.run_id(), 99);
    assert_eq!(report.exit_code(), 0);
    for rank in report.ranks() {
        assert_eq!(rank.exit, Some(ExitKind::Code(0)));
        assert!(
            rank.pid.is_some() && !rank.killed && rank.addr.is_none(),
            "{rank:?}"
        );
    }
    let lines = record.lines.lock().unwrap();
    for rank in 0..3 {
        assert!(
            lines.contains(&(rank, Stream::Stdout, format!("rank {rank}"))),
            "{lines:?}"
        );
        assert!(
            lines.contains(&(rank, Stream::Stderr, "to stderr".to_owned())),
            "{lines:?}"
        );
    }
    let events = record.events.lock().unwrap();
    assert!(
        matches!(events[0], LaunchEvent::Listening { run_id: 99, .. }),
        "{events:?}"
    );
    let spawned = events
        .iter()
        .filter(|e| matches!(e, LaunchEvent::Spawned { .. }))
        .count();
    let exited = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                LaunchEvent::Exited {
                    exit: ExitKind::Code(0),
                    ..
                }
            )
        })
        .count();
    assert_eq!((spawned, exited), (3, 3), "{events:?}");
}

#[test]
fn the_first_failure_is_reported_and_the_rest_killed() {
    let (report, record) = sh(
        3,
        r#"if [ "$DINAH_RANK" = 1 ]; then exit 3; fi; exec sleep 600"#,
        |c| c,
    );
    assert!(
        matches!(
            report.error(),
            Some(LaunchError::RankFailed {
                rank: 1,
                exit: ExitKind::Code(3)
            })
        ),
        "{report}"
    );
    assert_eq!(report.exit_code(), 3);
    let ranks = report.ranks();
    assert!(!ranks[1].killed);
    for survivor in [0, 2] {
        assert!(ranks[survivor].killed, "{report}");
        assert_eq!(ranks[survivor].exit, Some(ExitKind::Signal(9)), "{report}");
    }
    let events = record.events.lock().unwrap();
    let killed: Vec<u32> = events
        .iter()
        .filter_map(|e| {
            if let LaunchEvent::Killed { rank } = e {
                Some(*rank)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(killed, [0, 2]);
}

#[test]
fn ranks_that_never_report_time_out_and_are_killed() {
    let (report, _) = sh(2, "exec sleep 600", |c| {
        c.startup_timeout(Duration::from_millis(200))
    });
    match report.error() {
        Some(LaunchError::Timeout {
            phase: LaunchPhase::Startup,
            after,
            first_missing: 0,
            missing: 2,
        }) => {
            assert_eq!(*after, Duration::from_millis(200));
        }
        other => panic!("expected a start-up timeout, got {other:?}"),
    }
    assert_eq!(report.exit_code(), 124);
    assert!(
        report
            .ranks()
            .iter()
            .all(|rank| rank.killed && rank.exit == Some(ExitKind::Signal(9))),
        "{report}"
    );
}

#[test]
fn too_many_ranks_are_refused_before_anything_starts() {
    let (report, record) = sh(MAX_RANKS + 1, "true", |c| c);
    assert!(
        matches!(report.error(), Some(LaunchError::TooManyRanks { requested, max: MAX_RANKS }) if *requested == MAX_RANKS + 1),
        "{report}"
    );
    assert!(
        record.events.lock().unwrap().is_empty(),
        "nothing was started"
    );
}

#[test]
fn a_program_that_cannot_start_is_an_error_naming_the_rank_and_the_program() {
    let config = LaunchConfig::new(
        WorldSize::new(2).unwrap(),
        "/nonexistent/dinah-no-such-program",
    );
    let report = launch(&config, Arc::new(Record::default()));
    assert!(
        matches!(report.error(), Some(LaunchError::Spawn { rank: 0, .. })),
        "{report}"
    );
    let text = report.to_string();
    assert!(
        text.starts_with("cannot start rank 0 as `/nonexistent/dinah-no-such-program`: "),
        "{text}"
    );
    assert!(report.ranks().iter().all(|rank| rank.pid.is_none()));
}

#[test]
fn an_interrupt_before_the_start_starts_nothing_and_fails_the_run() {
    let config = LaunchConfig::new(WorldSize::new(3).unwrap(), "/bin/true");
    let interrupts = Interrupts::new();
    interrupts.raise(libc::SIGINT);
    let report = launch_until(&config, Arc::new(Record::default()), &interrupts);
    assert!(
        matches!(
            report.error(),
            Some(LaunchError::Interrupted { signal }) if *signal == libc::SIGINT
        ),
        "{report}"
    );
    assert_eq!(report.exit_code(), 130);
    assert!(report.ranks().iter().all(|rank| rank.pid.is_none()));
}
