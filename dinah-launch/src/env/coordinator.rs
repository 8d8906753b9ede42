//! The rendezvous of a run that another launcher started: rank 0 is the
//! coordinator.
//!
//! Rank 0 listens on the well-known address every rank is given
//! (`DINAH_COORDINATOR`, `host:port`); every other rank binds its own
//! transport listener, connects to the coordinator and reports its rank
//! and address; once all have, the coordinator answers each with the full
//! list, in rank order, and the connections close. The messages are the
//! control protocol's (`launcher/control.rs`), and the coordinator reads
//! reports as `dinah-run` does (`launcher/arrivals.rs`): without a thread
//! per connection, a short deadline each, so strangers cannot crowd a rank
//! out.
//!
//! With a run key, both sides prove it: the coordinator sends each new
//! connection a fresh nonce, the rank's report carries its own nonce and
//! `HMAC-SHA256(key, "dinah coordinator report" ‖ challenge ‖ report ‖
//! nonce)`, and the list carries `HMAC-SHA256(key, "dinah coordinator
//! members" ‖ challenge ‖ nonce ‖ list)`. A report without a valid proof
//! is dropped unanswered; a list without one fails the rank. The nonces
//! make every tag good for one connection only.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use crate::key::NONCE_LEN;
use crate::key::RunKey;
use crate::launch_error::{LaunchError, LaunchOp, LaunchPhase};
use crate::launcher::arrivals::{Arrivals, Event, Inbound};
use crate::launcher::control::Proof;
use crate::launcher::{
    ControlError, Message, ReadError, Refusal, Report, read_message, write_message,
};

/// The label of a rank's tag over its report.
const REPORT_LABEL: &[u8] = b"dinah coordinator report";

/// The label of the coordinator's tag over the list.
const MEMBERS_LABEL: &[u8] = b"dinah coordinator members";

/// How long one answer may take to write.
const WRITE_LIMIT: Duration = Duration::from_secs(2);

/// The first pause before dialling the coordinator again (it may not
/// listen yet), doubled up to [`DIAL_AGAIN_MAX`].
const DIAL_AGAIN_MIN: Duration = Duration::from_millis(5);

/// The longest pause between two dials.
const DIAL_AGAIN_MAX: Duration = Duration::from_millis(250);

/// What every rank of the rendezvous agrees on.
#[derive(Clone, Copy)]
pub(crate) struct Run<'a> {
    pub(crate) run_id: u64,
    pub(crate) world: u32,
    pub(crate) key: Option<&'a RunKey>,
    /// The whole rendezvous's limit, for the timeout error.
    pub(crate) timeout: Duration,
    pub(crate) deadline: Instant,
}

impl Run<'_> {
    fn timed_out(&self, first_missing: u32, missing: u32) -> LaunchError {
        LaunchError::Timeout {
            phase: LaunchPhase::Rendezvous,
            after: self.timeout,
            first_missing,
            missing,
        }
    }
}

/// The coordinator's address: `host:port`, resolved.
///
/// # Errors
///
/// [`LaunchError::Io`] with [`LaunchOp::ResolveCoordinator`].
pub(crate) fn resolve(coordinator: &str) -> Result<Vec<SocketAddr>, LaunchError> {
    let io = |source| LaunchError::Io {
        op: LaunchOp::ResolveCoordinator,
        source,
    };
    let addrs: Vec<SocketAddr> = coordinator.to_socket_addrs().map_err(io)?.collect();
    if addrs.is_empty() {
        return Err(io(io::Error::new(
            io::ErrorKind::NotFound,
            "the coordinator's host has no address",
        )));
    }
    Ok(addrs)
}

