//! dinah's std backend.
//!
//! It holds the local [`Executor`] and [`Scheduler`], [`Shared`] state, the
//! [`CancellationToken`], worker [`Domain`]s (each a Rayon pool), and the
//! long-lived [`Runtime`] with typed remote actions: the caller side
//! ([`RuntimeClient`]), the serving side and the owner loop that drives
//! the transport. The [`transport`] module holds the transport contract
//! ([`transport::TransportDriver`] and [`transport::TransportHandle`]) and
//! the in-memory fault-injecting transport ([`transport::memory`]).
//! With the `derive` feature (default), `#[derive(WireValue, Action)]`
//! writes an action's codec and identity (see the
//! [`WireValue`](derive@WireValue) derive). `docs/architecture.md` explains
//! how the pieces fit together.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

// The derives name this crate `::dinah_std` (they cannot know they expand
// inside it); this makes that path resolve in its own unit tests too.
// Integration tests and doctests see the crate under that name anyway.
#[cfg(all(test, feature = "derive"))]
extern crate self as dinah_std;

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

// The derive macros live in the macro namespace, beside the traits of the
// same names, so one `use` brings in both.
#[cfg(feature = "derive")]
pub use dinah_macros::{Action, WireValue};
