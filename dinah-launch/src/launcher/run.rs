//! The supervision loop: spawn, rendezvous, watch, kill, reap.
//!
//! One thread (the caller's) owns every `Child` and polls: it accepts
//! control connections (the listener is non-blocking) and reads their
//! reports without blocking, each under its own short deadline (see
//! `arrivals.rs`: strangers cannot crowd the ranks out), reaps
//! exited ranks with `try_wait`, sends the address list once every rank
//! has reported, and enforces the deadlines. Output is pumped by two
//! threads per rank. Nothing here waits without a deadline: the loop ends
//! when every rank is reaped, or a bounded time after the kill.

use std::collections::hash_map::RandomState;
use std::ffi::OsString;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

mod rejections;
mod rendezvous;

use super::arrivals::Arrivals;
use rejections::Rejections;

use super::process::{self, SpawnSpec};
use super::{
    ENV_LAUNCH_TIMEOUT_MS, ENV_LAUNCHER, ENV_RANK, ENV_RUN_ID, ENV_WORLD_SIZE, ExitKind,
    Interrupts, LaunchConfig, LaunchEvent, LaunchReport, MAX_RANKS, Message, OutputSink,
    RankReport, Refusal, Stream, output, write_message,
};
use crate::env::ENV_BIND;
use crate::key::{ENV_KEY, RunKey};
use crate::launch_error::{LaunchError, LaunchOp, LaunchPhase};

/// How often the loop looks at the ranks before the rendezvous.
const STARTUP_TICK: Duration = Duration::from_millis(1);
/// How often it looks after the rendezvous (only exits matter then).
const RUN_TICK: Duration = Duration::from_millis(20);
/// How long killed ranks get to be reaped before the launcher gives up.
const REAP_GRACE: Duration = Duration::from_secs(5);
/// How long the output pumps get to reach the end of their pipes.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);
/// The bound on writing one control message.
const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// Starts `config.ranks` copies of the program and supervises them to the
/// end (see the [module docs](super)); output goes to `sink`.
///
/// Returns when every rank has exited, or a few seconds after the launcher
/// killed what was left; never later than the run timeout plus those few
/// seconds.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use dinah_core::WorldSize;
/// use dinah_launch::launcher::{LaunchConfig, PrefixedStdio, launch};
///
/// let config = LaunchConfig::new(WorldSize::new(4)?, "./my_rank_program").timeout(Duration::from_secs(60));
/// let report = launch(&config, Arc::new(PrefixedStdio));
/// for rank in report.ranks() {
///     println!("rank {}: pid {:?}, {:?}", rank.rank, rank.pid, rank.exit);
/// }
/// if let Some(error) = report.error() {
///     eprintln!("the run failed: {error}");
/// }
/// # Ok::<(), dinah_core::IdError>(())
/// ```
pub fn launch(config: &LaunchConfig, sink: Arc<dyn OutputSink>) -> LaunchReport {
    launch_until(config, sink, &Interrupts::new())
}

