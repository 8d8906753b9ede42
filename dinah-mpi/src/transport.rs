//! Starting the transport: environment checks, a private communicator and
//! the hello exchange.

use std::time::Instant;

use dinah_core::WorldSize;
use dinah_core::wire::Channel;
use dinah_std::transport::{PeerStatus, TransportHandle, TransportHello};
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

use crate::comm::{self, PrivateComm};
use crate::config::MpiConfig;
use crate::driver::{MpiDriver, Parts};
use crate::error::MpiError;
use crate::hello;

/// Builds a runtime's transport over an MPI communicator.
///
/// `MpiTransport` itself is plain configuration (`Send`, `Copy`); the
/// pair it [`connect`](Self::connect)s is a [`TransportHandle`] (`Send +
/// Sync`, shared with the runtime's clients) and an [`MpiDriver`] (not
/// `Send`), both for the calling thread, which must be the one that makes
/// MPI calls and will own the runtime.
///
/// The application keeps the [`mpi::environment::Universe`]: it
/// initialises MPI (at least [`Threading::Funneled`](mpi::Threading)),
/// starts the runtime, shuts it down, and only then drops the universe
/// (which finalises MPI and waits for every rank). The transport never
/// finalises, never runs a barrier, and frees its private communicator
/// only after a clean drain.
///
/// # Examples
///
/// One runtime per rank over `MPI_COMM_WORLD` (run under `mpirun`):
///
/// ```no_run
/// use std::time::Duration;
/// use dinah_core::{ProtocolLimits, RuntimeLimits};
/// use dinah_mpi::MpiTransport;
/// use dinah_mpi::mpi::{self, Threading};
/// use dinah_std::Runtime;
///
/// let (universe, _threading) = mpi::initialize_with_threading(Threading::Funneled).ok_or("mpi already initialised")?;
/// let world = universe.world();
/// // Register the same actions on every rank before the hello.
/// let builder = Runtime::builder(0x5eed, ProtocolLimits::default(), RuntimeLimits::default())?;
/// let (handle, driver) = MpiTransport::new().connect(&world, builder.hello()?)?;
/// let runtime = builder.start(handle, driver)?;
/// // ... calls ...
/// let report = runtime.shutdown(Duration::from_secs(10))?;
/// assert!(report.is_clean());
/// drop(universe); // MPI_Finalize, after the runtime is gone
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiTransport {
    config: MpiConfig,
}

impl MpiTransport {
    /// A transport with the default [`MpiConfig`].
    pub const fn new() -> Self {
        Self {
            config: MpiConfig::DEFAULT,
        }
    }

    /// A transport with `config`.
    pub const fn with_config(config: MpiConfig) -> Self {
        Self { config }
    }

    /// Its options.
    pub const fn config(&self) -> &MpiConfig {
        &self.config
    }

    /// Connects this rank of `comm`: duplicates `comm` (collective: every
    /// rank of `comm` must call `connect` once, at the same point of its
    /// program), exchanges hellos built from `hello` with every other rank
    /// and checks them (run ID, world size, ranks, protocol version and
    /// limits, registry fingerprint), records the admission capacity each
    /// peer advertised on the handle
    /// ([`TransportHandle::peer_admission`]), then returns the handle and
    /// driver for the runtime.
    ///
    /// Takes at most [`MpiConfig::bootstrap_timeout`]: a rank that is
    /// late or never connects makes the others fail with
    /// [`MpiError::SetupTimeout`], not wait forever.
    ///
    /// # Errors
    ///
    /// - [`MpiError::NotInitialized`], [`MpiError::Threading`],
    ///   [`MpiError::NotMainThread`]: MPI cannot be used from here (checked
    ///   before anything collective).
    /// - [`MpiError::ZeroCapacity`], [`MpiError::InvalidHello`]: this
    ///   rank's own configuration is unusable (its peers then time out).
    /// - [`MpiError::Handshake`], [`MpiError::BadHello`],
    ///   [`MpiError::WrongSender`], [`MpiError::DuplicateHello`]: a peer is
    ///   incompatible; every rank of the world fails this way.
    /// - [`MpiError::SetupTimeout`]: not every rank joined the duplication
    ///   (then every peer counts as missing), or a peer's hello did not
    ///   arrive in time.
    ///
    /// # Panics
    ///
    /// Only if MPI reports a communicator size or rank outside
    /// `1..=u32::MAX` (which it never does).
    pub fn connect(
        &self,
        comm: &SimpleCommunicator,
        hello: TransportHello,
    ) -> Result<(TransportHandle, MpiDriver), MpiError> {
        comm::check_environment()?;
        let deadline = Instant::now() + self.config.bootstrap_timeout;
        let size = u32::try_from(comm.size()).expect("a communicator size is positive");
        let world = WorldSize::new(size).expect("a communicator has at least one rank");
        let rank = u32::try_from(comm.rank()).expect("a rank is not negative");
        let me = world
            .rank(rank)
            .expect("MPI ranks are below the communicator size");
        let Some(mut private) = PrivateComm::duplicate(comm, deadline) else {
            return Err(MpiError::SetupTimeout {
                missing_peers: size - 1,
            });
        };
        if self.config.max_pending_receives == 0
            || hello.handle.action_queue == 0
            || hello.handle.control_queue == 0
        {
            private.release(true);
            return Err(MpiError::ZeroCapacity);
        }
        let mine = match hello.hello(me, world, Channel::Control) {
            Ok(mine) => mine,
            Err(error) => {
                private.release(true);
                return Err(MpiError::InvalidHello(error));
            }
        };
        let handle = TransportHandle::new(me, world, hello.handle);
        let session = hello::next_session();
        let exchange = hello::exchange(private.get(), &mine, session, deadline, &handle);
        let sessions = match exchange.result {
            Ok(sessions) => sessions,
            Err(error) => {
                // Free the communicator only if nothing can still use it.
                let settled = !exchange.unsettled && exchange.sends.is_empty();
                drop(exchange.sends);
                private.release(settled);
                return Err(error);
            }
        };
        // Each peer's admission capacity before it is up: a client that
        // sees it up sees what it advertised.
        for peer in world.ranks().filter(|&peer| peer != me) {
            handle.set_peer_admission(peer, exchange.admissions[peer.index()]);
            handle.set_peer_status(peer, PeerStatus::Up);
        }
        let driver = MpiDriver::new(Parts {
            comm: private,
            handle: handle.clone(),
            limits: hello.protocol_limits,
            config: self.config,
            session,
            sessions,
            sends: exchange.sends,
        });
        Ok((handle, driver))
    }
}
