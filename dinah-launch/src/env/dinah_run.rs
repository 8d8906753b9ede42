//! The rendezvous with `dinah-run`: report this rank's address on the
//! control connection, read every rank's, and keep the connection as a
//! lifeline.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::{Rank, WorldSize};

use crate::launch_error::{LaunchError, LaunchOp, LaunchPhase};
use crate::launcher::{ControlError, Message, ReadError, Report, read_message, write_message};

/// The exit code of a rank whose launcher went away (its control
/// connection closed) after the rendezvous.
pub const EXIT_LAUNCHER_GONE: i32 = 75;

/// The first pause before reporting again on a new connection, after the
/// launcher closed the last one without an answer.
const REPORT_AGAIN_MIN: Duration = Duration::from_millis(2);

/// The longest pause between two reports.
const REPORT_AGAIN_MAX: Duration = Duration::from_millis(250);

/// A rank of a `dinah-run` launch, about to meet the launcher.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DinahRun {
    pub(crate) rank: Rank,
    pub(crate) world: WorldSize,
    pub(crate) run_id: u64,
    /// The launcher's control address (`DINAH_LAUNCHER`).
    pub(crate) launcher: SocketAddr,
    pub(crate) timeout: Duration,
}

impl DinahRun {
    /// Reports `listener`'s address to the launcher, waits (at most
    /// `timeout`) for every rank's address, and returns them.
    ///
    /// The control connection then stays open in a background thread as a
    /// lifeline: if it closes, the launcher is gone (it exited or was
    /// killed), and the process exits at once with [`EXIT_LAUNCHER_GONE`],
    /// so no rank outlives its launcher.
    ///
    /// If the launcher closes the connection before answering (a launcher
    /// busy with a flood of strangers' connections may drop this one
    /// before reading it), the rank reports again on a new connection,
    /// pausing 2 ms, then twice as long each time up to 250 ms, until the
    /// timeout; a launcher that refuses the new connection is gone.
    ///
    /// # Errors
    ///
    /// - [`LaunchError::Io`]: connecting, writing or reading failed;
    /// - [`LaunchError::Refused`]: the launcher refused the report or
    ///   aborted the launch (another rank failed, for instance);
    /// - [`LaunchError::LauncherClosed`]: the launcher went away first;
    /// - [`LaunchError::Timeout`] with `LaunchPhase::Rendezvous`;
    /// - [`LaunchError::Protocol`]: a malformed answer.
    pub(crate) fn join(&self, listener: &TcpListener) -> Result<Vec<SocketAddr>, LaunchError> {
        let deadline = Instant::now() + self.timeout;
        let addr = listener.local_addr().map_err(|source| LaunchError::Io {
            op: LaunchOp::BindListener,
            source,
        })?;
        let report = Report {
            run_id: self.run_id,
            world: self.world.get(),
            rank: self.rank.get(),
            addr,
        };
        // A launcher flooded with connections may drop this one before
        // reading the report: report again on a new connection, with a
        // pause that doubles each time, until the deadline. A launcher
        // that is gone refuses the new connection.
        let mut pause = REPORT_AGAIN_MIN;
        let (stream, addrs) = loop {
            let stream = match self.connect(deadline) {
                Err(LaunchError::Io { source, .. })
                    if pause > REPORT_AGAIN_MIN
                        && source.kind() == io::ErrorKind::ConnectionRefused =>
                {
                    return Err(LaunchError::LauncherClosed);
                }
                other => other?,
            };
            match self.exchange(stream, report, deadline) {
                Ok(done) => break done,
                Err(None) if Instant::now() + pause < deadline => {
                    thread::sleep(pause);
                    pause = (pause * 2).min(REPORT_AGAIN_MAX);
                }
                Err(None) => return Err(LaunchError::LauncherClosed),
                Err(Some(error)) => return Err(error),
            }
        };
        watch_launcher(stream)?;
        Ok(addrs)
    }

