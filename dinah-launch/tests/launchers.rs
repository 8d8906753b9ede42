//! Ranks started by launchers other than `dinah-run`: four plain processes
//! with Slurm's, PMI's or OpenMPI's variables set, meeting through rank 0
//! as the coordinator or through a hostfile, each "host" a distinct
//! loopback address (127.0.0.2, 127.0.0.3, ...). (The `mpi` and
//! `mpi-mpich` CI lanes do the same with `examples/tcp_hello.rs` under the
//! real `mpirun` and `mpiexec`.)
//!
//! The ranks are this test binary (see `support/launch.rs`): each reads
//! its environment, meets the others, sums its rank with theirs over the
//! TCP transport, shuts down, and reports what it saw.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::{ProtocolLimits, RuntimeLimits};
use dinah_std::Runtime;
use dinah_tcp::{LaunchEnv, LaunchError, TcpTransport};

#[path = "support/launch.rs"]
mod launch;

use launch::{PATIENCE, RANK_OF, SAID, in_rank, say};

/// A run key, the same for every rank of a test.
const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// Every variable a launcher may set, cleared in the ranks first so that
/// the test's own environment (a CI job under Slurm, say) cannot leak in.
const LAUNCHER_VARS: &[&str] = &[
    "DINAH_RANK",
    "DINAH_WORLD_SIZE",
    "DINAH_RUN_ID",
    "DINAH_LAUNCHER",
    "DINAH_KEY",
    "DINAH_KEY_FILE",
    "DINAH_COORDINATOR",
    "DINAH_HOSTFILE",
    "DINAH_BIND",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_KVSNAME",
    "PMIX_RANK",
    "PMIX_NAMESPACE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
];

/// "Host" `h`: 127.0.0.(2 + h).
fn host(h: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 2 + u8::try_from(h).unwrap())
}

/// A port free on `ip` now (bound and released: a hostfile names fixed
/// ports).
fn free_port(ip: Ipv4Addr) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What one rank left.
#[derive(Debug)]
struct Finished {
    code: Option<i32>,
    said: Vec<String>,
    stderr: String,
}

/// Starts this binary once per entry of `envs` as the rank program of
/// `test`, with the launcher variables cleared and then `envs[i]` set, and
/// waits for all (at most [`PATIENCE`]; stragglers are killed).
#[expect(
    clippy::disallowed_methods,
    reason = "the test starts its own binary as the ranks, as a launcher would"
)]
fn run_ranks(test: &str, envs: &[Vec<(&str, String)>]) -> Vec<Finished> {
    let children: Vec<Child> = envs
        .iter()
        .map(|vars| {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(RANK_OF, test)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for name in LAUNCHER_VARS {
                command.env_remove(name);
            }
            command.envs(
                vars.iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v))),
            );
            command.spawn().expect("start a rank")
        })
        .collect();
    let until = Instant::now() + PATIENCE;
    let waiters: Vec<_> = children
        .into_iter()
        .map(|mut child| {
            thread::spawn(move || {
                let mut out = String::new();
                let mut err = String::new();
                let mut stdout = child.stdout.take().unwrap();
                let mut stderr = child.stderr.take().unwrap();
                let reader = thread::spawn(move || {
                    let _ = stderr.read_to_string(&mut err);
                    err
                });
                let _ = stdout.read_to_string(&mut out);
                let status = loop {
                    if let Some(status) = child.try_wait().unwrap() {
                        break status;
                    }
                    if Instant::now() > until {
                        let _ = child.kill();
                        break child.wait().unwrap();
                    }
                    thread::sleep(Duration::from_millis(10));
                };
                Finished {
                    code: status.code(),
                    said: out
                        .lines()
                        // libtest may have printed on the same line first.
                        .filter_map(|line| line.split_once(SAID).map(|(_, said)| said))
                        .map(str::to_owned)
                        .collect(),
                    stderr: reader.join().unwrap(),
                }
            })
        })
        .collect();
    waiters.into_iter().map(|w| w.join().unwrap()).collect()
}

/// The rank program: meets the others, sums the ranks with an all-reduce
/// over TCP, shuts down, and says what it saw.
fn sum_ranks() {
    let launch = match LaunchEnv::from_env() {
        Ok(launch) => launch,
        Err(error) => return say(&format!("environment: {error}")),
    };
    let (me, world, run_id) = (launch.rank().get(), launch.world().get(), launch.run_id());
    say(&format!("launcher {}", launch.launcher()));
    say(&format!("run {run_id}"));
    let builder = Runtime::builder(run_id, ProtocolLimits::default(), RuntimeLimits::default())
        .expect("default limits");
    let membership = match launch.rendezvous() {
        Ok(membership) => membership,
        Err(error) => {
            say(&format!("rendezvous: {}", describe(&error)));
            std::process::exit(3);
        }
    };
    say(&format!("addrs {:?}", membership.addrs()));
    let (handle, driver) =
        TcpTransport::connect(membership, builder.hello().unwrap()).expect("the ranks connect");
    let mut runtime = builder.start(handle, driver).unwrap();
    let sum = runtime
        .all_reduce(u64::from(me), |a, b| a + b, Duration::from_secs(60))
        .expect("the all-reduce completes");
    say(&format!("sum {sum} of {world}"));
    let report = runtime
        .shutdown(Duration::from_secs(20))
        .expect("shut down");
    say(&format!("clean {}", report.is_clean()));
}

