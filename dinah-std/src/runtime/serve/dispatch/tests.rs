//! The serving owner writes each pooled job into the block of one that
//! finished: however the workers are scheduled, no more blocks are ever
//! allocated than jobs were in flight at once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};

use crate::transport::memory::{FaultPlan, SimMode, SimNetwork};
use crate::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};

struct Echo(u64);

impl WireValue for Echo {
    const SCHEMA_ID: u64 = schema_id("dispatch.Echo/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Echo)
    }
}

impl Action for Echo {
    const ID: u128 = 0xd15_0001;
    type Output = u64;
}

#[test]
fn pooled_jobs_reuse_the_blocks_of_finished_ones() {
    const IN_FLIGHT: usize = 64;
    const CALLS: u64 = 2_000;
    let world = WorldSize::new(2).unwrap();
    let mode = SimMode::Stepped {
        tick: Duration::from_micros(1),
    };
    let network = SimNetwork::with_mode(world, 4, FaultPlan::new(), mode).unwrap();
    let mut runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let limits = RuntimeLimits::default();
            let mut builder = Runtime::builder(4, ProtocolLimits::default(), limits).unwrap();
            builder.register::<Echo, _>(|Echo(n)| Ok(n)).unwrap();
            builder.clock(std::sync::Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    let client = runtimes[0].client();
    let peer = Rank::new(1, world).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut waiting = VecDeque::new();
    let (mut issued, mut answered) = (0, 0);
    while answered < CALLS {
        while waiting.len() < IN_FLIGHT && issued < CALLS {
            waiting.push_back((issued, client.spawn_on(peer, Echo(issued))));
            issued += 1;
        }
        for runtime in &mut runtimes {
            runtime.progress();
        }
        network.step();
        while let Some((sent, future)) = waiting.front_mut() {
            let Poll::Ready(output) = Pin::new(future).poll(&mut cx) else {
                break;
            };
            assert_eq!(output.unwrap(), *sent);
            waiting.pop_front();
            answered += 1;
        }
    }
    let serve = runtimes[1].stats().serve;
    let (fresh, reused) = (serve.job_blocks_allocated, serve.job_blocks_reused);
    assert_eq!(fresh + reused, CALLS, "one block per job served");
    assert!(
        fresh <= IN_FLIGHT as u64,
        "{fresh} blocks allocated for at most {IN_FLIGHT} jobs at once"
    );
    // A stepped network moves only when stepped: a shutdown here would
    // wait for its peer forever.
    std::mem::forget(runtimes);
}
