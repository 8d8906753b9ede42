//! dinah's TCP transport.
//!
//! **Status:** this crate is a placeholder in the workspace layout. The TCP
//! transport (hello handshake, framing, control and action connections) and
//! the `dinah-run` launcher land in later work; nothing is exported yet.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]
