//! Compile-time guarantees, checked as doctests.
//!
//! The driver holds MPI requests and a communicator that belong to the
//! thread making MPI calls, so it must not cross threads:
//!
//! ```compile_fail
//! fn assert_send<T: Send>() {}
//! assert_send::<dinah_mpi::MpiDriver>();
//! ```
//!
//! ```compile_fail
//! fn assert_sync<T: Sync>() {}
//! assert_sync::<dinah_mpi::MpiDriver>();
//! ```
//!
//! The transport itself is plain configuration and may be built anywhere
//! and moved to the owner thread:
//!
//! ```
//! fn assert_send_sync<T: Send + Sync>() {}
//! assert_send_sync::<dinah_mpi::MpiTransport>();
//! assert_send_sync::<dinah_mpi::MpiConfig>();
//! assert_send_sync::<dinah_mpi::MpiError>();
//! ```
