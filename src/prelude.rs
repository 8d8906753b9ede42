//! One import for a dinah program: `use dinah::prelude::*;`.
//!
//! It brings the types almost every program names: the runtime and its
//! builder, client and errors; the action traits (and, with the `derive`
//! feature, their derives of the same names); ranks, world sizes, domains
//! and the two sets of limits; a call's options and a set of calls; and,
//! with the `tcp` feature, the TCP transport and its membership. Anything
//! rarer stays in its module ([`crate::core`], [`crate::std`],
//! [`crate::tcp`]).
//!
//! ```no_run
//! use dinah::prelude::*;
//!
//! #[derive(WireValue, Action)]
//! #[action(name = "app.Hello/1", output = String)]
//! struct Hello(u32);
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let membership = Membership::from_env()?;
//!     let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
//!     builder.register::<Hello, _>(|Hello(from)| Ok(format!("hello, rank {from}")))?;
//!     let (handle, driver) = TcpTransport::connect(membership, builder.hello()?)?;
//!     let mut runtime = builder.start(handle, driver)?;
//!     let next = runtime.world().rank((runtime.rank().get() + 1) % runtime.world().get())?;
//!     let reply = runtime.block_on(runtime.client().spawn_on(next, Hello(runtime.rank().get())))?;
//!     println!("{reply}");
//!     runtime.barrier(std::time::Duration::from_secs(30))?;
//!     runtime.shutdown(std::time::Duration::from_secs(10))?;
//!     Ok(())
//! }
//! ```

pub use dinah_core::{DomainId, ProtocolLimits, Rank, RuntimeLimits, WorldSize};
pub use dinah_std::{
    Action, ActionContext, ActionError, Backpressure, CallSet, DEFAULT_DOMAIN, Runtime,
    RuntimeBuilder, RuntimeClient, RuntimeError, RuntimeThread, ShutdownReport, SpawnOptions,
    WireValue,
};
#[cfg(feature = "tcp")]
pub use dinah_tcp::{Membership, TcpTransport};
