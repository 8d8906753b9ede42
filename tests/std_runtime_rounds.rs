//! When the owner runs another round of progress at once and when it
//! waits: `Progress::unfinished` says whether a round stopped at one of
//! its budgets, and `block_on` follows a round that finished what it found
//! with a wait on the transport (which ends at its first check if anything
//! arrived), not with a second round that would find nothing.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::TransportError;
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    CodecError, DEFAULT_DOMAIN, RemoteFuture, Runtime, SegmentReader, SegmentWriter, schema_id,
};

#[path = "support/watched.rs"]
mod watched;
use watched::{Watch, Watched};

#[derive(Debug, Clone, PartialEq)]
struct Inc(u64);

impl dinah_std::WireValue for Inc {
    const SCHEMA_ID: u64 = schema_id("rounds.Inc/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Inc)
    }
}

impl dinah_std::Action for Inc {
    const ID: u128 = 0x0400_0001;
    type Output = u64;
}

/// The runtime's polls of its driver (`P`) and waits on it (`W`), in
/// order (the [`Watch`] of rank 1's driver).
#[derive(Debug, Default)]
struct Calls(RefCell<String>);

impl Calls {
    fn log(&self, call: char) {
        self.0.borrow_mut().push(call);
    }

    fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

impl Watch for Rc<Calls> {
    fn poll(&mut self) -> Result<(), TransportError> {
        self.log('P');
        Ok(())
    }

    fn idle_wait(&mut self) {
        self.log('W');
    }
}

/// Two runtimes serving `Inc` inline over a stepped network (nothing moves
/// unless the test steps it), each handling at most `per_round` events a
/// round; rank 1's driver counts its polls and waits.
fn stepped_pair(per_round: u32) -> (SimNetwork, Vec<Runtime>, Rc<Calls>) {
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
    let calls = Rc::new(Calls::default());
    let runtimes = world
        .ranks()
        .map(|rank| {
            // Only rank 1's driver counts into `calls`.
            let counted = if rank.index() == 1 {
                Rc::clone(&calls)
            } else {
                Rc::new(Calls::default())
            };
            let mut limits = RuntimeLimits::default();
            limits.max_progress_events = per_round;
            let mut builder = Runtime::builder(3, ProtocolLimits::default(), limits).unwrap();
            builder
                .register_inline::<Inc, _>(DEFAULT_DOMAIN, |Inc(x)| Ok(x + 1))
                .unwrap();
            builder.clock(Arc::new(network.clock()));
            let hello = builder.hello().unwrap();
            let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
            let driver = Watched {
                inner: driver,
                watch: counted,
            };
            builder.start(handle, driver).unwrap()
        })
        .collect();
    (network, runtimes, calls)
}

/// Lets rank 1 handle what it had, then sends `n` requests from rank 0 to
/// rank 1 and steps the network until rank 1 has them all waiting
/// (nothing is polled on rank 1 meanwhile).
/// Returns the calls, which the test keeps (dropping one would cancel it).
fn requests_waiting_at_rank_1(
    network: &SimNetwork,
    runtimes: &mut [Runtime],
    n: u64,
) -> Vec<RemoteFuture<u64>> {
    // Whatever the network had for rank 1 before (its set-up), handled.
    while runtimes[1].progress().did_work() {
        network.step();
    }
    let server = Rank::new(1, WorldSize::new(2).unwrap()).unwrap();
    let client = runtimes[0].client();
    let calls = (0..n).map(|x| client.spawn_on(server, Inc(x))).collect();
    runtimes[0].progress();
    for _ in 0..100 {
        network.step();
    }
    calls
}

#[test]
fn a_round_that_stops_at_its_budget_is_unfinished_and_the_last_one_is_not() {
    let (network, mut runtimes, _) = stepped_pair(2);
    let _calls = requests_waiting_at_rank_1(&network, &mut runtimes, 5);
    let rounds: Vec<(usize, bool)> = (0..4)
        .map(|_| {
            let progress = runtimes[1].progress();
            (progress.events, progress.unfinished)
        })
        .collect();
    assert_eq!(
        rounds,
        [(2, true), (2, true), (1, false), (0, false)],
        "two requests a round, then the one left, then nothing: {network}"
    );
}

/// A future pending at its first two polls and ready at its third, which
/// returns what the driver was asked (see [`Calls`]) from its creation up
/// to each poll.
fn logged_future(calls: &Rc<Calls>) -> impl Future<Output = Vec<String>> + '_ {
    let from = calls.len();
    let mut seen = Vec::new();
    std::future::poll_fn(move |_| {
        seen.push(calls.0.borrow()[from..].to_owned());
        if seen.len() == 3 {
            Poll::Ready(std::mem::take(&mut seen))
        } else {
            Poll::Pending
        }
    })
}

#[test]
fn block_on_waits_after_a_round_that_finished_what_it_found() {
    let (network, mut runtimes, calls) = stepped_pair(8);
    let _calls = requests_waiting_at_rank_1(&network, &mut runtimes, 1);
    let seen = runtimes[1].block_on(logged_future(&calls));
    // One round serves the request (second poll); with nothing left, a
    // wait follows it, then the next round (third poll).
    assert_eq!(seen, ["", "P", "PWP"], "{network}");
}

#[test]
fn block_on_runs_the_next_round_at_once_after_one_that_stopped_at_its_budget() {
    let (network, mut runtimes, calls) = stepped_pair(1);
    let _calls = requests_waiting_at_rank_1(&network, &mut runtimes, 3);
    let seen = runtimes[1].block_on(logged_future(&calls));
    // Each round serves one of the three requests and leaves the rest: no
    // wait between them.
    assert_eq!(seen, ["", "P", "PP"], "{network}");
}
