//! First end-to-end checks of the runtime over the in-memory transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Poll;
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};

struct Add(u64, u64);
impl WireValue for Add {
    const SCHEMA_ID: u64 = schema_id("test.Add/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.0, self.1).encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (a, b) = <(u64, u64)>::decode(input)?;
        Ok(Add(a, b))
    }
}
impl Action for Add {
    const ID: u128 = 0xadd;
    type Output = u64;
}

#[test]
fn two_ranks_add_over_threads() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let arrived = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            let arrived = Arc::clone(&arrived);
            std::thread::spawn(move || {
                let mut builder =
                    Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                builder.register::<Add, _>(|Add(a, b)| Ok(a + b)).unwrap();
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let client = runtime.client();
                let peer = Rank::new(1 - rank.get(), world).unwrap();
                for i in 0..100 {
                    let sum = runtime.block_on(client.spawn_on(peer, Add(i, 1))).unwrap();
                    assert_eq!(sum, i + 1);
                }
                let local = runtime.block_on(client.spawn_on(rank, Add(2, 2))).unwrap();
                assert_eq!(local, 4);
                // A barrier that keeps progressing, so the peer's calls are
                // still served while this rank waits.
                arrived.fetch_add(1, Ordering::SeqCst);
                runtime.block_on(std::future::poll_fn(|_| {
                    if arrived.load(Ordering::SeqCst) == world.get() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                runtime.shutdown(Duration::from_secs(10))
            })
        })
        .collect();
    for thread in threads {
        let report = thread.join().unwrap().unwrap();
        assert!(report.is_clean(), "{report}");
    }
}
