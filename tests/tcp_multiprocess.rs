//! The transport conformance suite over TCP with every rank in its own
//! process, started through the `dinah-run` launcher, at world sizes 1, 2
//! and 4; and a run in which one of four ranks dies mid-run.
//!
//! **The rank program is this test binary.** Each test launches N copies
//! of the binary it runs in (`<this binary> <test name> --exact`) through
//! [`dinah_launch::launcher::launch`], the library behind the `dinah-run`
//! binary (same spawn, rendezvous, output and kill logic; only the
//! command-line parsing differs, and `dinah-launch/tests/dinah_run.rs` covers
//! that binary end to end). The launcher puts `DINAH_TEST_RANK_OF=<test
//! name>` in the ranks' environment, so the same test function, run again
//! inside each rank, plays the rank instead of launching. A root test
//! cannot name the `dinah-run` binary (`CARGO_BIN_EXE_*` exists only for
//! binaries of the package under test), and the library needs no path.
//!
//! Ranks report through lines marked [`SAID`]; the test asserts on those
//! lines and on the launch report. No assertion is on elapsed time: the
//! launch timeout only bounds a broken run.
#![cfg(feature = "tcp")]
#![expect(
    clippy::print_stdout,
    reason = "the ranks report to the launcher on stdout"
)]

#[path = "support/conformance.rs"]
#[macro_use]
mod conformance;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use conformance::{Case, RankCtx, RankState};
use dinah_core::{Rank, WorldSize};
use dinah_launch::launcher::{ExitKind, LaunchConfig, LaunchReport, OutputSink, Stream, launch};
use dinah_std::{CodecError, RuntimeError, SegmentReader, SegmentWriter, WireValue, schema_id};
use dinah_tcp::{LaunchEnv, LaunchError, TcpTransport};

/// Names the test whose rank this process is.
const RANK_OF: &str = "DINAH_TEST_RANK_OF";

/// Marks a rank's report line (libtest may print before it on the line).
const SAID: &str = "@@ ";

/// The bound on one launch: generous, a broken run fails instead of
/// hanging.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(240);

/// Is this process a rank launched for `test`?
fn in_rank(test: &str) -> bool {
    std::env::var(RANK_OF).is_ok_and(|of| of == test)
}

/// Collects every line the ranks print.
#[derive(Default)]
struct Lines(Mutex<Vec<(u32, Stream, String)>>);

impl OutputSink for Lines {
    fn line(&self, rank: u32, stream: Stream, line: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((rank, stream, String::from_utf8_lossy(line).into_owned()));
    }
}

impl Lines {
    /// What `rank` reported with [`SAID`] lines.
    fn said_by(&self, rank: u32) -> Vec<String> {
        let lines = self.0.lock().unwrap();
        lines
            .iter()
            .filter(|(r, stream, _)| *r == rank && *stream == Stream::Stdout)
            .filter_map(|(_, _, line)| line.split_once(SAID).map(|(_, said)| said.to_owned()))
            .collect()
    }

    /// Everything, prefixed as `dinah-run` prints it (for failure messages).
    fn dump(&self) -> String {
        let lines = self.0.lock().unwrap();
        lines
            .iter()
            .map(|(rank, _, line)| format!("[{rank}] {line}\n"))
            .collect()
    }
}

/// Launches `world` ranks of this binary running `test`.
fn launch_ranks(test: &str, world: u32, grace: Duration) -> (LaunchReport, Arc<Lines>) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let config = LaunchConfig::new(WorldSize::new(world).unwrap(), exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(RANK_OF, test)
        .run_id(conformance::RUN_ID)
        .timeout(LAUNCH_TIMEOUT)
        .grace(grace);
    let lines = Arc::new(Lines::default());
    let report = launch(&config, Arc::clone(&lines) as Arc<dyn OutputSink>);
    (report, lines)
}

