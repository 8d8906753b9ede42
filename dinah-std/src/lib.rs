//! dinah's std backend.
//!
//! **Status:** this crate is a placeholder in the workspace layout. The
//! local executor, scheduler and worker domains, the long-lived `Runtime`
//! with typed remote actions, the transport traits and the in-memory
//! fault-injecting transport land in later work; nothing is exported yet.
//! See `docs/architecture.md` for where each piece will live.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]