    /// Sends `report` on `stream` and reads the answer: the members list,
    /// or the error; `Err(None)` if the launcher closed the connection
    /// first.
    fn exchange(
        &self,
        mut stream: TcpStream,
        report: Report,
        deadline: Instant,
    ) -> Result<(TcpStream, Vec<SocketAddr>), Option<LaunchError>> {
        let written = write_message(&mut stream, &Message::Report(report), deadline);
        if let Err(source) = written {
            return Err(super::write_failure(source, || self.timed_out()));
        }
        let error = match read_message(&mut stream, deadline) {
            Ok(Message::Members { run_id, addrs }) => {
                let own = addrs.get(self.rank.index()).copied();
                if run_id == self.run_id
                    && addrs.len() == self.world.get() as usize
                    && own == Some(report.addr)
                {
                    return Ok((stream, addrs));
                }
                LaunchError::Protocol(ControlError::MembersMismatch)
            }
            Ok(Message::Refusal(refusal)) => LaunchError::Refused(refusal),
            Ok(other) => LaunchError::Protocol(ControlError::Unexpected(other.kind())),
            Err(ReadError::Closed) => return Err(None),
            Err(ReadError::TimedOut) => self.timed_out(),
            Err(ReadError::Io(source)) => LaunchError::Io {
                op: LaunchOp::ReadControl,
                source,
            },
            Err(ReadError::Protocol(error)) => LaunchError::Protocol(error),
        };
        Err(Some(error))
    }

    fn connect(&self, deadline: Instant) -> Result<TcpStream, LaunchError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out());
        }
        let stream =
            TcpStream::connect_timeout(&self.launcher, left).map_err(|source| {
                match source.kind() {
                    io::ErrorKind::TimedOut => self.timed_out(),
                    _ => LaunchError::Io {
                        op: LaunchOp::ConnectLauncher,
                        source,
                    },
                }
            })?;
        stream.set_nodelay(true).map_err(|source| LaunchError::Io {
            op: LaunchOp::ConnectLauncher,
            source,
        })?;
        Ok(stream)
    }

    fn timed_out(&self) -> LaunchError {
        LaunchError::Timeout {
            phase: LaunchPhase::Rendezvous,
            after: self.timeout,
            first_missing: self.rank.get(),
            missing: 1,
        }
    }
}

