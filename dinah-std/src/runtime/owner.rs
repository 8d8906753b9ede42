//! The owner thread's loop: one bounded round of work at a time
//! (`progress.rs`), incoming frames (`inbound.rs`), finished jobs
//! (`completions.rs`), the owner's counts (`counts.rs`) and shutdown
//! (`shutdown.rs`). It drives both sides: the caller's table of calls and
//! the serving side.

mod completions;
mod counts;
mod inbound;
mod progress;
mod shutdown;

pub(crate) use counts::OwnerCounts;
pub use progress::Progress;
pub use shutdown::{ShutdownReport, ShutdownTimeout};
pub(crate) use shutdown::{ShutdownState, Stuck, abandon};
