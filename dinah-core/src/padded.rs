//! [`Padded`]: a value on a cache line of its own.

/// Keeps a value on its own cache line(s), so that two counters written by
/// different threads (a queue's producer and consumer indices, an
/// admission's admitted and released counts) do not invalidate each
/// other's line.
///
/// 128 bytes on targets whose prefetcher pulls cache lines in pairs (as
/// crossbeam's `CachePadded` does), 32 on small embedded cores, 64
/// elsewhere.
#[cfg_attr(
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64"
    ),
    repr(align(128))
)]
#[cfg_attr(
    any(
        target_arch = "arm",
        target_arch = "mips",
        target_arch = "riscv32",
        target_arch = "msp430"
    ),
    repr(align(32))
)]
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "arm",
        target_arch = "mips",
        target_arch = "riscv32",
        target_arch = "msp430"
    )),
    repr(align(64))
)]
#[derive(Debug)]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
