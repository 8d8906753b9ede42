//! The RAM one entry of each table takes on this target, printed for the
//! size table of `docs/core.md` (a table's storage is its capacity times
//! its entry, sized once by the caller).

use core::mem::size_of;

use cortex_m_semihosting::hprintln;
use dinah_core::{
    DeadlineSlot, DedupSlot, MpmcSlot, PendingSlot, RuntimeLimits, TaskQueue, TraceBuffer,
};

pub fn run() {
    let limits = RuntimeLimits::DEFAULT;
    let entries: [(&str, usize, u32); 4] = [
        (
            "pending table entry (PendingSlot<u32>)",
            size_of::<PendingSlot<u32>>(),
            limits.max_pending_calls,
        ),
        (
            "dedup table entry (DedupSlot)",
            size_of::<DedupSlot>(),
            limits.max_dedup_entries,
        ),
        (
            "deadline queue entry (DeadlineSlot)",
            size_of::<DeadlineSlot>(),
            limits.max_pending_calls,
        ),
        (
            "MPMC queue entry (MpmcSlot<u32>)",
            size_of::<MpmcSlot<u32>>(),
            limits.max_action_queue,
        ),
    ];
    for (what, size, capacity) in entries {
        hprintln!(
            "size: {}: {} B; at the default capacity of {}: {} B",
            what,
            size,
            capacity,
            size * capacity as usize
        );
    }
    hprintln!(
        "size: TaskQueue<u32, 8>: {} B; TraceBuffer<4>: {} B",
        size_of::<TaskQueue<u32, 8>>(),
        size_of::<TraceBuffer<4>>()
    );
}
