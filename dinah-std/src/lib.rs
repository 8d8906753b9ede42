//! dinah's std backend.
//!
//! It holds the local [`Executor`] and [`Scheduler`], [`Shared`] state, the
//! [`CancellationToken`], worker [`Domain`]s (each a Rayon pool), and the
//! long-lived [`Runtime`] with typed remote actions: the caller side
//! ([`RuntimeClient`]), the serving side and the owner loop that drives
//! the transport. The [`transport`] module holds the transport contract
//! ([`transport::TransportDriver`] and [`transport::TransportHandle`]) and
//! the in-memory fault-injecting transport ([`transport::memory`]).
//! `docs/architecture.md` explains how the pieces fit together.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod action;
mod cancel;
#[cfg(doctest)]
mod compile_fail;
mod domain;
mod executor;
mod runtime;
mod scheduler;
mod shared;
pub mod transport;

pub use action::*;
pub use cancel::*;
pub use domain::*;
pub use executor::*;
pub use runtime::*;
pub use scheduler::*;
pub use shared::*;
