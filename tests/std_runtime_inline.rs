//! Inline registrations (`RuntimeBuilder::register_inline` and
//! `register_inline_with_context`): requests from other ranks run on the
//! serving rank's owner thread, and everything else (results, typed
//! errors, panics, dedup, shutdown, the handler's context) behaves as for
//! a handler on a worker domain.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread::ThreadId;
use std::time::Duration;

use dinah_core::wire::TraceId;
use dinah_core::{ProtocolLimits, Rank, RequestId, RuntimeLimits, WorkerId, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, ActionContext, ActionError, CodecError, DEFAULT_DOMAIN, FailureKind, Runtime,
    RuntimeError, SegmentReader, SegmentWriter, SpawnOptions, WireValue, schema_id,
};

/// Returns its input plus one.
struct Inc(u64);
impl WireValue for Inc {
    const SCHEMA_ID: u64 = schema_id("test.inline.Inc/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Inc)
    }
}
impl Action for Inc {
    const ID: u128 = 0x1_0001;
    type Output = u64;
}

/// Fails with its text, or panics with it when `panic` is set.
struct Fail {
    panic: bool,
    text: String,
}
impl WireValue for Fail {
    const SCHEMA_ID: u64 = schema_id("test.inline.Fail/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.panic, self.text.clone()).encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (panic, text) = <(bool, String)>::decode(input)?;
        Ok(Fail { panic, text })
    }
}
impl Action for Fail {
    const ID: u128 = 0x1_0002;
    type Output = ();
}

