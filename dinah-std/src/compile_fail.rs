//! Compile-fail checks of the runtime's thread and lifetime guarantees.
//! Each failing block has a compiling twin that differs only in the
//! offending line.
//!
//! The runtime owns a transport driver that may not leave its thread (an
//! MPI driver must not), so it is not `Send`:
//!
//! ```compile_fail,E0277
//! fn needs_send<T: Send>(_: T) {}
//! fn check(runtime: dinah_std::Runtime) {
//!     needs_send(runtime);
//! }
//! # let _ = check;
//! ```
//!
//! A client is `Send`:
//!
//! ```
//! fn needs_send<T: Send>(_: T) {}
//! fn check(runtime: dinah_std::Runtime) {
//!     needs_send(runtime.client());
//! }
//! # let _ = check;
//! ```
//!
//! A scoped future cannot leave its scope:
//!
//! ```compile_fail
//! # use dinah_std::{Action, CodecError, SegmentReader, SegmentWriter, WireValue, schema_id};
//! # struct Ping;
//! # impl WireValue for Ping {
//! #     const SCHEMA_ID: u64 = schema_id("doc.Ping/1");
//! #     fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> { Ok(()) }
//! #     fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> { Ok(Ping) }
//! # }
//! # impl Action for Ping { const ID: u128 = 1; type Output = (); }
//! fn leak(runtime: &mut dinah_std::Runtime) {
//!     let escaped = runtime.scope(|s| s.spawn_on(dinah_core::Rank::ZERO, Ping));
//!     drop(escaped);
//! }
//! # let _ = leak;
//! ```
//!
//! Inside the scope it is fine:
//!
//! ```
//! # use dinah_std::{Action, CodecError, SegmentReader, SegmentWriter, WireValue, schema_id};
//! # struct Ping;
//! # impl WireValue for Ping {
//! #     const SCHEMA_ID: u64 = schema_id("doc.Ping/1");
//! #     fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> { Ok(()) }
//! #     fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> { Ok(Ping) }
//! # }
//! # impl Action for Ping { const ID: u128 = 1; type Output = (); }
//! fn contained(runtime: &mut dinah_std::Runtime) {
//!     runtime.scope(|s| drop(s.spawn_on(dinah_core::Rank::ZERO, Ping)));
//! }
//! # let _ = contained;
//! ```
