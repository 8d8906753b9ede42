//! The caller side: issuing calls (`issue.rs`), the table of calls this
//! rank waits for (`calls.rs`), their futures (`remote_future.rs`), sets
//! of them awaited together (`call_set.rs`) and scopes that bound their
//! lifetime (`scope.rs`).

mod call_set;
mod calls;
mod issue;
mod remote_future;
mod scope;

pub use call_set::{CallSet, CallSetFull};
pub(crate) use calls::{CallInfo, CallOutcome, Calls, Ticket};
pub use issue::SpawnOptions;
pub(crate) use issue::transport_down;
pub use remote_future::RemoteFuture;
pub use scope::{Scope, ScopedFuture};
