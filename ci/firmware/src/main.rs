//! dinah-core on a Cortex-M4F: every part of the core a firmware would use,
//! with fixed storage and no allocator, each check printed over
//! semihosting; QEMU exits with a failing status if any check fails (or
//! anything panics), so the lane cannot pass by printing.
//!
//! ```sh
//! cd ci/firmware && cargo run --release     # under qemu-system-arm
//! cargo xtask ci --lane embedded            # the same, then the sizes
//! ```
//!
//! Each part is a feature (all on by default), so that the `embedded` lane
//! can build the firmware without it and measure what it costs.
#![no_std]
#![no_main]

#[cfg(feature = "wire")]
mod fixtures;
#[cfg(feature = "interrupt")]
mod interrupt;
#[cfg(feature = "wire")]
mod rejections;
mod report;
mod sizes;
#[cfg(feature = "states")]
mod states;
#[cfg(feature = "tables")]
mod tables;
#[cfg(feature = "wire")]
mod wire;

use cortex_m_rt::entry;

#[entry]
fn main() -> ! {
    report::banner();
    sizes::run();
    #[cfg(feature = "states")]
    states::run();
    #[cfg(feature = "interrupt")]
    interrupt::run();
    #[cfg(feature = "wire")]
    wire::run();
    #[cfg(feature = "wire")]
    rejections::run();
    #[cfg(feature = "tables")]
    tables::run();
    report::finish()
}