/// Connects this rank (started by the launcher) with the suite's registry
/// plus `extra` registrations.
fn connect_rank(extra: impl FnOnce(&mut dinah_std::RuntimeBuilder)) -> RankCtx {
    let launch = LaunchEnv::from_env().expect("started by the launcher");
    assert_eq!(launch.run_id(), conformance::RUN_ID);
    let state = Arc::new(RankState::default());
    let mut builder = conformance::builder(&state);
    extra(&mut builder);
    let hello = builder.hello().unwrap();
    let membership = launch.rendezvous().expect("rendezvous");
    let (handle, driver) = TcpTransport::connect(membership, hello).expect("connect");
    RankCtx::new(builder.start(handle, driver).unwrap(), state)
}

/// One conformance case, as test `test` at world size `world`.
fn run_case(test: &str, world: u32, name: &'static str, case: Case) {
    if in_rank(test) {
        let ctx = connect_rank(|_| {});
        let rank = ctx.rank().get();
        conformance::run_case(name, case, ctx);
        println!("{SAID}case {name} passed");
        println!("{SAID}rank {rank} done");
        return;
    }
    let (report, lines) = launch_ranks(test, world, Duration::ZERO);
    assert!(
        report.is_success(),
        "case {name} at world size {world}: {report}\n{}",
        lines.dump()
    );
    for rank in 0..world {
        let said = lines.said_by(rank);
        assert_eq!(
            said,
            [format!("case {name} passed"), format!("rank {rank} done")],
            "{}",
            lines.dump()
        );
    }
}

conformance_tests!(run_case);

// ---------------------------------------------------------------------------
// One rank dies.

/// An arrival at the survivors' barrier (the suite's barrier calls every
/// rank, the dead one included).
struct Survived;

/// Survivors that arrived, per process.
static SURVIVORS_ARRIVED: AtomicU32 = AtomicU32::new(0);

impl WireValue for Survived {
    const SCHEMA_ID: u64 = schema_id("tcp_multiprocess.Survived/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        ().encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        <()>::decode(input).map(|()| Survived)
    }
}

impl dinah_std::Action for Survived {
    const ID: u128 = 0xc0f0_0101;
    type Output = ();
}

const KILL_TEST: &str = "a_killed_rank_fails_only_the_calls_to_it";
const KILL_WORLD: u32 = 4;
const VICTIM: u32 = 3;
/// Sleep calls each survivor has running or queued on the victim when it
/// dies.
const SLEEPS_PER_SURVIVOR: u64 = 2;
/// Rounds of calls among the survivors before and after the death.
const ROUNDS: u64 = 10;

