//! Links dinah-core into a binary that has neither `std` nor an allocator.
//!
//! Built for the host (where a second `panic_impl` from `std` would clash
//! with ours) and for `thumbv7em-none-eabihf`.
#![no_std]
#![no_main]

use core::panic::PanicInfo;

// Keep the core's code in the link: exported symbols use its API.
#[unsafe(no_mangle)]
pub extern "C" fn dinah_nostd_check() -> usize {
    let limits = dinah_core::RuntimeLimits::DEFAULT;
    match (dinah_core::TaskId::new(7), limits.validate()) {
        (Ok(id), Ok(())) => id.get() as usize,
        _ => 0,
    }
}

#[panic_handler]
fn panic(_info: &PanicInfo<'_>) -> ! {
    loop {}
}

/// A critical section for a single-core binary: the check never runs code,
/// it only has to link.
struct SingleCore;
critical_section::set_impl!(SingleCore);

// SAFETY: this binary is never executed; it exists to be linked. A real
// single-core firmware would mask interrupts here.
unsafe impl critical_section::Impl for SingleCore {
    unsafe fn acquire() -> critical_section::RawRestoreState {
        false
    }
    unsafe fn release(_state: critical_section::RawRestoreState) {}
}

#[cfg(not(target_os = "none"))]
mod host {
    // The host build links against the C runtime for its entry point.
    #[link(name = "c")]
    unsafe extern "C" {}

    #[unsafe(no_mangle)]
    extern "C" fn rust_eh_personality() {}

    #[unsafe(no_mangle)]
    extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
        super::dinah_nostd_check() as i32
    }
}
