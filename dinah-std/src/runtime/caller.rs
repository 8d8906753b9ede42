//! The caller side: issuing calls (`issue.rs`), the table of calls this
//! rank waits for (`calls.rs`), paced per target and domain (`flow.rs`), their futures (`remote_future.rs`), sets
//! of them awaited together (`call_set.rs`) and scopes that bound their
//! lifetime (`scope.rs`).

mod call_set;
mod calls;
mod flow;
mod issue;
mod remote_future;
mod scope;

pub use call_set::{CallSet, CallSetFull};
pub(crate) use calls::{Abandoned, CallInfo, CallOutcome, Calls, LocalRelease, Ticket};
pub use issue::{Backpressure, SpawnOptions};
pub(crate) use issue::{any_rank_down, submit_local};
pub use remote_future::RemoteFuture;
pub use scope::{Scope, ScopedFuture};
