//! dinah's MPI transport: the runtime's frames over an MPI communicator,
//! progressed by the runtime's owner thread alone.
//!
//! [`MpiTransport::connect`] duplicates the communicator the application
//! passes in, exchanges hellos with every rank (run, world, limits and
//! registry fingerprint must agree, or every rank gets a typed
//! [`MpiError`]), and returns the runtime's
//! [`TransportHandle`](dinah_std::transport::TransportHandle) and an
//! [`MpiDriver`]. The driver implements
//! [`TransportDriver`](dinah_std::transport::TransportDriver) with
//! nonblocking MPI only: immediate sends of owned frames (small frames to
//! one peer batched into one message per poll) tracked until
//! `MPI_Test` completes them, receives kept posted on each lane (control
//! before action; frames over 3,968 bytes announced and received apart),
//! goodbyes with per-lane frame counts for a
//! clean drain. It never blocks in an MPI call, never runs a collective
//! after bootstrap and never finalises MPI.
//!
//! # Threading and ownership
//!
//! - MPI must be initialised with at least
//!   [`Threading::Funneled`](mpi::Threading); the thread that initialised
//!   it connects the transport and owns the runtime (the driver is not
//!   `Send`). Worker threads of the runtime never call MPI.
//! - The application owns the [`mpi::environment::Universe`] and drops it
//!   (`MPI_Finalize`, which waits for every rank) only after its runtime
//!   shut down or was dropped.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use dinah_core::{ProtocolLimits, RuntimeLimits};
//! use dinah_mpi::MpiTransport;
//! use dinah_mpi::mpi::{self, Threading};
//! use dinah_std::Runtime;
//!
//! let (universe, _) = mpi::initialize_with_threading(Threading::Funneled).ok_or("mpi already initialised")?;
//! let world = universe.world();
//! let builder = Runtime::builder(0x5eed, ProtocolLimits::default(), RuntimeLimits::default())?;
//! let (handle, driver) = MpiTransport::new().connect(&world, builder.hello()?)?;
//! let runtime = builder.start(handle, driver)?;
//! let report = runtime.shutdown(Duration::from_secs(10))?;
//! assert!(report.is_clean());
//! drop(universe);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `docs/mpi.md` in the repository explains the design (tags, probing,
//! send tracking, shutdown, limits) and how to run under `mpirun`.
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

mod coalesce;
mod comm;
mod compile_fail;
mod config;
mod driver;
mod error;
mod farewell;
mod hello;
mod large;
mod owned;
mod peers;
mod pieces;
mod pool;
mod posted;
mod receive;
mod send;
mod tags;
mod transport;

pub use config::MpiConfig;
pub use driver::MpiDriver;
pub use error::MpiError;
/// The `mpi` crate this transport is built on, re-exported so applications
/// initialise MPI with the same bindings.
pub use mpi;
pub use transport::MpiTransport;