#[test]
fn inline_handlers_run_on_the_owner_thread_and_fail_like_pooled_ones() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let arrived = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            let arrived = Arc::clone(&arrived);
            std::thread::spawn(move || {
                let runs_on: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
                let seen = Arc::clone(&runs_on);
                let mut builder =
                    Runtime::builder(3, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                builder
                    .register_inline::<Inc, _>(DEFAULT_DOMAIN, move |Inc(x)| {
                        seen.lock().unwrap().push(std::thread::current().id());
                        Ok(x + 1)
                    })
                    .unwrap();
                builder
                    .register_inline::<Fail, _>(DEFAULT_DOMAIN, |Fail { panic, text }| {
                        if panic {
                            panic!("{text}");
                        }
                        Err(ActionError::new(text))
                    })
                    .unwrap();
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let client = runtime.client();
                let peer = Rank::new(1 - rank.get(), world).unwrap();
                for i in 0..50 {
                    assert_eq!(
                        runtime.block_on(client.spawn_on(peer, Inc(i))).unwrap(),
                        i + 1
                    );
                }
                let error = runtime
                    .block_on(client.spawn_on(
                        peer,
                        Fail {
                            panic: false,
                            text: "refused".into(),
                        },
                    ))
                    .unwrap_err();
                assert!(
                    matches!(&error, RuntimeError::Remote { kind: FailureKind::Returned, text, .. } if text == "refused"),
                    "{error:?}"
                );
                let error = runtime
                    .block_on(client.spawn_on(
                        peer,
                        Fail {
                            panic: true,
                            text: "inline kaboom".into(),
                        },
                    ))
                    .unwrap_err();
                assert!(
                    matches!(&error, RuntimeError::Remote { kind: FailureKind::Panicked, text, .. } if text.contains("inline kaboom")),
                    "{error:?}"
                );
                // The panic left the serving owner thread working.
                assert_eq!(runtime.block_on(client.spawn_on(peer, Inc(7))).unwrap(), 8);
                // A call to this rank itself runs on a worker, not here.
                assert_eq!(runtime.block_on(client.spawn_on(rank, Inc(1))).unwrap(), 2);

                arrived.fetch_add(1, Ordering::SeqCst);
                runtime.block_on(std::future::poll_fn(|_| {
                    if arrived.load(Ordering::SeqCst) == world.get() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
                assert!(report.is_clean(), "{report}");
                let owner = std::thread::current().id();
                let threads = runs_on.lock().unwrap().clone();
                // 51 remote calls from the peer, all on this owner thread;
                // the one local call on a worker.
                assert_eq!(threads.len(), 52, "{threads:?}");
                assert_eq!(threads.iter().filter(|t| **t == owner).count(), 51);
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// Sleeps for its number of milliseconds.
struct Sleep(u64);
impl WireValue for Sleep {
    const SCHEMA_ID: u64 = schema_id("test.inline.Sleep/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Sleep)
    }
}
impl Action for Sleep {
    const ID: u128 = 0x1_0003;
    type Output = ();
}

#[test]
fn an_inline_request_whose_deadline_passed_behind_a_slow_one_never_runs() {
    // Rank 1 polls only once rank 0 sent everything, so one progress round
    // receives the slow request and then three with a short deadline. Their
    // deadlines count from that round's start; the slow handler ran past
    // them before they could start, so none may run.
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let sent = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let increments = Arc::new(AtomicU32::new(0));
    let builder = |increments: Arc<AtomicU32>| {
        let mut builder =
            Runtime::builder(4, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
        builder
            .register_inline::<Sleep, _>(DEFAULT_DOMAIN, |Sleep(ms)| {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            })
            .unwrap();
        builder
            .register_inline::<Inc, _>(DEFAULT_DOMAIN, move |Inc(x)| {
                increments.fetch_add(1, Ordering::SeqCst);
                Ok(x + 1)
            })
            .unwrap();
        builder
    };
    let server = {
        let (network, sent, done) = (network.clone(), Arc::clone(&sent), Arc::clone(&done));
        let builder = builder(Arc::clone(&increments));
        std::thread::spawn(move || {
            let hello = builder.hello().unwrap();
            let me = world.rank(1).unwrap();
            let (handle, driver) = network.endpoint(me, hello.handle).unwrap();
            let mut runtime = builder.start(handle, driver).unwrap();
            while !sent.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            runtime.block_on(std::future::poll_fn(|_| {
                if done.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }));
            runtime.shutdown(Duration::from_secs(10)).unwrap()
        })
    };
    let builder = builder(Arc::new(AtomicU32::new(0)));
    let hello = builder.hello().unwrap();
    let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
    let mut runtime = builder.start(handle, driver).unwrap();
    let client = runtime.client();
    let peer = world.rank(1).unwrap();
    let slow = client.spawn_on(peer, Sleep(100));
    let short = SpawnOptions::deadline(Duration::from_millis(20));
    let late: Vec<_> = (0..3)
        .map(|i| client.spawn_on_with(peer, Inc(i), short))
        .collect();
    sent.store(true, Ordering::SeqCst);
    runtime.block_on(slow).unwrap();
    for future in late {
        let error = runtime.block_on(future).unwrap_err();
        assert!(
            matches!(error, RuntimeError::DeadlineExceeded { .. }),
            "{error:?}"
        );
    }
    done.store(true, Ordering::SeqCst);
    // Both ranks shut down at once: each waits for the other's goodbye.
    let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.is_clean(), "{report}");
    let report = server.join().unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(increments.load(Ordering::SeqCst), 0, "no late request ran");
}

/// A response queued while a round of progress serves its request leaves
/// in that same round: `progress` ends by flushing what it queued, so the
/// serving rank needs no second round before the caller can have it.
/// Two runtimes with `Inc` registered inline, over a stepped network on
/// its own clock (nothing moves unless the test steps it).
fn stepped_pair() -> (WorldSize, SimNetwork, Vec<Runtime>) {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(
        world,
        1,
        FaultPlan::new(),
        SimMode::Stepped {
            tick: Duration::from_micros(1),
        },
    )
    .unwrap();
    let runtimes: Vec<Runtime> = world
        .ranks()
        .map(|rank| {
            let mut builder =
                Runtime::builder(3, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
            builder
                .register_inline::<Inc, _>(DEFAULT_DOMAIN, |Inc(x)| Ok(x + 1))
                .unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            builder.start(handle, driver).unwrap()
        })
        .collect();
    (world, network, runtimes)
}

#[test]
fn an_inline_response_leaves_in_the_round_that_served_its_request() {
    let (world, network, mut runtimes) = stepped_pair();
    let server = Rank::new(1, world).unwrap();
    let mut future = std::pin::pin!(runtimes[0].client().spawn_on(server, Inc(41)));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    runtimes[0].progress();
    assert_eq!(network.counts().sent, 1, "the request left: {network}");
    // Rank 1 polls until the request arrives; that round serves it.
    let mut rounds = 0;
    while runtimes[1].progress().events == 0 {
        rounds += 1;
        assert!(rounds < 100, "the request never arrived: {network}");
        network.step();
    }
    assert_eq!(
        network.counts().sent,
        2,
        "the response left in the round that served the request: {network}"
    );
    // From here only rank 0 makes progress.
    for _ in 0..100 {
        if let Poll::Ready(result) = future.as_mut().poll(&mut cx) {
            assert_eq!(result.unwrap(), 42);
            return;
        }
        network.step();
        runtimes[0].progress();
    }
    panic!("the answer never arrived without another round on rank 1: {network}");
}

/// `block_on` sends the request of a call spawned just before it once its
/// future waits, ahead of the first round; a future ready at its first
/// poll returns without sending, so that the requests spawned between
/// such waits (a caller collecting many answers) leave together.
#[test]
fn block_on_sends_queued_requests_once_its_future_waits_and_not_before() {
    let (world, network, mut runtimes) = stepped_pair();
    let server = Rank::new(1, world).unwrap();
    let client = runtimes[0].client();
    let calls: Vec<_> = (0..3).map(|n| client.spawn_on(server, Inc(n))).collect();
    let sent = || network.counts().sent;
    let before = sent();
    runtimes[0].block_on(std::future::ready(()));
    assert_eq!(sent(), before, "nothing sent for a future ready at once");
    let mut polls = 0;
    let at_second_poll = runtimes[0].block_on(std::future::poll_fn(|_| {
        polls += 1;
        if polls == 1 {
            Poll::Pending
        } else {
            Poll::Ready(sent())
        }
    }));
    assert_eq!(at_second_poll, before + 3, "all three sent once it waited");
    drop(calls);
}

/// The owner thread counts its events during a round and publishes them
/// when the round ends: a client on any thread then reads exactly what
/// the owner's own `stats()` reads, and both ranks' byte counts agree.
#[test]
fn owner_counts_are_published_when_each_round_ends() {
    let (world, network, mut runtimes) = stepped_pair();
    let server = Rank::new(1, world).unwrap();
    let clients = [runtimes[0].client(), runtimes[1].client()];
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    const CALLS: u64 = 5;
    for n in 0..CALLS {
        let mut future = std::pin::pin!(clients[0].spawn_on(server, Inc(n)));
        let mut rounds = 0;
        loop {
            if let Poll::Ready(result) = future.as_mut().poll(&mut cx) {
                assert_eq!(result.unwrap(), n + 1);
                break;
            }
            rounds += 1;
            assert!(rounds < 1000, "call {n} never finished: {network}");
            for runtime in &mut runtimes {
                runtime.progress();
            }
            network.step();
        }
        // Between rounds, another thread's reading is the owner's.
        for (client, runtime) in clients.iter().zip(&runtimes) {
            let from_elsewhere = std::thread::scope(|s| s.spawn(|| client.metrics()).join());
            assert_eq!(from_elsewhere.unwrap(), runtime.stats().metrics);
        }
    }
    let [caller, served] = [clients[0].metrics(), clients[1].metrics()];
    assert_eq!(caller.completed, CALLS);
    assert_eq!(caller.submitted, CALLS);
    assert!(caller.bytes_sent > 0 && served.bytes_sent > 0);
    assert_eq!(caller.bytes_sent, served.bytes_received, "requests");
    assert_eq!(served.bytes_sent, caller.bytes_received, "responses");
    // Dropped here, never blocking; clients outlive their runtimes.
    drop(runtimes);
    assert_eq!(clients[0].metrics(), caller);
}

/// Reports what its handler's context says: (origin, trace, request,
/// worker or 0, the client's rank, the deadline in nanoseconds).
struct Who;
impl WireValue for Who {
    const SCHEMA_ID: u64 = schema_id("test.inline.Who/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(Who)
    }
}
impl Action for Who {
    const ID: u128 = 0x1_0004;
    type Output = (u32, u64, u64, u64, u32, u64);
}

/// The same as [`Who`], registered on the domain's workers.
struct WhoPooled;
impl WireValue for WhoPooled {
    const SCHEMA_ID: u64 = schema_id("test.inline.WhoPooled/1");
    fn encode(&self, _: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }
    fn decode(_: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(WhoPooled)
    }
}
impl Action for WhoPooled {
    const ID: u128 = 0x1_0005;
    type Output = (u32, u64, u64, u64, u32, u64);
}

fn who(ctx: &ActionContext<'_>) -> (u32, u64, u64, u64, u32, u64) {
    (
        ctx.origin().get(),
        ctx.trace().map_or(0, TraceId::get),
        ctx.request().get(),
        ctx.worker().map_or(0, WorkerId::get),
        ctx.client().rank().get(),
        ctx.deadline().as_nanos(),
    )
}

#[test]
fn inline_handlers_see_the_context_pooled_ones_see() {
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
                    Runtime::builder(5, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                builder
                    .register_inline_with_context::<Who, _>(DEFAULT_DOMAIN, |Who, ctx| Ok(who(ctx)))
                    .unwrap();
                builder
                    .register_with_context::<WhoPooled, _>(DEFAULT_DOMAIN, |WhoPooled, ctx| {
                        Ok(who(ctx))
                    })
                    .unwrap();
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let client = runtime.client();
                let peer = Rank::new(1 - rank.get(), world).unwrap();
                let trace = TraceId::new(0x7e57 + u64::from(rank.get())).unwrap();
                let options = SpawnOptions::deadline(Duration::from_secs(30)).with_trace(trace);

                let inline = runtime
                    .block_on(client.spawn_on_with(peer, Who, options))
                    .unwrap();
                let pooled = runtime
                    .block_on(client.spawn_on_with(peer, WhoPooled, options))
                    .unwrap();
                for (seen, worker) in [(inline, false), (pooled, true)] {
                    let (origin, seen_trace, request, seen_worker, client_rank, deadline) = seen;
                    assert_eq!(origin, rank.get(), "the caller's rank");
                    assert_eq!(seen_trace, trace.get(), "the caller's trace");
                    assert_ne!(request, 0);
                    assert_eq!(client_rank, peer.get(), "a client of the serving rank");
                    assert!(deadline > 0);
                    // The runtime's only domain has workers 1 and 2 (the
                    // default limits' two); the inline handler is on none.
                    if worker {
                        assert!((1..=2).contains(&seen_worker), "{seen:?}");
                    } else {
                        assert_eq!(seen_worker, 0, "{seen:?}");
                    }
                }
                // The two calls are the origin's first two to this peer.
                let sequence = |id| RequestId::new(id).unwrap().sequence(world);
                assert_eq!(sequence(inline.2), (peer, 0));
                assert_eq!(sequence(pooled.2), (peer, 1));

                arrived.fetch_add(1, Ordering::SeqCst);
                runtime.block_on(std::future::poll_fn(|_| {
                    if arrived.load(Ordering::SeqCst) == world.get() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                let report = runtime.shutdown(Duration::from_secs(10)).unwrap();
                assert!(report.is_clean(), "{report}");
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}
