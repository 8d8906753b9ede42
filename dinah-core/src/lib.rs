#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![doc(test(attr(deny(warnings))))]

/// The crate's name, for diagnostics.
pub const CRATE_NAME: &str = "dinah-core";
