//! Printing the checks and ending the run: one line per check, then QEMU's
//! exit status (success only if every check passed).

use core::panic::PanicInfo;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m_semihosting::{debug, hprintln};

static PASSED: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

/// The first line: what runs where.
pub fn banner() {
    hprintln!("dinah-firmware: dinah-core on a Cortex-M4F (QEMU mps2-an386), no allocator");
}

/// Records and prints one check.
pub fn check(name: impl core::fmt::Display, ok: bool) {
    if ok {
        PASSED.fetch_add(1, Ordering::Relaxed);
        hprintln!("ok   {}", name);
    } else {
        FAILED.fetch_add(1, Ordering::Relaxed);
        hprintln!("FAIL {}", name);
    }
}

/// Prints the totals and exits QEMU: status 0 only if nothing failed.
pub fn finish() -> ! {
    let (passed, failed) = (
        PASSED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    hprintln!("dinah-firmware: {} passed, {} failed", passed, failed);
    if failed == 0 && passed > 0 {
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        debug::exit(debug::EXIT_FAILURE);
    }
    // Not reached under QEMU; on hardware without a debugger, stop here.
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    hprintln!("dinah-firmware: panicked: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
