//! The runtime limits the in-memory runtime benchmarks share
//! (`runtime.rs` and `instructions.rs` measure the same configuration).

use dinah_core::RuntimeLimits;

/// The defaults with room for 256 calls in flight and their responses.
pub(crate) fn limits() -> RuntimeLimits {
    let mut limits = RuntimeLimits::default();
    limits.max_action_queue = 1024;
    limits.max_pending_calls = 2048;
    limits.max_send_tickets = 2048;
    limits
}