/// Keeps the control connection open on a background thread; when it
/// closes, the launcher is gone and so is the point of this process.
fn watch_launcher(mut stream: TcpStream) -> Result<(), LaunchError> {
    stream
        .set_read_timeout(None)
        .map_err(|source| LaunchError::Io {
            op: LaunchOp::ReadControl,
            source,
        })?;
    thread::Builder::new()
        .name("dinah-launcher-lifeline".to_owned())
        .spawn(move || {
            let mut buf = [0; 64];
            loop {
                match stream.read(&mut buf) {
                    // Nothing is sent after the address list; ignore it.
                    Ok(n) if n > 0 => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    _ => break,
                }
            }
            std::process::exit(EXIT_LAUNCHER_GONE);
        })
        .map(drop)
        .map_err(|source| LaunchError::Io {
            op: LaunchOp::Thread,
            source,
        })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::env::LaunchEnv;
    use crate::env::vars::tests::vars;
    use crate::launch_error::EnvProblem;
    use crate::launcher::{
        DEFAULT_STARTUP_TIMEOUT, ENV_LAUNCH_TIMEOUT_MS, ENV_LAUNCHER, ENV_RANK, ENV_RUN_ID,
        ENV_WORLD_SIZE, Refusal,
    };

    const FULL: [(&str, &str); 5] = [
        (ENV_RANK, "2"),
        (ENV_WORLD_SIZE, "4"),
        (ENV_RUN_ID, "18446744073709551615"),
        (ENV_LAUNCHER, "127.0.0.1:4000"),
        (ENV_LAUNCH_TIMEOUT_MS, "1500"),
    ];

    fn without(name: &str) -> Vec<(&'static str, &'static str)> {
        FULL.iter().copied().filter(|(k, _)| *k != name).collect()
    }

    fn with(name: &str, value: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut pairs = without(name);
        pairs.push((FULL.iter().find(|(k, _)| *k == name).unwrap().0, value));
        pairs
    }

    fn problem(pairs: &[(&str, &str)]) -> (&'static str, EnvProblem) {
        match LaunchEnv::from_lookup(vars(pairs)) {
            Err(LaunchError::Env { var, problem }) => (var, problem),
            other => panic!("expected an environment error, got {other:?}"),
        }
    }

    #[test]
    fn the_launchers_variables_parse() {
        let env = LaunchEnv::from_lookup(vars(&FULL)).unwrap();
        assert_eq!(env.rank().get(), 2);
        assert_eq!(env.world().get(), 4);
        assert_eq!(env.run_id(), u64::MAX);
        assert_eq!(env.launcher(), crate::env::Launcher::DinahRun);
        assert_eq!(
            env.addresses(),
            &crate::env::AddressSource::DinahRun {
                control: "127.0.0.1:4000".parse().unwrap()
            }
        );
        assert_eq!(env.timeout(), Duration::from_millis(1500));
        let default = LaunchEnv::from_lookup(vars(&without(ENV_LAUNCH_TIMEOUT_MS))).unwrap();
        assert_eq!(default.timeout(), DEFAULT_STARTUP_TIMEOUT);
    }

    #[test]
    fn each_bad_variable_is_named() {
        for name in [ENV_RANK, ENV_WORLD_SIZE, ENV_RUN_ID] {
            assert_eq!(problem(&without(name)), (name, EnvProblem::Missing));
        }
        // Without the launcher's address, the rank was started by hand and
        // needs another way to meet the others.
        assert_eq!(
            problem(&without(ENV_LAUNCHER)),
            (crate::env::ENV_COORDINATOR, EnvProblem::Missing)
        );
        assert_eq!(
            problem(&with(ENV_RANK, "4")),
            (ENV_RANK, EnvProblem::Invalid),
            "outside the world"
        );
        assert_eq!(
            problem(&with(ENV_RANK, "-1")),
            (ENV_RANK, EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&with(ENV_WORLD_SIZE, "0")),
            (ENV_WORLD_SIZE, EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&with(ENV_WORLD_SIZE, "5000")),
            (ENV_WORLD_SIZE, EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&with(ENV_RUN_ID, "x")),
            (ENV_RUN_ID, EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&with(ENV_LAUNCHER, "localhost")),
            (ENV_LAUNCHER, EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&with(ENV_LAUNCH_TIMEOUT_MS, "soon")),
            (ENV_LAUNCH_TIMEOUT_MS, EnvProblem::Invalid)
        );
    }

    /// A fake launcher: accepts one connection, checks the report and
    /// answers with `reply(report)`.
    fn fake_launcher(
        reply: impl FnOnce(Report) -> Option<Message> + Send + 'static,
    ) -> (SocketAddr, thread::JoinHandle<Report>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let Message::Report(report) = read_message(&mut stream, deadline).unwrap() else {
                panic!("not a report")
            };
            if let Some(answer) = reply(report) {
                write_message(&mut stream, &answer, deadline).unwrap();
            }
            report
        });
        (addr, handle)
    }

    fn env_for(launcher: SocketAddr, rank: u32, world: u32, timeout: Duration) -> LaunchEnv {
        let world = WorldSize::new(world).unwrap();
        LaunchEnv::for_dinah_run(DinahRun {
            rank: world.rank(rank).unwrap(),
            world,
            run_id: 77,
            launcher,
            timeout,
        })
    }

    #[test]
    fn the_list_becomes_the_membership() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let launcher = listener.local_addr().unwrap();
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        let fake = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let Message::Report(report) = read_message(&mut stream, deadline).unwrap() else {
                panic!("not a report")
            };
            let members = Message::Members {
                run_id: report.run_id,
                addrs: vec![peer, report.addr],
            };
            write_message(&mut stream, &members, deadline).unwrap();
            // The rank now watches this connection as its lifeline: closing
            // it would end the test process, so it stays open.
            std::mem::forget(stream);
            report.addr
        });
        let membership = env_for(launcher, 1, 2, Duration::from_secs(30))
            .rendezvous()
            .unwrap();
        let own = fake.join().unwrap();
        assert_eq!(membership.rank().get(), 1);
        assert_eq!(membership.addrs(), [peer, own]);
        assert_eq!(
            membership.listener().unwrap().local_addr().unwrap(),
            own,
            "the reported listener is kept"
        );
    }

    #[test]
    fn a_rank_dropped_unanswered_reports_again() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let launcher = listener.local_addr().unwrap();
        let fake = thread::spawn(move || {
            // The first two connections are dropped without an answer, as
            // a launcher making room for newer ones would.
            for _ in 0..2 {
                drop(listener.accept().unwrap());
            }
            let (mut stream, _) = listener.accept().unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let Message::Report(report) = read_message(&mut stream, deadline).unwrap() else {
                panic!("not a report")
            };
            let members = Message::Members {
                run_id: report.run_id,
                addrs: vec![report.addr],
            };
            write_message(&mut stream, &members, deadline).unwrap();
            // The lifeline stays open (closing it would end the process).
            std::mem::forget(stream);
        });
        let membership = env_for(launcher, 0, 1, Duration::from_secs(30))
            .rendezvous()
            .expect("the third report gets the list");
        fake.join().unwrap();
        assert_eq!(membership.world().get(), 1);
    }

    #[test]
    fn a_refusal_reaches_the_rank() {
        let (launcher, fake) = fake_launcher(|_| Some(Message::Refusal(Refusal::DuplicateRank)));
        let error = env_for(launcher, 1, 2, Duration::from_secs(30))
            .rendezvous()
            .unwrap_err();
        assert!(
            matches!(error, LaunchError::Refused(Refusal::DuplicateRank)),
            "{error:?}"
        );
        let report = fake.join().unwrap();
        assert_eq!((report.run_id, report.world, report.rank), (77, 2, 1));
        assert!(
            report.addr.ip().is_loopback() && report.addr.port() != 0,
            "the bound listener's address"
        );
    }

    #[test]
    fn a_launcher_that_hangs_up_is_reported() {
        let (launcher, fake) = fake_launcher(|_| None);
        let error = env_for(launcher, 0, 1, Duration::from_secs(30))
            .rendezvous()
            .unwrap_err();
        assert!(matches!(error, LaunchError::LauncherClosed), "{error:?}");
        fake.join().unwrap();
    }

    #[test]
    fn a_list_that_does_not_match_the_report_is_refused() {
        let wrong = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        let (launcher, fake) = fake_launcher(move |report| {
            Some(Message::Members {
                run_id: report.run_id,
                addrs: vec![report.addr, wrong],
            })
        });
        // The list has two entries for a world of three.
        let error = env_for(launcher, 0, 3, Duration::from_secs(30))
            .rendezvous()
            .unwrap_err();
        assert!(
            matches!(error, LaunchError::Protocol(ControlError::MembersMismatch)),
            "{error:?}"
        );
        fake.join().unwrap();
    }

    #[test]
    fn a_silent_launcher_times_the_rendezvous_out() {
        // Accepts (the backlog does) but never answers.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let env = env_for(
            listener.local_addr().unwrap(),
            0,
            1,
            Duration::from_millis(50),
        );
        let error = env.rendezvous().unwrap_err();
        assert!(
            matches!(
                error,
                LaunchError::Timeout {
                    phase: LaunchPhase::Rendezvous,
                    first_missing: 0,
                    missing: 1,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_missing_launcher_is_an_io_error() {
        // Bind and drop: nothing listens on that port now.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let error = env_for(port, 0, 1, Duration::from_secs(30))
            .rendezvous()
            .unwrap_err();
        assert!(
            matches!(
                error,
                LaunchError::Io {
                    op: LaunchOp::ConnectLauncher,
                    ..
                }
            ),
            "{error:?}"
        );
    }
}