/// Rank 0's side: binds the coordinator's listener on the first of
/// `coordinator`'s addresses that binds.
///
/// # Errors
///
/// [`LaunchError::Io`] with [`LaunchOp::BindCoordinator`] (the last
/// address's error).
pub(crate) fn listen(coordinator: &[SocketAddr]) -> Result<TcpListener, LaunchError> {
    let mut last = io::Error::from(io::ErrorKind::AddrNotAvailable);
    for &addr in coordinator {
        match crate::listener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(LaunchError::Io {
        op: LaunchOp::BindCoordinator,
        source: last,
    })
}

/// A rank whose report was taken, waiting for the list.
struct Waiting {
    stream: TcpStream,
    /// (challenge, the rank's nonce) when the run has a key.
    nonces: Option<([u8; NONCE_LEN], [u8; NONCE_LEN])>,
}

/// Rank 0's side: serves the rendezvous on `listener` with `own` as rank
/// 0's address, until every rank reported (and got the list) or the
/// deadline. Returns the list and how many connections were refused.
///
/// # Errors
///
/// [`LaunchError::Timeout`] naming the first rank that did not report
/// (those that did are refused with [`Refusal::StartupTimeout`]);
/// [`LaunchError::Io`] if the listener fails.
pub(crate) fn serve(
    listener: &TcpListener,
    own: SocketAddr,
    run: Run<'_>,
) -> Result<(Vec<SocketAddr>, u32), LaunchError> {
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; run.world as usize];
    addrs[0] = Some(own);
    let mut waiting: Vec<Option<Waiting>> = (0..run.world).map(|_| None).collect();
    let mut arrivals = Arrivals::new(run.key.is_some());
    let mut refused = 0;
    let mut events = Vec::new();
    while addrs.iter().any(Option::is_none) {
        if Instant::now() >= run.deadline {
            let missing: Vec<u32> = (0..run.world)
                .filter(|&rank| addrs[rank as usize].is_none())
                .collect();
            for mut rank in waiting.into_iter().flatten() {
                let refusal = Message::Refusal(Refusal::StartupTimeout);
                let _ = write_message(&mut rank.stream, &refusal, Instant::now() + WRITE_LIMIT);
            }
            return Err(run.timed_out(missing[0], missing.len() as u32));
        }
        let busy = arrivals.pass(listener, &mut events);
        for event in events.drain(..) {
            let inbound = match event {
                Event::Inbound(inbound) => inbound,
                Event::ListenerFailed(source) => {
                    return Err(LaunchError::Io {
                        op: LaunchOp::AcceptControl,
                        source,
                    });
                }
            };
            if !admit(inbound, run, &mut addrs, &mut waiting) {
                refused += 1;
            }
        }
        if !busy {
            thread::sleep(Duration::from_millis(1));
        }
    }
    let addrs: Vec<SocketAddr> = addrs.into_iter().flatten().collect();
    for rank in waiting.into_iter().flatten() {
        let Waiting { mut stream, nonces } = rank;
        let members = match (run.key, nonces) {
            (Some(key), Some((challenge, nonce))) => {
                let list = Message::Members {
                    run_id: run.run_id,
                    addrs: addrs.clone(),
                }
                .encode();
                Message::ProvenMembers {
                    run_id: run.run_id,
                    addrs: addrs.clone(),
                    tag: key.seal(MEMBERS_LABEL, &[&challenge, &nonce, &list]),
                }
            }
            _ => Message::Members {
                run_id: run.run_id,
                addrs: addrs.clone(),
            },
        };
        // Each rank has its own time to take the list, so a slow one costs
        // the others that time at most; a rank that cannot take it fails
        // on its own side.
        let _ = write_message(&mut stream, &members, Instant::now() + WRITE_LIMIT);
    }
    Ok((addrs, refused))
}