/// The error's kind, for matching in the test.
fn describe(error: &LaunchError) -> String {
    match error {
        LaunchError::Timeout {
            first_missing,
            missing,
            ..
        } => format!("timeout, first missing {first_missing} of {missing}"),
        other => other.to_string(),
    }
}

/// What `rank` said after `prefix`.
fn said<'a>(finished: &'a [Finished], rank: usize, prefix: &str) -> Vec<&'a str> {
    finished[rank]
        .said
        .iter()
        .filter_map(|line| line.strip_prefix(prefix))
        .collect()
}

/// Checks that every rank of `finished` completed the sum, shut down
/// cleanly, was started by `launcher`, and agreed on the run ID and the
/// address list; returns the list.
fn check_all_summed(finished: &[Finished], launcher: &str) -> String {
    let n = finished.len() as u64;
    let mut lists = BTreeMap::new();
    let mut runs = BTreeMap::new();
    for (rank, f) in finished.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {f:?}\n{}", f.stderr);
        assert_eq!(said(finished, rank, "launcher "), [launcher], "{f:?}");
        assert_eq!(
            said(finished, rank, "sum "),
            [format!("{} of {n}", n * (n - 1) / 2)],
            "{f:?}"
        );
        assert_eq!(said(finished, rank, "clean "), ["true"], "{f:?}");
        *runs.entry(said(finished, rank, "run ")[0]).or_insert(0) += 1;
        *lists.entry(said(finished, rank, "addrs ")[0]).or_insert(0) += 1;
    }
    assert_eq!(runs.len(), 1, "one run ID: {runs:?}");
    assert_eq!(lists.len(), 1, "one address list: {lists:?}");
    lists.into_keys().next().unwrap().to_owned()
}

#[test]
fn slurm_ranks_meet_through_the_coordinator_on_distinct_hosts() {
    const TEST: &str = "slurm_ranks_meet_through_the_coordinator_on_distinct_hosts";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    let coordinator = SocketAddr::from((host(0), free_port(host(0))));
    let envs: Vec<Vec<(&str, String)>> = (0..4)
        .map(|rank| {
            vec![
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_NTASKS", "4".into()),
                ("SLURM_JOB_ID", "4242".into()),
                ("SLURM_STEP_ID", "0".into()),
                ("DINAH_COORDINATOR", coordinator.to_string()),
                ("DINAH_KEY", KEY.into()),
                // One "host" per rank.
                ("DINAH_BIND", host(rank).to_string()),
            ]
        })
        .collect();
    let finished = run_ranks(TEST, &envs);
    let list = check_all_summed(&finished, "Slurm");
    for rank in 0..4 {
        assert!(
            list.contains(&format!("{}:", host(rank))),
            "rank {rank} listens on its own host: {list}"
        );
    }
}

#[test]
fn pmi_ranks_bind_where_they_reach_the_coordinator() {
    const TEST: &str = "pmi_ranks_bind_where_they_reach_the_coordinator";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    // No DINAH_BIND: rank 0 listens on the coordinator's address, the
    // others where they reach it from. The coordinator is named by host
    // name, as on a cluster.
    let port = free_port(Ipv4Addr::LOCALHOST);
    let envs: Vec<Vec<(&str, String)>> = (0..4)
        .map(|rank| {
            vec![
                ("PMI_RANK", rank.to_string()),
                ("PMI_SIZE", "4".into()),
                ("DINAH_COORDINATOR", format!("localhost:{port}")),
                ("DINAH_KEY", KEY.into()),
            ]
        })
        .collect();
    let finished = run_ranks(TEST, &envs);
    let list = check_all_summed(&finished, "PMI");
    assert!(!list.contains("0.0.0.0"), "{list}");
}

#[test]
fn slurm_ranks_read_a_hostfile_of_distinct_hosts() {
    const TEST: &str = "slurm_ranks_read_a_hostfile_of_distinct_hosts";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dinah-hostfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hosts");
    let mut text = String::from("# rank host:port\n");
    for rank in (0..4).rev() {
        let ip = host(rank);
        text.push_str(&format!("{rank} {ip}:{}\n", free_port(ip)));
    }
    std::fs::write(&path, &text).unwrap();
    let envs: Vec<Vec<(&str, String)>> = (0..4)
        .map(|rank| {
            vec![
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_NTASKS", "4".into()),
                ("SLURM_JOB_ID", "77".into()),
                ("DINAH_HOSTFILE", path.display().to_string()),
                ("DINAH_KEY", KEY.into()),
            ]
        })
        .collect();
    let finished = run_ranks(TEST, &envs);
    let _ = std::fs::remove_dir_all(&dir);
    let list = check_all_summed(&finished, "Slurm");
    for rank in 0..4 {
        assert!(list.contains(&format!("{}:", host(rank))), "{list}");
    }
}

