//! A cancellation requested from an interrupt handler (SysTick) and seen
//! by the main loop: the token is what a job polls between steps.

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use dinah_core::CancelFlag;

use crate::report::check;

/// The flag the SysTick handler sets.
static CANCEL: CancelFlag = CancelFlag::new();

/// SysTick interrupts so far.
static TICKS: AtomicU32 = AtomicU32::new(0);

/// The tick on which the handler requests the cancellation.
const CANCEL_AT: u32 = 3;

#[exception]
fn SysTick() {
    let ticks = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
    if ticks == CANCEL_AT {
        CANCEL.request();
    }
}

pub fn run() {
    let token = CANCEL.token();
    check(
        "cancellation: not requested before the interrupt",
        !token.is_cancellation_requested() && token.check().is_ok(),
    );
    let mut peripherals = cortex_m::Peripherals::take().expect("taken once");
    let syst = &mut peripherals.SYST;
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(20_000);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
    // The job's loop: a step of work, then a look at its token.
    let mut steps = 0u32;
    while !token.is_cancellation_requested() && steps < 50_000_000 {
        steps += 1;
        cortex_m::asm::nop();
    }
    syst.disable_interrupt();
    syst.disable_counter();
    check(
        "cancellation: requested by the SysTick handler, seen by the main loop",
        token.is_cancellation_requested() && token.check().is_err(),
    );
    check(
        "cancellation: on the tick that requested it, not before",
        TICKS.load(Ordering::Relaxed) >= CANCEL_AT,
    );
    check(
        "cancellation: a second request reports it was already made",
        !CANCEL.request(),
    );
}