/// Takes a report that belongs to the run; returns whether it did.
fn admit(
    inbound: Inbound,
    run: Run<'_>,
    addrs: &mut [Option<SocketAddr>],
    waiting: &mut [Option<Waiting>],
) -> bool {
    let Inbound {
        mut stream,
        challenge,
        result,
        ..
    } = inbound;
    let (report, nonces) = match (run.key, challenge, result) {
        (None, _, Ok(Message::Report(report))) => (report, None),
        (Some(key), Some(challenge), Ok(Message::ProvenReport(report, proof))) => {
            let body = Message::Report(report).encode();
            if !key.opens(REPORT_LABEL, &[&challenge, &body, &proof.nonce], &proof.tag) {
                return false;
            }
            (report, Some((challenge, proof.nonce)))
        }
        // Anything else is a stranger's (or a rank without the key):
        // nothing is said to it.
        _ => return false,
    };
    let refusal = if report.run_id != run.run_id {
        Some(Refusal::RunMismatch)
    } else if report.world != run.world {
        Some(Refusal::WorldMismatch {
            expected: run.world,
        })
    } else if report.rank >= run.world {
        Some(Refusal::RankOutOfRange { world: run.world })
    } else if report.rank == 0 {
        // Rank 0 is the coordinator itself.
        Some(Refusal::DuplicateRank)
    } else {
        // The same rank and address again: it lost its first connection
        // and reports anew, and the new connection replaces the old.
        addrs[report.rank as usize]
            .is_some_and(|known| known != report.addr)
            .then_some(Refusal::DuplicateRank)
    };
    if let Some(refusal) = refusal {
        let _ = write_message(
            &mut stream,
            &Message::Refusal(refusal),
            Instant::now() + WRITE_LIMIT,
        );
        return false;
    }
    addrs[report.rank as usize] = Some(report.addr);
    waiting[report.rank as usize] = Some(Waiting { stream, nonces });
    true
}

/// Any other rank's side: dials the coordinator (again and again while it
/// does not listen yet), binds this rank's listener on `bind` (or, when
/// `None`, on the address this host reaches the coordinator from) unless
/// `listener` is given, reports, and waits for the list. Returns the
/// listener and the list.
///
/// # Errors
///
/// - [`LaunchError::Timeout`] if the coordinator did not answer in time;
/// - [`LaunchError::Refused`] if it refused this rank;
/// - [`LaunchError::Protocol`] for a malformed or unproven answer;
/// - [`LaunchError::Io`] if a socket failed otherwise.
pub(crate) fn join(
    coordinator: &[SocketAddr],
    rank: u32,
    bind: Option<IpAddr>,
    mut listener: Option<TcpListener>,
    run: Run<'_>,
) -> Result<(TcpListener, Vec<SocketAddr>), LaunchError> {
    let mut pause = DIAL_AGAIN_MIN;
    loop {
        if let Some(stream) = dial(coordinator, run)? {
            let bound = match listener.take() {
                Some(bound) => bound,
                None => bind_near(&stream, bind)?,
            };
            let addr = advertised(&bound, &stream)?;
            let report = Report {
                run_id: run.run_id,
                world: run.world,
                rank,
                addr,
            };
            match exchange(stream, report, run) {
                Ok(addrs) => return Ok((bound, addrs)),
                // Closed before the answer (the coordinator dropped the
                // connection, or is still starting): report again, from
                // the same listener so that the address stays the same.
                Err(None) => listener = Some(bound),
                Err(Some(error)) => return Err(error),
            }
        }
        if Instant::now() + pause >= run.deadline {
            return Err(run.timed_out(rank, 1));
        }
        thread::sleep(pause);
        pause = (pause * 2).min(DIAL_AGAIN_MAX);
    }
}

/// One connection to the coordinator; `None` if it does not listen (yet).
fn dial(coordinator: &[SocketAddr], run: Run<'_>) -> Result<Option<TcpStream>, LaunchError> {
    for addr in coordinator {
        let left = run.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match TcpStream::connect_timeout(addr, left.min(Duration::from_secs(1))) {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(|source| LaunchError::Io {
                    op: LaunchOp::ConnectCoordinator,
                    source,
                })?;
                return Ok(Some(stream));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(source) => {
                return Err(LaunchError::Io {
                    op: LaunchOp::ConnectCoordinator,
                    source,
                });
            }
        }
    }
    Ok(None)
}

/// This rank's listener on `bind`, or on the local address of `stream`
/// (the interface that reaches the coordinator), port chosen by the
/// system.
fn bind_near(stream: &TcpStream, bind: Option<IpAddr>) -> Result<TcpListener, LaunchError> {
    let io = |source| LaunchError::Io {
        op: LaunchOp::BindListener,
        source,
    };
    let ip = match bind {
        Some(ip) => ip,
        None => stream.local_addr().map_err(io)?.ip(),
    };
    crate::listener::bind(SocketAddr::new(ip, 0)).map_err(io)
}

