//! Connecting a rank to the run.

use std::sync::Once;

use dinah_core::wire::{Channel, HelloAuth};
use dinah_std::transport::{TransportHandle, TransportHello};

use crate::auth::RunKey;
use crate::config::TcpConfig;
use crate::driver::TcpDriver;
use crate::error::TcpError;
use dinah_launch::Authentication;

use crate::membership::Membership;
use crate::setup;

/// The TCP transport's entry point.
///
/// [`connect`](Self::connect) turns a [`Membership`] and the runtime
/// builder's [`TransportHello`] into the handle and driver a
/// [`Runtime`](dinah_std::Runtime) starts with. See the [crate
/// documentation](crate) for an example and the design.
#[derive(Debug, Clone, Copy)]
pub struct TcpTransport;

impl TcpTransport {
    /// Connects this rank to every other rank with the default
    /// [`TcpConfig`]; see [`connect_with`](Self::connect_with). The
    /// membership may also be what a launcher's rendezvous returned
    /// ([`LaunchEnv::rendezvous`](crate::LaunchEnv::rendezvous)).
    ///
    /// # Errors
    ///
    /// As [`connect_with`](Self::connect_with).
    ///
    /// # Panics
    ///
    /// As [`connect_with`](Self::connect_with).
    pub fn connect(
        membership: impl Into<Membership>,
        hello: TransportHello,
    ) -> Result<(TransportHandle, TcpDriver), TcpError> {
        Self::connect_with(membership, hello, TcpConfig::default())
    }

    /// Connects this rank to every other rank: binds (or takes) this
    /// rank's listener, dials every lower rank and accepts every higher
    /// one, two connections per peer (control and action), exchanges and
    /// checks hellos on each, records the admission capacity each peer
    /// advertised on the handle
    /// ([`TransportHandle::peer_admission`]), and starts the watcher
    /// thread. Blocks until
    /// every connection is up or
    /// [`setup_timeout`](TcpConfig::setup_timeout) passes.
    ///
    /// Connections from strangers that fail the handshake (garbage, a
    /// hello of another run, world, registry or protocol version, a rank
    /// out of range or already connected, silence past
    /// [`hello_timeout`](TcpConfig::hello_timeout)) are dropped without
    /// failing the set-up; [`TcpDriver::rejected`] lists them.
    ///
    /// # Errors
    ///
    /// [`TcpError::InvalidConfig`] or [`TcpError::LocalHello`] for bad
    /// arguments; [`TcpError::Io`] if the listener cannot be bound or the
    /// watcher (its readiness set or thread) cannot start; the error of dialling a lower rank
    /// ([`TcpError::Connect`], [`TcpError::Mismatch`],
    /// [`TcpError::UnexpectedPeer`], [`TcpError::HandshakeClosed`]...);
    /// [`TcpError::SetupTimeout`] if connections are still missing at the
    /// deadline.
    ///
    /// # Panics
    ///
    /// If a queue size in `hello.handle` is zero (validated runtime limits
    /// never give one), as [`TransportHandle::new`].
    pub fn connect_with(
        membership: impl Into<Membership>,
        hello: TransportHello,
        config: TcpConfig,
    ) -> Result<(TransportHandle, TcpDriver), TcpError> {
        let mut membership = membership.into();
        config.validate()?;
        let (me, world) = (membership.rank(), membership.world());
        let key = run_key(membership.auth())?;
        let auth = match key {
            Some(_) => HelloAuth::HmacSha256,
            None => HelloAuth::None,
        };
        let control = hello
            .hello(me, world, Channel::Control)
            .map_err(TcpError::LocalHello)?
            .with_auth(auth);
        let hellos = [control, control.with_channel(Channel::Action)];
        let established = setup::establish(&mut membership, hellos, key.as_ref(), &config)?;
        let handle = TransportHandle::new(me, world, hello.handle);
        let driver = TcpDriver::start(handle.clone(), established, hello.protocol_limits, config)?;
        Ok((handle, driver))
    }
}

/// The key this rank proves its membership with: the membership's, else
/// the environment's; `None` if the user turned the proof off (with a
/// warning, once per process).
fn run_key(auth: &Authentication) -> Result<Option<RunKey>, TcpError> {
    match auth {
        Authentication::Key(key) => Ok(Some(key.clone())),
        Authentication::FromEnv => match RunKey::from_env().map_err(TcpError::Key)? {
            Some(key) => Ok(Some(key)),
            None => Err(TcpError::NoKey),
        },
        Authentication::Off => {
            warn_unauthenticated();
            Ok(None)
        }
    }
}

/// Says once per process that set-up is not authenticated.
#[expect(
    clippy::print_stderr,
    reason = "the user turned a safeguard off: the warning goes where they will see it"
)]
fn warn_unauthenticated() {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "dinah-tcp: warning: authentication is off; anyone who can reach this rank's \
             listener and knows the run's hello can take a rank's place during set-up"
        );
    });
}
