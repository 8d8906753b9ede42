//! dinah's std backend.
//!
//! **Status:** work in progress. The local executor, scheduler, shared
//! state, cancellation token and worker domains are landing now; the
//! long-lived `Runtime` with typed remote actions, the transport traits and
//! the in-memory fault-injecting transport come next. See
//! `docs/architecture.md` for where each piece lives.
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
