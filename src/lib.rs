//! # dinah
//!
//! A runtime for bounded, cancellable remote work: typed actions over TCP or
//! MPI with hard memory bounds, on a `#![no_std]` core that also fits a
//! microcontroller build.
//!
//! This facade re-exports the workspace crates:
//!
//! | module | crate | what |
//! | --- | --- | --- |
//! | [`core`] | `dinah-core` | no_std, allocation-free primitives and protocol |
//! | [`std`] | `dinah-std` | executor, scheduler, domains, runtime |
//! | `tcp` (feature `tcp`, default) | `dinah-tcp` | TCP transport |
//! | `launch` (feature `tcp`, default) | `dinah-launch` | `dinah-run`, and a rank's rendezvous under any launcher |
//! | `mpi` (feature `mpi`) | `dinah-mpi` | MPI transport |
//!
//! [`prelude`] gathers what a program usually names, for one
//! `use dinah::prelude::*;`.
//!
//! With the `derive` feature (default), `dinah::std::{WireValue, Action}`
//! are also the derive macros that declare an action:
//!
//! ```
//! # #[cfg(feature = "derive")] {
//! use dinah::std::{Action, WireValue};
//!
//! /// Doubles a number on the target rank.
//! #[derive(WireValue, Action)]
//! #[action(name = "app.Double/1", output = u64)]
//! struct Double(u64);
//!
//! assert_eq!(Double::ID, dinah::std::action_id("app.Double/1"));
//! # let _ = Double(1);
//! # }
//! ```
//!
//! With the `tracing` feature, the runtime and the transports emit
//! [`tracing`](https://docs.rs/tracing) events for what an operator acts
//! on: set-up (with the connections it refused), each refused stranger,
//! peers going down (with the reason, liveness included) and shutdown
//! (with its counts). Events carry ranks, counts and error texts, never
//! payloads or keys.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

#[doc(inline)]
pub use dinah_core as core;
#[cfg(feature = "tcp")]
#[doc(inline)]
pub use dinah_launch as launch;
#[cfg(feature = "mpi")]
#[doc(inline)]
pub use dinah_mpi as mpi;
#[doc(inline)]
pub use dinah_std as std;
#[cfg(feature = "tcp")]
#[doc(inline)]
pub use dinah_tcp as tcp;

pub mod prelude;
