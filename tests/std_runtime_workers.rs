//! Worker identity across a runtime's domains: each worker has a
//! `WorkerId` no other worker of the runtime shares, numbered from 1 in the
//! order the domains were declared, and handlers and trace events name the
//! same one.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use dinah_core::{
    DomainId, ProtocolLimits, Rank, RuntimeLimits, TraceBuffer, TraceEventKind, WorkerId, WorldSize,
};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, CodecError, Instrumentation, Runtime, SegmentReader, SegmentWriter, WireValue,
    schema_id,
};

/// Waits until every worker of its domain holds one, then reports the
/// worker it ran on.
struct Meet;
impl WireValue for Meet {
    const SCHEMA_ID: u64 = schema_id("test.workers.Meet/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Meet)
    }
}
impl Action for Meet {
    const ID: u128 = 0x3_0001;
    type Output = u64;
}

/// [`Meet`] in the second domain.
struct MeetAgain;
impl WireValue for MeetAgain {
    const SCHEMA_ID: u64 = schema_id("test.workers.MeetAgain/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(MeetAgain)
    }
}
impl Action for MeetAgain {
    const ID: u128 = 0x3_0002;
    type Output = u64;
}

#[test]
fn workers_of_different_domains_never_share_an_id() {
    const FIRST: usize = 2;
    const SECOND: usize = 3;
    let (first, second) = (DomainId::new(4).unwrap(), DomainId::new(9).unwrap());
    let mut limits = RuntimeLimits::default();
    limits.workers_per_domain = SECOND as u16;
    let world = WorldSize::new(1).unwrap();
    let network = SimNetwork::with_mode(world, 3, FaultPlan::new(), SimMode::Threaded).unwrap();
    let trace = Arc::new(TraceBuffer::<256>::new());
    let mut builder = Runtime::builder(6, ProtocolLimits::default(), limits).unwrap();
    builder
        .domain(first, NonZeroUsize::new(FIRST).unwrap())
        .unwrap()
        .domain(second, NonZeroUsize::new(SECOND).unwrap())
        .unwrap()
        .instrumentation(Arc::new(Instrumentation::with_trace(trace.clone())));
    // Every worker of a domain must hold one call before any returns, so
    // each call reports a different worker and together they report all.
    let meet_first = Arc::new(Barrier::new(FIRST));
    let meet_second = Arc::new(Barrier::new(SECOND));
    builder
        .register_with_context::<Meet, _>(first, move |Meet, ctx| {
            meet_first.wait();
            Ok(ctx.worker().map_or(0, WorkerId::get))
        })
        .unwrap();
    builder
        .register_with_context::<MeetAgain, _>(second, move |MeetAgain, ctx| {
            meet_second.wait();
            Ok(ctx.worker().map_or(0, WorkerId::get))
        })
        .unwrap();
    let hello = builder.hello().unwrap();
    let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
    let mut runtime = builder.start(handle, driver).unwrap();
    let client = runtime.client();

    let firsts: Vec<_> = (0..FIRST)
        .map(|_| client.spawn_on(Rank::ZERO, Meet))
        .collect();
    let seconds: Vec<_> = (0..SECOND)
        .map(|_| client.spawn_on(Rank::ZERO, MeetAgain))
        .collect();
    let (seen_first, seen_second) = runtime.block_on(async {
        let (mut seen_first, mut seen_second) = (BTreeSet::new(), BTreeSet::new());
        for call in firsts {
            seen_first.insert(call.await.unwrap());
        }
        for call in seconds {
            seen_second.insert(call.await.unwrap());
        }
        (seen_first, seen_second)
    });
    // Declared first, numbered first; the second domain carries on.
    assert_eq!(seen_first, BTreeSet::from([1, 2]));
    assert_eq!(seen_second, BTreeSet::from([3, 4, 5]));

    // The trace names the same workers for the same domains.
    let mut traced = (BTreeSet::new(), BTreeSet::new());
    for event in trace.snapshot() {
        if event.kind != TraceEventKind::Started {
            continue;
        }
        let worker = event.worker.expect("a job starts on a worker").get();
        match event.domain {
            Some(domain) if domain == first => traced.0.insert(worker),
            Some(domain) if domain == second => traced.1.insert(worker),
            other => panic!("a start in an undeclared domain: {other:?}"),
        };
    }
    assert_eq!(traced, (seen_first, seen_second));

    let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.is_clean(), "{report}");
}