/// [`launch`], ended early by `interrupts`: the first interrupt is passed
/// on to the process group of every rank still running, which then has
/// [`LaunchConfig::interrupt_grace`] to exit before it is killed; a second
/// interrupt kills at once. The run then fails with
/// [`LaunchError::Interrupted`] (unless it had failed before).
///
/// [`LaunchConfig::interrupt_grace`]: super::LaunchConfig#structfield.interrupt_grace
pub fn launch_until(
    config: &LaunchConfig,
    sink: Arc<dyn OutputSink>,
    interrupts: &Interrupts,
) -> LaunchReport {
    let world = config.ranks.get();
    let run_id = config.run_id.unwrap_or_else(random_run_id);
    let mut report = LaunchReport {
        run_id,
        control: None,
        ranks: (0..world.min(MAX_RANKS)).map(RankReport::new).collect(),
        error: None,
        rejected_connections: 0,
    };
    if world > MAX_RANKS {
        report.error = Some(LaunchError::TooManyRanks {
            requested: world,
            max: MAX_RANKS,
        });
        return report;
    }
    let (listener, control) = match bind_control() {
        Ok(bound) => bound,
        Err(source) => {
            report.error = Some(LaunchError::Io {
                op: LaunchOp::BindControl,
                source,
            });
            return report;
        }
    };
    let key = match RunKey::generate() {
        Ok(key) => key,
        Err(source) => {
            report.error = Some(LaunchError::Io {
                op: LaunchOp::MakeKey,
                source,
            });
            return report;
        }
    };
    report.control = Some(control);
    sink.event(&LaunchEvent::Listening { control, run_id });

    let mut supervisor = Supervisor::new(config, &sink, report, key, interrupts);
    let (pump_done, pumps_done) = mpsc::channel();
    let mut pumps = 0;
    for rank in 0..world {
        // Interrupted while starting: start no more; the loop below passes
        // the signal on to those already running.
        let (interrupted, signal) = interrupts.seen();
        if interrupted > 0 {
            supervisor.fail(
                LaunchError::Interrupted { signal },
                Refusal::Aborted,
                config.interrupt_grace,
            );
            break;
        }
        match supervisor.spawn_rank(rank, control, &pump_done) {
            Ok(started) => pumps += started,
            Err((error, started)) => {
                pumps += started;
                supervisor.fail(error, Refusal::RankFailed { rank }, Duration::ZERO);
                break;
            }
        }
    }
    drop(pump_done);
    supervisor.supervise(&listener);
    drop(listener);
    // The pipes close when the ranks (and whatever they started) are gone;
    // a grandchild that survives its rank must not hold the launcher.
    let drain = Instant::now() + OUTPUT_DRAIN;
    for _ in 0..pumps {
        if pumps_done
            .recv_timeout(drain.saturating_duration_since(Instant::now()))
            .is_err()
        {
            break;
        }
    }
    supervisor.report
}

/// A run ID that keeps concurrent runs apart: the standard library's
/// per-process random hash keys, mixed with the time and the pid.
fn random_run_id() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    hasher.finish()
}

fn bind_control() -> io::Result<(TcpListener, SocketAddr)> {
    let listener = crate::listener::bind((Ipv4Addr::LOCALHOST, 0).into())?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

struct Supervisor<'a> {
    config: &'a LaunchConfig,
    sink: &'a Arc<dyn OutputSink>,
    world: u32,
    run_deadline: Instant,
    startup_deadline: Instant,
    report: LaunchReport,
    /// Unreaped ranks.
    children: Vec<Option<Child>>,
    /// Connections of ranks that reported and wait for the list.
    waiting: Vec<Option<TcpStream>>,
    /// Connections of ranks that got the list: open until the launcher
    /// ends, so each rank knows the launcher is alive.
    lifelines: Vec<TcpStream>,
    rendezvous_done: bool,
    /// The first rank that exited (with 0) without reporting.
    exited_unreported: Option<(u32, ExitKind)>,
    /// What late reports are told once the run failed.
    abort: Option<Refusal>,
    kill_at: Option<Instant>,
    killed_at: Option<Instant>,
    /// Control connections whose report is awaited.
    arrivals: Arrivals,
    /// The run's key, handed to every rank in [`ENV_KEY`].
    key: RunKey,
    /// The signals the launcher was sent, and how many of them were acted on.
    interrupts: &'a Interrupts,
    interrupts_handled: u32,
    /// Refused connections not yet reported.
    rejections: Rejections,
}

impl<'a> Supervisor<'a> {
    fn new(
        config: &'a LaunchConfig,
        sink: &'a Arc<dyn OutputSink>,
        report: LaunchReport,
        key: RunKey,
        interrupts: &'a Interrupts,
    ) -> Self {
        let world = config.ranks.get();
        let started = Instant::now();
        Self {
            config,
            sink,
            world,
            run_deadline: started + config.timeout,
            startup_deadline: started + config.effective_startup_timeout(),
            report,
            children: (0..world).map(|_| None).collect(),
            waiting: (0..world).map(|_| None).collect(),
            lifelines: Vec::new(),
            rendezvous_done: false,
            exited_unreported: None,
            abort: None,
            kill_at: None,
            killed_at: None,
            arrivals: Arrivals::new(false),
            key,
            interrupts,
            interrupts_handled: 0,
            rejections: Rejections::new(started),
        }
    }

