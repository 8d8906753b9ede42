//! A rank's side of a launch: who am I, and where is everyone else?
//!
//! [`LaunchEnv::from_env`] reads the rank and the world size from whichever
//! launcher started the process (`vars.rs`), and how the ranks learn each
//! other's addresses ([`AddressSource`]): from `dinah-run` (`dinah_run.rs`),
//! from rank 0 acting as the coordinator (`coordinator.rs`), or from a
//! static hostfile (`hostfile.rs`). [`LaunchEnv::rendezvous`] then binds
//! this rank's listener and returns a [`Rendezvous`]: what a transport
//! needs to connect (`dinah_tcp::Membership` is made from it).

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use dinah_core::{Rank, WorldSize};

use crate::key::RunKey;
use crate::launch_error::{EnvProblem, LaunchError, LaunchOp};
use crate::launcher::{DEFAULT_STARTUP_TIMEOUT, ENV_LAUNCH_TIMEOUT_MS, ENV_LAUNCHER};

mod coordinator;
mod dinah_run;
mod hostfile;
pub(crate) mod vars;

use dinah_run::DinahRun;
pub use dinah_run::EXIT_LAUNCHER_GONE;
pub use hostfile::HostfileError;
pub use vars::Launcher;
use vars::{Vars, env_error};

/// The environment variable naming rank 0's `host:port`, where it serves
/// as the coordinator of the rendezvous.
pub const ENV_COORDINATOR: &str = "DINAH_COORDINATOR";

/// The environment variable naming a hostfile: one `rank host:port` line
/// per rank.
pub const ENV_HOSTFILE: &str = "DINAH_HOSTFILE";

/// The environment variable naming the IP address this rank's listener
/// binds (`0.0.0.0` or `::` for every interface).
pub const ENV_BIND: &str = "DINAH_BIND";

/// How the ranks of a run learn each other's addresses.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressSource {
    /// From `dinah-run`, over its control connection (`DINAH_LAUNCHER`).
    DinahRun {
        /// The launcher's control address.
        control: SocketAddr,
    },
    /// From rank 0, which listens at this `host:port`
    /// (`DINAH_COORDINATOR`) and hands every rank the list of all.
    Coordinator {
        /// The coordinator's address as given.
        addr: String,
    },
    /// From a hostfile (`DINAH_HOSTFILE`), read when the environment is.
    Hostfile {
        /// The file.
        path: PathBuf,
        /// Every rank's address from it, in rank order.
        addrs: Vec<SocketAddr>,
    },
}

/// How a rank proves that it belongs to the run, once it connects.
#[derive(Debug, Clone)]
pub enum Authentication {
    /// With the key in the environment ([`ENV_KEY`](crate::ENV_KEY),
    /// [`ENV_KEY_FILE`](crate::ENV_KEY_FILE)), read when the transport
    /// connects (`dinah-run` sets it; a hostfile run needs it set).
    FromEnv,
    /// With this key (the one the coordinator's rendezvous was proven
    /// with).
    Key(RunKey),
    /// Not at all ([`LaunchEnv::without_authentication`]).
    Off,
}

/// What a rendezvous learned: this rank, the world size, every rank's
/// address (indexed by rank), the listener bound for this rank, and how
/// this rank proves that it belongs to the run.
///
/// It holds exactly one address per rank, and the rank is inside the
/// world: the rendezvous checked both.
#[derive(Debug)]
pub struct Rendezvous {
    rank: Rank,
    world: WorldSize,
    addrs: Vec<SocketAddr>,
    listener: Option<TcpListener>,
    authentication: Authentication,
}

/// The parts of a [`Rendezvous`], to build a transport's membership from.
#[non_exhaustive]
#[derive(Debug)]
pub struct RendezvousParts {
    /// This rank.
    pub rank: Rank,
    /// The number of ranks.
    pub world: WorldSize,
    /// Every rank's listening address, in rank order (one per rank).
    pub addrs: Vec<SocketAddr>,
    /// This rank's listener, if the rendezvous bound one (`None` with a
    /// hostfile and no `DINAH_BIND`: the transport binds this rank's
    /// address).
    pub listener: Option<TcpListener>,
    /// How this rank proves its membership.
    pub authentication: Authentication,
}

