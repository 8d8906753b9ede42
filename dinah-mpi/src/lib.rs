//! dinah's MPI transport on the [`mpi`] crate.
//!
//! **Status:** this crate is a placeholder in the workspace layout. The
//! polled, owner-thread MPI driver lands in later work; today the crate only
//! re-exports the `mpi` crate it builds on, so MPI programs in this
//! workspace (the MPI smoke test) link the same MPI bindings the transport
//! will use.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

pub use mpi;