/// The address to report for `listener`: its own, or, if it listens on
/// every interface, the one `stream` reaches the coordinator from.
pub(crate) fn advertised(
    listener: &TcpListener,
    stream: &TcpStream,
) -> Result<SocketAddr, LaunchError> {
    let io = |source| LaunchError::Io {
        op: LaunchOp::BindListener,
        source,
    };
    let own = listener.local_addr().map_err(io)?;
    if own.ip().is_unspecified() {
        let near = stream.local_addr().map_err(io)?;
        return Ok(SocketAddr::new(near.ip(), own.port()));
    }
    Ok(own)
}

/// Sends `report` (proven, with a key) and reads the list; `Err(None)` if
/// the coordinator closed the connection first.
fn exchange(
    mut stream: TcpStream,
    report: Report,
    run: Run<'_>,
) -> Result<Vec<SocketAddr>, Option<LaunchError>> {
    let fail = |error: ReadError, op| match error {
        ReadError::Closed => None,
        ReadError::TimedOut => Some(run.timed_out(report.rank, 1)),
        ReadError::Io(source) => Some(LaunchError::Io { op, source }),
        ReadError::Protocol(error) => Some(LaunchError::Protocol(error)),
    };
    let mut nonces = None;
    let message = match run.key {
        None => Message::Report(report),
        Some(key) => {
            let challenge = match read_message(&mut stream, run.deadline) {
                Ok(Message::Challenge(challenge)) => challenge,
                Ok(Message::Refusal(refusal)) => return Err(Some(LaunchError::Refused(refusal))),
                Ok(other) => {
                    let error = ControlError::Unexpected(other.kind());
                    return Err(Some(LaunchError::Protocol(error)));
                }
                Err(error) => return Err(fail(error, LaunchOp::ReadControl)),
            };
            let nonce = crate::key::nonce().map_err(|source| {
                Some(LaunchError::Io {
                    op: LaunchOp::MakeKey,
                    source,
                })
            })?;
            let body = Message::Report(report).encode();
            let tag = key.seal(REPORT_LABEL, &[&challenge, &body, &nonce]);
            nonces = Some((challenge, nonce));
            Message::ProvenReport(report, Proof { nonce, tag })
        }
    };
    if let Err(source) = write_message(&mut stream, &message, run.deadline) {
        return Err(super::write_failure(source, || {
            run.timed_out(report.rank, 1)
        }));
    }
    let (run_id, addrs) = match (read_message(&mut stream, run.deadline), run.key, nonces) {
        (Ok(Message::Members { run_id, addrs }), None, _) => (run_id, addrs),
        (
            Ok(Message::ProvenMembers { run_id, addrs, tag }),
            Some(key),
            Some((challenge, nonce)),
        ) => {
            let list = Message::Members {
                run_id,
                addrs: addrs.clone(),
            }
            .encode();
            if !key.opens(MEMBERS_LABEL, &[&challenge, &nonce, &list], &tag) {
                return Err(Some(LaunchError::Protocol(ControlError::Unproven)));
            }
            (run_id, addrs)
        }
        (Ok(Message::Refusal(refusal)), ..) => return Err(Some(LaunchError::Refused(refusal))),
        (Ok(other), ..) => {
            return Err(Some(LaunchError::Protocol(ControlError::Unexpected(
                other.kind(),
            ))));
        }
        (Err(error), ..) => return Err(fail(error, LaunchOp::ReadControl)),
    };
    if run_id != run.run_id
        || addrs.len() != run.world as usize
        || addrs.get(report.rank as usize) != Some(&report.addr)
    {
        return Err(Some(LaunchError::Protocol(ControlError::MembersMismatch)));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn run(key: Option<&RunKey>, world: u32, timeout: Duration) -> Run<'_> {
        Run {
            run_id: 5,
            world,
            key,
            timeout,
            deadline: Instant::now() + timeout,
        }
    }

    /// A coordinator that answers the first report with `answer`.
    fn fake(
        answer: impl FnOnce(Report, [u8; NONCE_LEN], Proof) -> Message + Send + 'static,
    ) -> (SocketAddr, thread::JoinHandle<()>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let challenge = [7; NONCE_LEN];
            write_message(&mut stream, &Message::Challenge(challenge), deadline).unwrap();
            let Ok(Message::ProvenReport(report, proof)) = read_message(&mut stream, deadline)
            else {
                panic!("not a proven report")
            };
            let reply = answer(report, challenge, proof);
            write_message(&mut stream, &reply, deadline).unwrap();
        });
        (addr, handle)
    }

    #[test]
    fn a_list_proven_with_the_key_is_taken_and_any_other_is_not() {
        let key = RunKey::from_bytes([3; 32]);
        let server_key = key.clone();
        let (addr, server) = fake(move |report, challenge, proof| {
            let body = Message::Report(report).encode();
            assert!(
                server_key.opens(REPORT_LABEL, &[&challenge, &body, &proof.nonce], &proof.tag),
                "the rank proves the key over its report and both nonces"
            );
            let addrs = vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 1)), report.addr];
            let list = Message::Members {
                run_id: 5,
                addrs: addrs.clone(),
            }
            .encode();
            Message::ProvenMembers {
                run_id: 5,
                tag: server_key.seal(MEMBERS_LABEL, &[&challenge, &proof.nonce, &list]),
                addrs,
            }
        });
        let (listener, addrs) = join(
            &[addr],
            1,
            None,
            None,
            run(Some(&key), 2, Duration::from_secs(30)),
        )
        .expect("the proven list");
        server.join().unwrap();
        assert_eq!(addrs[1], listener.local_addr().unwrap());

        // A coordinator with another key.
        let (addr, server) = fake(move |report, challenge, proof| {
            let addrs = vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 1)), report.addr];
            let list = Message::Members {
                run_id: 5,
                addrs: addrs.clone(),
            }
            .encode();
            let other = RunKey::from_bytes([4; 32]);
            Message::ProvenMembers {
                run_id: 5,
                tag: other.seal(MEMBERS_LABEL, &[&challenge, &proof.nonce, &list]),
                addrs,
            }
        });
        let error = join(
            &[addr],
            1,
            None,
            None,
            run(Some(&key), 2, Duration::from_secs(30)),
        )
        .unwrap_err();
        server.join().unwrap();
        assert!(
            matches!(error, LaunchError::Protocol(ControlError::Unproven)),
            "{error:?}"
        );
    }

    #[test]
    fn a_coordinator_that_never_answers_times_the_rank_out() {
        // Listening (the backlog takes the connection and the report) but
        // never accepting.
        let silent = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = silent.local_addr().unwrap();
        let error = join(
            &[addr],
            3,
            None,
            None,
            run(None, 4, Duration::from_millis(200)),
        )
        .unwrap_err();
        assert!(
            matches!(
                error,
                LaunchError::Timeout {
                    phase: LaunchPhase::Rendezvous,
                    first_missing: 3,
                    missing: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        drop(silent);
    }

    #[test]
    fn the_coordinator_refuses_a_second_rank_zero_and_another_run() {
        let listener = listen(&[SocketAddr::from((Ipv4Addr::LOCALHOST, 0))]).unwrap();
        let addr = listener.local_addr().unwrap();
        let own = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
        let server = thread::spawn(move || {
            serve(&listener, own, run(None, 2, Duration::from_secs(30))).map(|(a, _)| a)
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let ask = |rank, run_id| {
            let mut stream = TcpStream::connect(addr).unwrap();
            let report = Report {
                run_id,
                world: 2,
                rank,
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 10 + rank as u16)),
            };
            write_message(&mut stream, &Message::Report(report), deadline).unwrap();
            read_message(&mut stream, deadline).unwrap()
        };
        assert_eq!(ask(0, 5), Message::Refusal(Refusal::DuplicateRank));
        assert_eq!(ask(1, 6), Message::Refusal(Refusal::RunMismatch));
        let members = ask(1, 5);
        let addrs = server.join().unwrap().unwrap();
        assert_eq!(addrs, [own, SocketAddr::from((Ipv4Addr::LOCALHOST, 11))]);
        assert_eq!(members, Message::Members { run_id: 5, addrs });
    }
}