    /// Starts `rank` and its two output pumps; returns how many pumps
    /// started (also with the error).
    fn spawn_rank(
        &mut self,
        rank: u32,
        control: SocketAddr,
        done: &Sender<()>,
    ) -> Result<usize, (LaunchError, usize)> {
        let timeout_ms = self
            .config
            .effective_startup_timeout()
            .as_millis()
            .to_string();
        let mut env = self.config.env.clone();
        env.extend([
            (OsString::from(ENV_RANK), OsString::from(rank.to_string())),
            (
                OsString::from(ENV_WORLD_SIZE),
                OsString::from(self.world.to_string()),
            ),
            (
                OsString::from(ENV_RUN_ID),
                OsString::from(self.report.run_id.to_string()),
            ),
            (
                OsString::from(ENV_LAUNCHER),
                OsString::from(control.to_string()),
            ),
            (
                OsString::from(ENV_LAUNCH_TIMEOUT_MS),
                OsString::from(timeout_ms),
            ),
            (OsString::from(ENV_KEY), OsString::from(self.key.to_hex())),
        ]);
        if let Some(host) = self.config.host_of(rank) {
            env.push((OsString::from(ENV_BIND), OsString::from(host.to_string())));
        }
        let spec = SpawnSpec {
            program: &self.config.program,
            args: &self.config.args,
            env: &env,
        };
        let mut child = process::spawn(&spec).map_err(|source| {
            (
                LaunchError::Spawn {
                    rank,
                    program: self.config.program.clone(),
                    source,
                },
                0,
            )
        })?;
        let pid = child.id();
        self.report.ranks[rank as usize].pid = Some(pid);
        self.sink.event(&LaunchEvent::Spawned { rank, pid });
        let pipes = [
            child
                .stdout
                .take()
                .map(|out| (Stream::Stdout, Box::new(out) as Box<dyn io::Read + Send>)),
            child
                .stderr
                .take()
                .map(|err| (Stream::Stderr, Box::new(err) as Box<dyn io::Read + Send>)),
        ];
        self.children[rank as usize] = Some(child);
        let mut started = 0;
        for (stream, pipe) in pipes.into_iter().flatten() {
            let (sink, done) = (Arc::clone(self.sink), done.clone());
            thread::Builder::new()
                .name(format!("dinah-run-output-{rank}"))
                .spawn(move || output::pump(pipe, rank, stream, &*sink, &done))
                .map_err(|source| {
                    (
                        LaunchError::Io {
                            op: LaunchOp::Thread,
                            source,
                        },
                        started,
                    )
                })?;
            started += 1;
        }
        Ok(started)
    }

    /// Records the run's first failure: ranks waiting for the list are
    /// refused, and every rank is killed after `grace` (at the latest when
    /// the run timeout passes).
    fn fail(&mut self, error: LaunchError, refusal: Refusal, grace: Duration) {
        if self.report.error.is_some() {
            return;
        }
        self.report.error = Some(error);
        self.abort = Some(refusal);
        for mut stream in self.waiting.iter_mut().filter_map(Option::take) {
            let _ = write_message(
                &mut stream,
                &Message::Refusal(refusal),
                Instant::now() + WRITE_LIMIT,
            );
        }
        self.kill_at = Some((Instant::now() + grace).min(self.run_deadline));
    }

    fn supervise(&mut self, listener: &TcpListener) {
        loop {
            let busy = self.accept(listener);
            if !busy {
                let tick = if self.rendezvous_done && self.arrivals.len() == 0 {
                    RUN_TICK
                } else {
                    STARTUP_TICK
                };
                thread::sleep(tick);
            }
            self.reap();
            self.rendezvous();
            let now = Instant::now();
            self.check_interrupts(now);
            if let Some(event) = self.rejections.summary(now, false) {
                self.sink.event(&event);
            }
            self.check_deadlines(now);
            if self.children.iter().all(Option::is_none) {
                break;
            }
            if self
                .killed_at
                .is_some_and(|killed| now >= killed + REAP_GRACE)
            {
                break;
            }
        }
        self.lifelines.clear();
        if let Some(event) = self.rejections.summary(Instant::now(), true) {
            self.sink.event(&event);
        }
    }

