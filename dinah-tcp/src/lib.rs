//! dinah's TCP transport: connects the ranks of a run over TCP and gives
//! a [`Runtime`](dinah_std::Runtime) the [`TransportHandle`] and
//! [`TransportDriver`] pair it runs on.
//!
//! # Using it
//!
//! Every rank builds its runtime, gets the hello from the builder, and
//! connects with its [`Membership`] (its rank, the world size, every
//! rank's listening address):
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::task::Poll;
//! use std::time::Duration;
//! use dinah_core::{ProtocolLimits, RuntimeLimits, WorldSize};
//! use dinah_std::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};
//! use dinah_tcp::{Membership, TcpTransport};
//!
//! /// Adds two numbers on the rank it is sent to.
//! struct Add(u64, u64);
//!
//! impl WireValue for Add {
//!     const SCHEMA_ID: u64 = schema_id("example.Add/1");
//!     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
//!         (self.0, self.1).encode(out)
//!     }
//!     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
//!         <(u64, u64)>::decode(input).map(|(a, b)| Add(a, b))
//!     }
//! }
//!
//! impl Action for Add {
//!     const ID: u128 = 0xadd;
//!     type Output = u64;
//! }
//!
//! /// Tells the serving rank that nobody will call it any more.
//! struct Done;
//!
//! impl WireValue for Done {
//!     const SCHEMA_ID: u64 = schema_id("example.Done/1");
//!     fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
//!         Ok(())
//!     }
//!     fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
//!         Ok(Done)
//!     }
//! }
//!
//! impl Action for Done {
//!     const ID: u128 = 0xd0e;
//!     type Output = ();
//! }
//!
//! // Both ranks run in this process here, each on its own thread; with
//! // `dinah-run` each rank is a process and builds its membership from
//! // the environment.
//! let world = WorldSize::new(2)?;
//! let ranks: Vec<_> = Membership::loopback(world)?
//!     .into_iter()
//!     .map(|membership| {
//!         std::thread::spawn(move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//!             let done = Arc::new(AtomicBool::new(false));
//!             let flag = Arc::clone(&done);
//!             let mut builder = Runtime::builder(42, ProtocolLimits::default(), RuntimeLimits::default())?;
//!             builder.register::<Add, _>(|Add(a, b)| Ok(a + b))?;
//!             builder.register::<Done, _>(move |Done| Ok(flag.store(true, Ordering::SeqCst)))?;
//!             let rank = membership.rank();
//!             let (handle, driver) = TcpTransport::connect(membership, builder.hello()?)?;
//!             let mut runtime = builder.start(handle, driver)?;
//!             if rank.get() == 0 {
//!                 let client = runtime.client();
//!                 let server = world.rank(1)?;
//!                 assert_eq!(runtime.block_on(client.spawn_on(server, Add(2, 40)))?, 42);
//!                 runtime.block_on(client.spawn_on(server, Done))?;
//!             } else {
//!                 // Serve until told that the calls are over.
//!                 runtime.block_on(std::future::poll_fn(|_| {
//!                     if done.load(Ordering::SeqCst) { Poll::Ready(()) } else { Poll::Pending }
//!                 }));
//!             }
//!             // Both ranks shut down together: goodbyes, drain, close.
//!             let report = runtime.shutdown(Duration::from_secs(10))?;
//!             assert!(report.is_clean(), "{report}");
//!             Ok(())
//!         })
//!     })
//!     .collect();
//! for rank in ranks {
//!     rank.join().expect("rank thread")?;
//! }
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! # Design
//!
//! - **Set-up** ([`TcpTransport::connect`]): listeners first (pre-bound
//!   ones from the membership, or bound now), then rank `i` dials every
//!   rank below it and accepts every rank above it, two connections per
//!   pair: one per [`Channel`](dinah_core::wire::Channel), so a
//!   cancellation never waits behind a saturated action lane. Dials retry
//!   with exponential back-off under one deadline. Each connection starts
//!   with a hello each way, checked for run, world, limits, registry
//!   fingerprint, rank and channel; strangers that fail are dropped and
//!   listed by [`TcpDriver::rejected`], never stalling the others, and no
//!   flood of them crowds a rank out.
//! - **Authentication**: by default each connection ends its handshake
//!   with an HMAC-SHA256 challenge-response over both sides' nonces under
//!   the run's [`RunKey`] (from the membership, `dinah-run` or the
//!   environment), and a connection counts as a rank only once it proved
//!   the key; [`Membership::without_authentication`] turns it off.
//! - **Reading**: done by the owner thread inside `poll`, without
//!   blocking and without a thread hand-off: it reads each socket
//!   (a non-blocking `recv`), checks the stream with the core's
//!   `StreamDecoder` (every length against the negotiated limits before
//!   anything is allocated) and hands complete frames to the runtime, as
//!   many as the poll's budget takes; the rest waits in the connection's
//!   read buffer and nothing more is read, so TCP flow control slows the
//!   peer. Large payloads are read straight into their frame. While the
//!   owner is idle it first looks at the sockets itself for a short spin
//!   (with a few connections it reads each socket, with more it asks a
//!   readiness set of every connection, one question per look), then
//!   parks, and one watcher thread, waiting on that set, wakes it when a
//!   socket becomes readable (or, while a write waits for room in its
//!   buffer, writable).
//! - **Writing**: done by the owner thread inside `poll`, without
//!   blocking and without a thread hand-off: it takes the handle's frames
//!   (control first) and writes them with vectored `sendmsg` calls of up
//!   to 64 frames. Under load many frames leave per system call; with one
//!   frame in flight it leaves at once, in a plain `send`.
//! - **Failures**: end of stream without a goodbye, a reset, or an invalid
//!   frame marks the peer down on the handle, closes both its connections,
//!   returns its unwritten frames as `SendFailed`, and reports `PeerDown`
//!   with the cause; the other peers carry on.
//! - **Shutdown**: after the queued frames, a goodbye on every connection
//!   announcing the frames sent on it, then the write side is shut down;
//!   a peer is drained once both its goodbyes arrived after exactly the
//!   announced frames. `close` shuts the sockets down, stops the watcher
//!   thread and joins it with a deadline, never without one.
//!
//! `docs/tcp.md` in the repository has the details, the tuning knobs
//! ([`TcpConfig`]) and measured numbers.
//!
//! # Platform
//!
//! Built and tested on Linux; CI also checks that it builds for macOS and
//! Windows (other Unix systems are written for but not checked). The
//! readiness set is the `polling` crate's (epoll, kqueue, IOCP). On Unix
//! the owner's calls pass `MSG_DONTWAIT` (with `MSG_NOSIGNAL` on writes on
//! Linux, Android and the BSDs; Apple's systems set `SO_NOSIGPIPE` on each
//! socket instead); on Windows each connection is switched to non-blocking
//! mode after its set-up.
//!
//! [`TransportHandle`]: dinah_std::transport::TransportHandle
//! [`TransportDriver`]: dinah_std::transport::TransportDriver
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

/// A `tracing` event when the `tracing` feature is on; nothing otherwise
/// (the arguments are not even compiled).
macro_rules! trace_event {
    ($($arg:tt)*) => {{
        #[cfg(feature = "tracing")]
        {
            tracing::event!($($arg)*);
        }
    }};
}

mod auth;
mod channel;
mod config;
mod driver;
mod error;
mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
mod inbound;
mod membership;
mod outbox;
mod readiness;
mod setup;
mod socket;
mod transport;
mod watch;

pub use config::{ConfigField, TcpConfig};
/// A rank's side of a launch, re-exported from `dinah-launch`:
/// [`Membership::from_env`] and `Membership::from(LaunchEnv::rendezvous())`
/// use them.
pub use dinah_launch::{
    AddressSource, EXIT_LAUNCHER_GONE, EnvProblem, LaunchEnv, LaunchError, LaunchOp, LaunchPhase,
    Launcher, Rendezvous,
};
pub use dinah_launch::{ENV_KEY, ENV_KEY_FILE, KeyError, RunKey};
pub use driver::TcpDriver;
pub use error::TcpError;
pub use membership::{Membership, MembershipError};
pub use transport::TcpTransport;
