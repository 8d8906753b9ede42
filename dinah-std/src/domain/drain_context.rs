//! What a domain's workers hold while they drain its queue.
//!
//! A job that must reach its owner's state (the runtime's registry, clock
//! and completion queues) could carry a counted reference to it, but then
//! every job takes that reference on the submitting thread's core and lets
//! it go on a worker's: two transfers of one cache line per job. Instead
//! the runtime gives each of its domains an [`OwnerLink`] once; a worker
//! enters it once per drain of the queue (a trampoline, which runs every
//! job it finds) and hands the [`Context`] it yields to each job it runs.

pub(crate) use crate::runtime::OwnerLink;

/// The context a domain's jobs see: a client of the runtime that owns the
/// domain, or `None` for a domain without an owner (a standalone
/// [`Domain`](super::Domain)) or whose runtime is gone.
pub(crate) type Context<'a> = Option<&'a crate::runtime::RuntimeClient>;