    /// Acts on new interrupts: the first is passed on to every rank still
    /// running, which then has the interrupt grace to exit; a second one
    /// kills them now.
    fn check_interrupts(&mut self, now: Instant) {
        let (count, signal) = self.interrupts.seen();
        if count == self.interrupts_handled {
            return;
        }
        if self.children.iter().all(Option::is_none) {
            // Every rank has exited: the run is over, the signal too late
            // to change it.
            self.interrupts_handled = count;
            return;
        }
        if self.interrupts_handled == 0 {
            let mut ranks = 0;
            for child in self.children.iter_mut().flatten() {
                process::signal_group(child, signal);
                ranks += 1;
            }
            self.sink.event(&LaunchEvent::Forwarded { signal, ranks });
            let grace = self.config.interrupt_grace;
            self.fail(LaunchError::Interrupted { signal }, Refusal::Aborted, grace);
            // A run that had failed already keeps its error and its own
            // kill time, if that comes sooner.
            let at = (now + grace).min(self.run_deadline);
            self.kill_at = Some(self.kill_at.map_or(at, |kill_at| kill_at.min(at)));
        }
        if count >= 2 {
            self.kill_at = Some(now);
        }
        self.interrupts_handled = count;
    }

    fn reap(&mut self) {
        for rank in 0..self.world {
            let Some(child) = &mut self.children[rank as usize] else {
                continue;
            };
            let exit = match child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => ExitKind::from_status(status),
                Err(source) => {
                    // Cannot happen for a child we own; never leave it
                    // running unwatched.
                    process::kill_group(child);
                    self.report.ranks[rank as usize].killed = true;
                    self.children[rank as usize] = None;
                    let refusal = Refusal::RankFailed { rank };
                    self.fail(
                        LaunchError::Io {
                            op: LaunchOp::Wait { rank },
                            source,
                        },
                        refusal,
                        Duration::ZERO,
                    );
                    continue;
                }
            };
            self.children[rank as usize] = None;
            self.report.ranks[rank as usize].exit = Some(exit);
            self.sink.event(&LaunchEvent::Exited { rank, exit });
            if !exit.success() {
                self.fail(
                    LaunchError::RankFailed { rank, exit },
                    Refusal::RankFailed { rank },
                    self.config.grace,
                );
            } else if !self.rendezvous_done && self.report.ranks[rank as usize].addr.is_none() {
                self.exited_unreported.get_or_insert((rank, exit));
                if self.waiting.iter().any(Option::is_some) {
                    let error = LaunchError::ExitedBeforeReport { rank, exit };
                    self.fail(error, Refusal::RankExited { rank }, self.config.grace);
                }
            }
        }
    }

    fn check_deadlines(&mut self, now: Instant) {
        if !self.rendezvous_done && now >= self.startup_deadline {
            let missing: Vec<u32> = (0..self.world)
                .filter(|&rank| {
                    self.children[rank as usize].is_some()
                        && self.report.ranks[rank as usize].addr.is_none()
                })
                .collect();
            if let Some(&first_missing) = missing.first() {
                let error = LaunchError::Timeout {
                    phase: LaunchPhase::Startup,
                    after: self.config.effective_startup_timeout(),
                    first_missing,
                    missing: missing.len() as u32,
                };
                self.fail(error, Refusal::StartupTimeout, Duration::ZERO);
            }
        }
        if now >= self.run_deadline {
            let running: Vec<u32> = (0..self.world)
                .filter(|&rank| self.children[rank as usize].is_some())
                .collect();
            if let Some(&first_missing) = running.first() {
                let error = LaunchError::Timeout {
                    phase: LaunchPhase::Run,
                    after: self.config.timeout,
                    first_missing,
                    missing: running.len() as u32,
                };
                self.fail(error, Refusal::Aborted, Duration::ZERO);
            }
        }
        if self.killed_at.is_none() && self.kill_at.is_some_and(|at| now >= at) {
            self.kill_all(now);
        }
    }

    fn kill_all(&mut self, now: Instant) {
        for rank in 0..self.world {
            if let Some(child) = &mut self.children[rank as usize] {
                process::kill_group(child);
                self.report.ranks[rank as usize].killed = true;
                self.sink.event(&LaunchEvent::Killed { rank });
            }
        }
        self.killed_at = Some(now);
    }
}

#[cfg(test)]
mod tests;