impl Rendezvous {
    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.world
    }

    /// Every rank's listening address, in rank order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// This rank's listener, if the rendezvous bound one: it listens at
    /// this rank's address (on every interface when `DINAH_BIND` is a
    /// wildcard address; the address the others were given is then the
    /// one this host reaches the coordinator from).
    pub fn listener(&self) -> Option<&TcpListener> {
        self.listener.as_ref()
    }

    /// How this rank proves its membership.
    pub fn authentication(&self) -> &Authentication {
        &self.authentication
    }

    /// Its parts.
    pub fn into_parts(self) -> RendezvousParts {
        RendezvousParts {
            rank: self.rank,
            world: self.world,
            addrs: self.addrs,
            listener: self.listener,
            authentication: self.authentication,
        }
    }
}

/// What the launcher put in this process's environment: its rank, the
/// world size, the run ID, and how to learn every rank's address.
///
/// A rank reads it first (the run ID goes to `Runtime::builder`), then calls
/// [`rendezvous`](Self::rendezvous) to meet the other ranks. The TCP
/// transport's `Membership::from(rendezvous)` makes the membership it
/// connects with, and `Membership::from_env()` does all of it when the run
/// ID is not needed separately.
///
/// The same program runs under `dinah-run`, `srun`, `mpirun` or `mpiexec`
/// (or by hand): see [`from_env`](Self::from_env) for what is read.
///
/// # Examples
///
/// ```no_run
/// use dinah_launch::LaunchEnv;
///
/// let launch = LaunchEnv::from_env()?;
/// println!("rank {} of {}, run {}", launch.rank().get(), launch.world().get(), launch.run_id());
/// // ... build the runtime with `launch.run_id()` ...
/// let met = launch.rendezvous()?;
/// println!("rank 0 listens on {}", met.addrs()[0]);
/// // ... `dinah_tcp::Membership::from(met)`, then connect ...
/// # Ok::<(), dinah_launch::LaunchError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    rank: Rank,
    world: WorldSize,
    run_id: u64,
    launcher: Launcher,
    addresses: AddressSource,
    bind: Option<IpAddr>,
    timeout: Duration,
    authenticate: bool,
}