/// Every rank: a barrier of all four; then the victim waits until it has
/// every survivor's sleeps (two running, four queued) and aborts, while each survivor keeps calling the
/// other survivors, sees exactly its calls to the victim fail with a
/// transport error naming the victim, passes a survivors' barrier and shuts
/// down cleanly.
fn killed_rank_program() {
    let mut ctx = connect_rank(|builder| {
        builder
            .register_in::<Survived, _>(conformance::control_domain(), |Survived| {
                SURVIVORS_ARRIVED.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
    });
    let world = ctx.world();
    let victim = world.rank(VICTIM).unwrap();
    ctx.barrier();
    if ctx.rank() == victim {
        let survivors = u64::from(KILL_WORLD - 1);
        // The victim has served each survivor's barrier arrival, then all
        // their sleeps. A survivor sends its sleeps only after the
        // victim's barrier answer reached it, so no answer it waits for
        // (besides the sleeps) is lost with the victim.
        let admitted = survivors * (1 + SLEEPS_PER_SURVIVOR);
        ctx.wait_until("every survivor's sleeps", move |ctx| {
            ctx.rt().stats().serve.served >= admitted
        });
        let state = Arc::clone(&ctx.state);
        // Both sleep workers busy with survivors' calls, the rest queued:
        // mid-run.
        ctx.wait_until("two sleeps running", move |_| {
            state.sleeps_started.load(Ordering::SeqCst) >= 2
        });
        println!(
            "{SAID}victim aborts with {} survivors' sleeps outstanding",
            survivors * SLEEPS_PER_SURVIVOR
        );
        std::process::abort();
    }

    let me = ctx.rank();
    let client = ctx.rt().client();
    let survivors: Vec<Rank> = world.ranks().filter(|&rank| rank != victim).collect();
    let sleeps: Vec<_> = (0..SLEEPS_PER_SURVIVOR)
        .map(|_| client.spawn_on(victim, conformance::Sleep((120_000, true))))
        .collect();
    let mut ok = 0u64;
    let calls_among_survivors = |ctx: &mut RankCtx, ok: &mut u64| {
        for round in 0..ROUNDS {
            let calls: Vec<_> = survivors
                .iter()
                .map(|&rank| client.spawn_on(rank, conformance::Add((round, 1))))
                .collect();
            for call in calls {
                assert_eq!(ctx.wait(call).expect("a survivor answers"), round + 1);
                *ok += 1;
            }
        }
    };
    calls_among_survivors(&mut ctx, &mut ok);
    let mut failed_on_victim = 0u64;
    for sleep in sleeps {
        match ctx.wait(sleep) {
            Err(RuntimeError::Transport { peer, .. }) if peer == victim => failed_on_victim += 1,
            other => panic!(
                "rank {}: a call to the dead rank ended with {other:?}",
                me.get()
            ),
        }
    }
    // The victim is down: a new call to it fails at once, the others work.
    match ctx.wait(client.spawn_on(victim, conformance::Add((1, 1)))) {
        Err(RuntimeError::Transport { peer, .. }) if peer == victim => failed_on_victim += 1,
        other => panic!(
            "rank {}: a new call to the dead rank ended with {other:?}",
            me.get()
        ),
    }
    calls_among_survivors(&mut ctx, &mut ok);

    // The survivors' barrier, serving calls while it waits.
    let arrivals: Vec<_> = survivors
        .iter()
        .map(|&rank| client.spawn_on(rank, Survived))
        .collect();
    for arrival in arrivals {
        ctx.wait(arrival).expect("survivor barrier");
    }
    let expected = survivors.len() as u32;
    ctx.wait_until("the survivors' barrier", move |_| {
        SURVIVORS_ARRIVED.load(Ordering::SeqCst) >= expected
    });
    let report = ctx
        .take_runtime()
        .shutdown(conformance::SHUTDOWN)
        .expect("the survivors shut down in time");
    assert!(report.is_clean(), "rank {}: {report}", me.get());
    println!(
        "{SAID}survivor {}: {failed_on_victim} calls to rank {VICTIM} failed with a transport error, \
         {ok} calls among survivors ok, shutdown clean ({report})",
        me.get()
    );
}

#[test]
fn a_killed_rank_fails_only_the_calls_to_it() {
    if in_rank(KILL_TEST) {
        return killed_rank_program();
    }
    // The grace lets the survivors finish after the victim's death.
    let (report, lines) = launch_ranks(KILL_TEST, KILL_WORLD, LAUNCH_TIMEOUT);
    let dump = lines.dump();
    assert!(
        matches!(
            report.error(),
            Some(LaunchError::RankFailed {
                rank: VICTIM,
                exit: ExitKind::Signal(6)
            })
        ),
        "the victim's SIGABRT fails the run: {report}\n{dump}"
    );
    assert_eq!(report.exit_code(), 128 + 6);
    assert_eq!(
        lines.said_by(VICTIM),
        ["victim aborts with 6 survivors' sleeps outstanding"],
        "{dump}"
    );
    let transport_failures = SLEEPS_PER_SURVIVOR + 1;
    let ok_calls = 2 * ROUNDS * u64::from(KILL_WORLD - 1);
    for survivor in 0..VICTIM {
        let rank = &report.ranks()[survivor as usize];
        assert_eq!(
            rank.exit,
            Some(ExitKind::Code(0)),
            "survivor {survivor} exits 0: {report}\n{dump}"
        );
        assert!(
            !rank.killed,
            "survivor {survivor} ended on its own: {report}"
        );
        let said = lines.said_by(survivor);
        let expected = format!(
            "survivor {survivor}: {transport_failures} calls to rank {VICTIM} failed with a transport error, \
             {ok_calls} calls among survivors ok, shutdown clean ("
        );
        assert!(
            said.len() == 1 && said[0].starts_with(&expected),
            "survivor {survivor} said {said:?}\n{dump}"
        );
    }
    // Nothing left running: the launcher reaped every rank.
    assert!(
        report.ranks().iter().all(|rank| rank.exit.is_some()),
        "{report}"
    );
}
