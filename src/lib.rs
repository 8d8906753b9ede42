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
//! | `tcp` (feature `tcp`, default) | `dinah-tcp` | TCP transport and launcher |
//! | `mpi` (feature `mpi`) | `dinah-mpi` | MPI transport |
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

#[doc(inline)]
pub use dinah_core as core;
#[cfg(feature = "mpi")]
#[doc(inline)]
pub use dinah_mpi as mpi;
#[doc(inline)]
pub use dinah_std as std;
#[cfg(feature = "tcp")]
#[doc(inline)]
pub use dinah_tcp as tcp;