impl LaunchEnv {
    /// Reads the environment:
    ///
    /// - **rank and world size**: `DINAH_RANK`/`DINAH_WORLD_SIZE`, else
    ///   OpenMPI's `OMPI_COMM_WORLD_RANK`/`_SIZE`, else PMI's
    ///   `PMI_RANK`/`PMI_SIZE` (MPICH's Hydra, Intel MPI), else PMIx's
    ///   `PMIX_RANK`, else Slurm's `SLURM_PROCID`/`SLURM_NTASKS`;
    /// - **addresses**: `DINAH_LAUNCHER` (set by `dinah-run`), else
    ///   `DINAH_HOSTFILE`, else `DINAH_COORDINATOR`;
    /// - **run ID**: `DINAH_RUN_ID` (which `dinah-run` sets), else a
    ///   digest of the launcher's job (Slurm's job and step IDs, the PMIx
    ///   namespace, OpenMPI's job ID, PMI's KVS name), else a digest of the
    ///   coordinator's address or the hostfile's text;
    /// - `DINAH_BIND`: the IP address to listen on (optional);
    /// - `DINAH_LAUNCH_TIMEOUT_MS`: the rendezvous's limit (30 s if unset).
    ///
    /// # Errors
    ///
    /// [`LaunchError::Env`] naming the first variable that is missing or
    /// does not parse (`DINAH_RANK` when no launcher's variables are set,
    /// `DINAH_COORDINATOR` when nothing says how to meet);
    /// [`LaunchError::Hostfile`] if the hostfile cannot be used.
    pub fn from_env() -> Result<Self, LaunchError> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// As [`from_env`](Self::from_env), reading the variables through
    /// `lookup`.
    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, LaunchError> {
        let vars = Vars(lookup);
        let (mut launcher, rank, world) = vars.placement()?;
        let timeout = vars
            .parse(ENV_LAUNCH_TIMEOUT_MS, |s| s.parse().ok())?
            .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis);
        let bind = vars.parse(ENV_BIND, |s| s.parse().ok())?;
        let (addresses, shared) =
            if let Some(control) = vars.parse(ENV_LAUNCHER, |s| s.parse().ok())? {
                if launcher != Launcher::Manual {
                    // dinah-run always sets DINAH_RANK; another launcher's
                    // variables alone do not belong to its launch.
                    return Err(env_error(crate::launcher::ENV_RANK, EnvProblem::Missing));
                }
                launcher = Launcher::DinahRun;
                (AddressSource::DinahRun { control }, None)
            } else if let Some(path) = vars.get(ENV_HOSTFILE)? {
                let path = PathBuf::from(path.trim());
                let text = std::fs::read_to_string(&path).map_err(|e| LaunchError::Hostfile {
                    path: path.clone(),
                    error: HostfileError::Read { kind: e.kind() },
                })?;
                let addrs = hostfile::parse(&text, world, hostfile::resolve).map_err(|error| {
                    LaunchError::Hostfile {
                        path: path.clone(),
                        error,
                    }
                })?;
                (AddressSource::Hostfile { path, addrs }, Some(text))
            } else {
                let addr = vars.require(ENV_COORDINATOR, |s| {
                    // `host:port`: resolved at the rendezvous, checked here.
                    let (host, port) = s.rsplit_once(':')?;
                    (!host.is_empty() && port.parse::<u16>().is_ok()).then(|| s.to_owned())
                })?;
                let shared = addr.clone();
                (AddressSource::Coordinator { addr }, Some(shared))
            };
        let run_id = match shared {
            None => vars.require(crate::launcher::ENV_RUN_ID, |s| s.parse().ok())?,
            Some(text) => vars.run_id(launcher, &text)?,
        };
        Ok(Self {
            rank,
            world,
            run_id,
            launcher,
            addresses,
            bind,
            timeout,
            authenticate: true,
        })
    }

    /// A `dinah-run` rank's environment, for tests of its rendezvous.
    #[cfg(test)]
    pub(crate) fn for_dinah_run(run: DinahRun) -> Self {
        Self {
            rank: run.rank,
            world: run.world,
            run_id: run.run_id,
            launcher: Launcher::DinahRun,
            addresses: AddressSource::DinahRun {
                control: run.launcher,
            },
            bind: None,
            timeout: run.timeout,
            authenticate: true,
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks in the run.
    pub fn world(&self) -> WorldSize {
        self.world
    }

    /// The run ID every rank of the run shares.
    pub fn run_id(&self) -> u64 {
        self.run_id
    }

    /// The launcher that started this process.
    pub fn launcher(&self) -> Launcher {
        self.launcher
    }

    /// How this rank learns the others' addresses.
    pub fn addresses(&self) -> &AddressSource {
        &self.addresses
    }

    /// The IP address this rank's listener binds, if `DINAH_BIND` named
    /// one.
    pub fn bind(&self) -> Option<IpAddr> {
        self.bind
    }

    /// How long [`rendezvous`](Self::rendezvous) waits for the addresses.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Turns the proof of membership off: the coordinator's rendezvous runs
    /// without a key, and the rendezvous says
    /// [`Authentication::Off`]. Every rank of the run must do the same.
    pub fn without_authentication(mut self) -> Self {
        self.authenticate = false;
        self
    }

    /// Binds this rank's listener, then as
    /// [`rendezvous_with`](Self::rendezvous_with).
    ///
    /// The listener binds `DINAH_BIND` if set, else: `127.0.0.1` under
    /// `dinah-run`; this rank's own line of a hostfile (bound when the
    /// transport connects); on rank 0 of a coordinated run, the
    /// coordinator's address; on the others, the address this host
    /// reaches the coordinator from. The port is the system's choice,
    /// except with a hostfile.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Io`] if the listener cannot be bound; otherwise as
    /// [`rendezvous_with`](Self::rendezvous_with).
    pub fn rendezvous(self) -> Result<Rendezvous, LaunchError> {
        self.meet(None)
    }

    /// Learns every rank's address, with `listener` as this rank's (its
    /// address is what the others are told).
    ///
    /// - Under `dinah-run`: reports to the launcher and waits (at most
    ///   [`timeout`](Self::timeout)) for the list; the control connection
    ///   then stays open as a lifeline: if it closes, the launcher is
    ///   gone, and the process exits at once with [`EXIT_LAUNCHER_GONE`].
    /// - With a coordinator: rank 0 listens at the coordinator's address
    ///   and answers every rank with the list once all reported; the
    ///   others dial it (again and again until it listens, within the
    ///   timeout) and report. With a run key both sides prove it
    ///   (HMAC-SHA256 over fresh nonces), and strangers are dropped
    ///   without costing a rank its place.
    /// - With a hostfile: the list is the file's.
    ///
    /// # Errors
    ///
    /// - [`LaunchError::Io`]: binding, resolving, connecting, writing or
    ///   reading failed;
    /// - [`LaunchError::Refused`]: the launcher or coordinator refused the
    ///   report (another run ID or world size, a rank reported twice) or
    ///   aborted the launch;
    /// - [`LaunchError::LauncherClosed`]: `dinah-run` went away first;
    /// - [`LaunchError::Timeout`] with
    ///   [`LaunchPhase::Rendezvous`](crate::LaunchPhase::Rendezvous);
    /// - [`LaunchError::Protocol`]: a malformed or unproven answer;
    /// - [`LaunchError::NoKey`], [`LaunchError::Key`]: a coordinated run
    ///   without a readable key, authentication on.
    pub fn rendezvous_with(self, listener: TcpListener) -> Result<Rendezvous, LaunchError> {
        self.meet(Some(listener))
    }

    fn meet(self, listener: Option<TcpListener>) -> Result<Rendezvous, LaunchError> {
        let bind_io = |source| LaunchError::Io {
            op: LaunchOp::BindListener,
            source,
        };
        let bind =
            |ip: IpAddr, port| crate::listener::bind(SocketAddr::new(ip, port)).map_err(bind_io);
        let (listener, addrs, key) = match &self.addresses {
            AddressSource::DinahRun { control } => {
                let listener = match listener {
                    Some(listener) => listener,
                    None => bind(self.bind.unwrap_or(Ipv4Addr::LOCALHOST.into()), 0)?,
                };
                let run = DinahRun {
                    rank: self.rank,
                    world: self.world,
                    run_id: self.run_id,
                    launcher: *control,
                    timeout: self.timeout,
                };
                let addrs = run.join(&listener)?;
                (Some(listener), addrs, None)
            }
            AddressSource::Hostfile { addrs, .. } => {
                let own = addrs[self.rank.index()];
                let listener = match (listener, self.bind) {
                    (Some(listener), _) => Some(listener),
                    (None, Some(ip)) => Some(bind(ip, own.port())?),
                    (None, None) => None,
                };
                (listener, addrs.clone(), None)
            }
            AddressSource::Coordinator { addr } => {
                let key = self.key()?;
                let (listener, addrs) = self.coordinate(addr, key.as_ref(), listener)?;
                (Some(listener), addrs, key)
            }
        };
        Ok(Rendezvous {
            rank: self.rank,
            world: self.world,
            addrs,
            listener,
            authentication: match (self.authenticate, key) {
                (false, _) => Authentication::Off,
                (true, Some(key)) => Authentication::Key(key),
                (true, None) => Authentication::FromEnv,
            },
        })
    }

    /// The run key from the environment, required unless authentication
    /// is off.
    fn key(&self) -> Result<Option<RunKey>, LaunchError> {
        if !self.authenticate {
            return Ok(None);
        }
        RunKey::from_env()
            .map_err(LaunchError::Key)?
            .ok_or(LaunchError::NoKey)
            .map(Some)
    }

    /// The coordinated rendezvous: rank 0 serves it, the others join it.
    fn coordinate(
        &self,
        addr: &str,
        key: Option<&RunKey>,
        listener: Option<TcpListener>,
    ) -> Result<(TcpListener, Vec<SocketAddr>), LaunchError> {
        let coordinator = coordinator::resolve(addr)?;
        let run = coordinator::Run {
            run_id: self.run_id,
            world: self.world.get(),
            key,
            timeout: self.timeout,
            deadline: Instant::now() + self.timeout,
        };
        if self.rank.get() != 0 {
            return coordinator::join(&coordinator, self.rank.get(), self.bind, listener, run);
        }
        let server = coordinator::listen(&coordinator)?;
        let near = server
            .local_addr()
            .map_err(|source| LaunchError::Io {
                op: LaunchOp::BindCoordinator,
                source,
            })?
            .ip();
        let listener = match listener {
            Some(listener) => listener,
            None => crate::listener::bind(SocketAddr::new(self.bind.unwrap_or(near), 0)).map_err(
                |source| LaunchError::Io {
                    op: LaunchOp::BindListener,
                    source,
                },
            )?,
        };
        let own = listener.local_addr().map_err(|source| LaunchError::Io {
            op: LaunchOp::BindListener,
            source,
        })?;
        // Listening on every interface: the others reach this rank where
        // they reach the coordinator.
        let own = if own.ip().is_unspecified() {
            SocketAddr::new(near, own.port())
        } else {
            own
        };
        let (addrs, _refused) = coordinator::serve(&server, own, run)?;
        Ok((listener, addrs))
    }
}

/// What a failed write of a rank's report means: `None` if the launcher
/// or coordinator hung up first (the rank reports again on a new
/// connection), the rendezvous's timeout if the deadline passed, else the
/// I/O error.
fn write_failure(
    source: std::io::Error,
    timed_out: impl FnOnce() -> LaunchError,
) -> Option<LaunchError> {
    use std::io::ErrorKind;
    match source.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Some(timed_out()),
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => None,
        _ => Some(LaunchError::Io {
            op: LaunchOp::WriteControl,
            source,
        }),
    }
}
