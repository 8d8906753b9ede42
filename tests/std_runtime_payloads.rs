//! Large payloads travel without copies: a `Vec<u8>` (or `String`) of at
//! least `DETACH_FROM` bytes in an action's last segment goes from the
//! caller's value to the handler's argument, and from the handler's
//! output to the caller's result, in the same allocation, over the
//! in-memory transport (which moves frames as they are), wherever the
//! buffer is in the payload. Smaller values are copied and arrive intact.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dinah_core::{ProtocolLimits, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{Action, DEFAULT_DOMAIN, DETACH_FROM, Runtime, WireValue};

/// Reports where the bytes it received live, and a checksum of them.
#[derive(WireValue, Action)]
#[wire(name = "test.payloads.Locate/1")]
#[action(name = "test.payloads.Locate/1", output = (u64, u64))]
struct Locate {
    label: String,
    bytes: Vec<u8>,
}

/// As `Locate`, run inline on the owner thread.
#[derive(WireValue, Action)]
#[wire(name = "test.payloads.LocateInline/1")]
#[action(name = "test.payloads.LocateInline/1", output = (u64, u64))]
struct LocateInline(Vec<u8>);

/// The large segment first: a middle part of its frame.
#[derive(WireValue, Action)]
#[wire(name = "test.payloads.Reordered/1")]
#[action(name = "test.payloads.Reordered/1", output = (u64, u64))]
struct Reordered {
    bytes: Vec<u8>,
    label: String,
}

/// Answers with a fresh buffer of `len` bytes, after recording where it
/// lives in `MADE`.
#[derive(WireValue, Action)]
#[wire(name = "test.payloads.Make/1")]
#[action(name = "test.payloads.Make/1", output = Vec<u8>)]
struct Make(u64);

/// Where the last buffer `Make` answered with lives.
static MADE: AtomicUsize = AtomicUsize::new(0);

fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().enumerate().fold(0, |sum, (i, &b)| {
        sum.wrapping_mul(31).wrapping_add(u64::from(b) ^ i as u64)
    })
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

fn address(bytes: &[u8]) -> u64 {
    bytes.as_ptr() as usize as u64
}

fn register(builder: &mut dinah_std::RuntimeBuilder) {
    builder
        .register::<Locate, _>(|Locate { label, bytes }| {
            assert_eq!(label, "locate");
            Ok((address(&bytes), checksum(&bytes)))
        })
        .unwrap();
    builder
        .register_inline::<LocateInline, _>(DEFAULT_DOMAIN, |LocateInline(bytes)| {
            Ok((address(&bytes), checksum(&bytes)))
        })
        .unwrap();
    builder
        .register::<Reordered, _>(|Reordered { bytes, label }| {
            assert_eq!(label, "after");
            Ok((address(&bytes), checksum(&bytes)))
        })
        .unwrap();
    builder
        .register::<Make, _>(|Make(len)| {
            let bytes = pattern(len as usize);
            MADE.store(bytes.as_ptr() as usize, Ordering::SeqCst);
            Ok(bytes)
        })
        .unwrap();
}

#[test]
fn large_byte_buffers_reach_the_other_side_in_the_same_allocation() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let (network, done) = (network.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut builder =
                    Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                register(&mut builder);
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                if rank.get() == 1 {
                    while !done.load(Ordering::SeqCst) {
                        runtime.progress();
                    }
                } else {
                    calls(&mut runtime);
                    done.store(true, Ordering::SeqCst);
                }
                let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
                assert_eq!(report.pending_calls, 0);
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// Rank 0's calls to rank 1.
fn calls(runtime: &mut Runtime) {
    let client = runtime.client();
    let peer = runtime.world().rank(1).unwrap();
    for len in [DETACH_FROM, 1 << 20, 3 << 20] {
        // Into a pooled handler and an inline one: the same allocation.
        let bytes = pattern(len);
        let (at, sum) = (address(&bytes), checksum(&bytes));
        let label = "locate".to_owned();
        let back = runtime.block_on(client.spawn_on(peer, Locate { label, bytes }));
        assert_eq!(back.unwrap(), (at, sum), "{len} bytes, pooled");
        let bytes = pattern(len);
        let (at, sum) = (address(&bytes), checksum(&bytes));
        let back = runtime.block_on(client.spawn_on(peer, LocateInline(bytes)));
        assert_eq!(back.unwrap(), (at, sum), "{len} bytes, inline");

        // From the handler's output to the caller's result.
        let made = runtime
            .block_on(client.spawn_on(peer, Make(len as u64)))
            .unwrap();
        assert_eq!(made, pattern(len));
        assert_eq!(
            made.as_ptr() as usize,
            MADE.load(Ordering::SeqCst),
            "{len} bytes back"
        );
    }
    // Below the threshold: copied, intact.
    let bytes = pattern(DETACH_FROM - 1);
    let (at, sum) = (address(&bytes), checksum(&bytes));
    let label = "locate".to_owned();
    let back = runtime
        .block_on(client.spawn_on(peer, Locate { label, bytes }))
        .unwrap();
    assert_eq!(back.1, sum);
    assert_ne!(back.0, at, "a small buffer is copied");
    let bytes = pattern(1 << 20);
    let (at, sum) = (address(&bytes), checksum(&bytes));
    let label = "after".to_owned();
    let back = runtime
        .block_on(client.spawn_on(peer, Reordered { bytes, label }))
        .unwrap();
    assert_eq!(back, (at, sum), "not the last segment: the same allocation");
}