#[test]
fn openmpi_ranks_meet_through_the_coordinator() {
    const TEST: &str = "openmpi_ranks_meet_through_the_coordinator";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    let coordinator = SocketAddr::from((host(0), free_port(host(0))));
    let envs: Vec<Vec<(&str, String)>> = (0..4)
        .map(|rank| {
            vec![
                ("OMPI_COMM_WORLD_RANK", rank.to_string()),
                ("OMPI_COMM_WORLD_SIZE", "4".into()),
                ("PMIX_NAMESPACE", "dinah-test".into()),
                ("DINAH_COORDINATOR", coordinator.to_string()),
                ("DINAH_KEY", KEY.into()),
                ("DINAH_BIND", host(rank).to_string()),
            ]
        })
        .collect();
    let finished = run_ranks(TEST, &envs);
    let list = check_all_summed(&finished, "OpenMPI");
    for rank in 0..4 {
        assert!(list.contains(&format!("{}:", host(rank))), "{list}");
    }
}

#[test]
fn a_rank_without_the_key_is_not_let_in() {
    const TEST: &str = "a_rank_without_the_key_is_not_let_in";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    let coordinator = SocketAddr::from((host(0), free_port(host(0))));
    let envs: Vec<Vec<(&str, String)>> = (0..3)
        .map(|rank| {
            let key = if rank == 2 {
                // Another run's key.
                KEY.replace('0', "f")
            } else {
                KEY.to_owned()
            };
            // The coordinator gives up first, so rank 1 hears of it
            // rather than timing out on its own.
            let timeout_ms = [2_000, 20_000, 4_000][rank as usize];
            vec![
                ("DINAH_RANK", rank.to_string()),
                ("DINAH_WORLD_SIZE", "3".into()),
                ("DINAH_COORDINATOR", coordinator.to_string()),
                ("DINAH_KEY", key),
                ("DINAH_LAUNCH_TIMEOUT_MS", timeout_ms.to_string()),
            ]
        })
        .collect();
    let finished = run_ranks(TEST, &envs);
    for f in &finished {
        assert_eq!(f.code, Some(3), "every rendezvous fails: {f:?}");
    }
    // The coordinator never counted rank 2, and rank 2 never got a list.
    assert_eq!(
        said(&finished, 0, "rendezvous: "),
        ["timeout, first missing 2 of 1"],
        "{:?}",
        finished[0]
    );
    assert_eq!(
        said(&finished, 2, "rendezvous: "),
        ["timeout, first missing 2 of 1"],
        "{:?}",
        finished[2]
    );
    // Rank 1 proved the key, and was told the rendezvous timed out.
    assert_eq!(
        said(&finished, 1, "rendezvous: "),
        ["the rendezvous was refused: not every rank reported its address in time"],
        "{:?}",
        finished[1]
    );
}

/// A control-protocol report (kind 1, no proof) claiming `rank` of
/// `world` at 127.0.0.9:9, as `launcher/control.rs` lays it out: what a
/// process without the run key could send a coordinator.
fn unproven_report(rank: u32, world: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"DNRL");
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&world.to_le_bytes());
    body.extend_from_slice(&rank.to_le_bytes());
    body.extend_from_slice(&[4, 127, 0, 0, 9]);
    body.extend_from_slice(&9u16.to_le_bytes());
    let mut frame = u32::try_from(body.len()).unwrap().to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn strangers_at_the_coordinator_do_not_keep_the_ranks_out() {
    const TEST: &str = "strangers_at_the_coordinator_do_not_keep_the_ranks_out";
    if in_rank(TEST, sum_ranks) {
        return;
    }
    let coordinator = SocketAddr::from((host(0), free_port(host(0))));
    let envs: Vec<Vec<(&str, String)>> = (0..3)
        .map(|rank| {
            vec![
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_NTASKS", "3".into()),
                ("DINAH_COORDINATOR", coordinator.to_string()),
                ("DINAH_KEY", KEY.into()),
            ]
        })
        .collect();
    // Strangers: idle connections, garbage, and reports of rank 1 without
    // a proof, from before the coordinator listens until the ranks are
    // done.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = std::sync::Arc::clone(&stop);
        thread::spawn(move || {
            let mut held = Vec::new();
            let mut connected = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(mut stream) =
                    TcpStream::connect_timeout(&coordinator, Duration::from_millis(100))
                {
                    connected += 1;
                    let _ = match connected % 4 {
                        0 => stream.write_all(b"GET / HTTP/1.0\r\n\r\n"),
                        1 => stream.write_all(&[0xff; 4]),
                        2 => stream.write_all(&unproven_report(1, 3)),
                        _ => Ok(()),
                    };
                    held.push(stream);
                    if held.len() > 500 {
                        held.remove(0);
                    }
                } else {
                    thread::sleep(Duration::from_millis(1));
                }
            }
            connected
        })
    };
    let finished = run_ranks(TEST, &envs);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let strangers = flood.join().unwrap();
    let list = check_all_summed(&finished, "Slurm");
    assert!(
        !list.contains("127.0.0.9:9"),
        "an unproven report reached the list: {list}"
    );
    assert!(strangers > 0, "the flood reached the coordinator");
}
