#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![doc(test(attr(deny(warnings))))]

mod sync;

#[cfg(doctest)]
mod compile_fail;

mod admission;
mod cancel;
mod drainers;
mod id;
mod limits;
mod metrics;
mod mpmc;
mod padded;
mod queue;
mod rank;
mod request_id;
mod runtime_state;
mod task_outcome;
mod task_state;
mod time;
mod trace;

mod deadline;
mod dedup;
mod fingerprint;
mod pending;
pub mod wire;

pub use admission::*;
pub use cancel::*;
pub use deadline::*;
pub use dedup::*;
pub use drainers::*;
pub use fingerprint::*;
pub use id::*;
pub use limits::*;
pub use metrics::*;
pub use mpmc::*;
pub use pending::*;
pub use queue::*;
pub use rank::*;
pub use request_id::*;
pub use runtime_state::*;
pub use task_outcome::*;
pub use task_state::*;
pub use time::*;
pub use trace::*;
