//! Connecting a rank to the run.

use dinah_core::wire::Channel;
use dinah_std::transport::{TransportHandle, TransportHello};

use crate::config::TcpConfig;
use crate::driver::TcpDriver;
use crate::error::TcpError;
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
    /// [`TcpConfig`]; see [`connect_with`](Self::connect_with).
    ///
    /// # Errors
    ///
    /// As [`connect_with`](Self::connect_with).
    ///
    /// # Panics
    ///
    /// As [`connect_with`](Self::connect_with).
    pub fn connect(
        membership: Membership,
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
    /// watcher (its `epoll` set or thread) cannot start; the error of dialling a lower rank
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
        mut membership: Membership,
        hello: TransportHello,
        config: TcpConfig,
    ) -> Result<(TransportHandle, TcpDriver), TcpError> {
        config.validate()?;
        let (me, world) = (membership.rank(), membership.world());
        let control = hello
            .hello(me, world, Channel::Control)
            .map_err(TcpError::LocalHello)?;
        let hellos = [control, control.with_channel(Channel::Action)];
        let established = setup::establish(&mut membership, hellos, &config)?;
        let handle = TransportHandle::new(me, world, hello.handle);
        let driver = TcpDriver::start(handle.clone(), established, hello.protocol_limits, config)?;
        Ok((handle, driver))
    }
}
