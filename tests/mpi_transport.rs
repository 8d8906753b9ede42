//! MPI-specific transport tests, beyond the conformance suite: the driver
//! alone (frames of every size, request and buffer reuse, counts back to
//! zero, small frames sent in batches and handed out one per poll, each
//! peer's advertised admission capacity, the control lane passing a
//! saturated action lane, a peer that announces a frame past the bound
//! reported down for a protocol violation), a clean
//! runtime shutdown with an all-zero report, incompatible and late ranks
//! at bootstrap (a typed error on every rank, never a hang), deadlines and
//! cancellations that overtake their requests, a rank stopped with
//! `SIGSTOP` declared down by liveness, and, last, a rank that leaves
//! early.
//!
//! A `harness = false` program run under `mpirun -n 1`, `2` and `4` by
//! `cargo xtask ci --lane mpi`; every step runs on every rank, in order.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "each rank reports its progress"
)]

#[path = "support/conformance.rs"]
mod conformance;
#[path = "support/freeze.rs"]
mod freeze;
#[path = "support/mpi_harness.rs"]
mod mpi_harness;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use conformance::{Add, Block, Count, RankCtx, RankState, Sleep};
use dinah::core::wire::{HelloField, TailWidth};
use dinah::core::{Fingerprint, ProtocolLimits, Rank};
use dinah::mpi::mpi::topology::SimpleCommunicator;
use dinah::mpi::mpi::traits::{Communicator, CommunicatorCollectives};
use dinah::mpi::{MpiConfig, MpiDriver, MpiError, MpiTransport};
use dinah::std::transport::{
    Channel, DownReason, DriverCounts, Frame, HandleConfig, PeerStatus, Tail, TransportDriver,
    TransportError, TransportEvent, TransportHandle, TransportHello,
};
use dinah::std::{
    Action, CodecError, Runtime, RuntimeBuilder, RuntimeError, SegmentReader, SegmentWriter,
    SpawnOptions, WireValue, schema_id,
};

/// The longest any wait here may take before the step fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn main() {
    let mpi = mpi_harness::Harness::init("mpi_transport");
    mpi.step(
        "connect_from_another_thread_is_refused",
        connect_from_another_thread_is_refused,
    );
    mpi.step(
        "frames_of_every_size_and_request_reuse",
        frames_of_every_size_and_request_reuse,
    );
    mpi.step(
        "small_frames_in_batches_under_a_budget_of_one",
        small_frames_in_batches_under_a_budget_of_one,
    );
    mpi.step(
        "control_passes_a_saturated_action_lane",
        control_passes_a_saturated_action_lane,
    );
    mpi.step(
        "a_control_frame_sent_first_is_handed_out_first",
        a_control_frame_sent_first_is_handed_out_first,
    );
    mpi.step("flush_posts_queued_frames", flush_posts_queued_frames);
    mpi.step(
        "taken_receive_slots_are_posted_again_before_waiting",
        taken_receive_slots_are_posted_again_before_waiting,
    );
    mpi.step(
        "an_oversized_announcement_is_a_protocol_violation",
        an_oversized_announcement_is_a_protocol_violation,
    );
    mpi.step(
        "a_tail_of_numbers_arrives_in_its_width_or_as_received",
        a_tail_of_numbers_arrives_in_its_width_or_as_received,
    );
    mpi.step(
        "frames_in_parts_arrive_in_parts",
        frames_in_parts_arrive_in_parts,
    );
    mpi.step(
        "clean_shutdown_reports_all_zero",
        clean_shutdown_reports_all_zero,
    );
    mpi.step(
        "fingerprint_mismatch_fails_every_rank",
        fingerprint_mismatch_fails_every_rank,
    );
    mpi.step(
        "run_id_mismatch_fails_every_rank",
        run_id_mismatch_fails_every_rank,
    );
    mpi.step(
        "a_late_rank_makes_the_others_time_out",
        a_late_rank_makes_the_others_time_out,
    );
    mpi.step("deadline_then_late_result", deadline_then_late_result);
    mpi.step(
        "cancels_overtaking_their_requests",
        cancels_overtaking_their_requests,
    );
    mpi.step(
        "a_stopped_rank_is_declared_down_within_the_liveness_timeout",
        a_stopped_rank_is_declared_down_within_the_liveness_timeout,
    );
    mpi.step(
        "nothing_stale_reaches_the_next_transport",
        nothing_stale_reaches_the_next_transport,
    );
    // Last: the highest rank stops taking part in dinah.
    mpi.step("a_rank_that_leaves_early", a_rank_that_leaves_early);
    mpi.finish();
}

// ---------------------------------------------------------------------------
// Helpers.

fn rank_of(world: &SimpleCommunicator) -> (u32, u32) {
    (world.rank() as u32, world.size() as u32)
}

/// A hello for a bare driver (no runtime, no registry).
fn bare_hello(handle: HandleConfig) -> TransportHello {
    TransportHello {
        run_id: 0xd1,
        protocol_limits: ProtocolLimits::DEFAULT,
        fingerprint: Fingerprint::from_u128(7),
        handle,
    }
}

fn connect_bare(world: &SimpleCommunicator, handle: HandleConfig) -> (TransportHandle, MpiDriver) {
    MpiTransport::new()
        .connect(world, bare_hello(handle))
        .unwrap_or_else(|error| panic!("connect: {error}"))
}

/// The next and the previous rank of `driver`'s, around the world.
fn ring(driver: &MpiDriver) -> (Rank, Rank) {
    let (me, size) = (driver.rank().get(), driver.world().get());
    let w = driver.world();
    (
        w.rank((me + 1) % size).unwrap(),
        w.rank((me + size - 1) % size).unwrap(),
    )
}

/// Polls until `step`, given the driver and each poll's events (first
/// none), returns `true`; fails after [`PATIENCE`].
fn poll_until(
    driver: &mut MpiDriver,
    what: &str,
    budget: usize,
    mut step: impl FnMut(&MpiDriver, &mut Vec<TransportEvent>) -> bool,
) {
    let start = Instant::now();
    let mut events = Vec::new();
    while !step(driver, &mut events) {
        assert!(
            start.elapsed() < PATIENCE,
            "rank {}: gave up waiting for {what}",
            driver.rank().get()
        );
        events.clear();
        let progress = driver.poll(budget, &mut events).expect("poll");
        if !progress {
            driver.idle_wait(Duration::from_micros(50), Duration::from_millis(1));
        }
    }
}

/// Shuts a bare driver down (goodbyes, drain) and closes it; returns what
/// the close reported. `drained` are the peers whose `PeerDrained` was
/// seen already (a peer that finished first starts its shutdown earlier).
fn shut_down(mut driver: MpiDriver, mut drained: Vec<Rank>) -> DriverCounts {
    driver.begin_shutdown();
    poll_until(&mut driver, "the drain", 64, |driver, events| {
        for event in events.drain(..) {
            if let TransportEvent::PeerDrained { peer } = event {
                drained.push(peer);
            }
        }
        driver.is_drained()
    });
    drained.sort();
    let others: Vec<_> = driver
        .world()
        .ranks()
        .filter(|&peer| peer != driver.rank())
        .collect();
    assert_eq!(drained, others, "every peer drained once");
    driver.close(std::time::Instant::now() + Duration::from_secs(5))
}

/// The bytes of frame `index` from `sender`: a pattern both sides can
/// recompute. It never starts with the protocol magic, so it is never
/// mistaken for a goodbye.
fn pattern(sender: u32, index: usize, len: usize) -> Vec<u8> {
    let seed = (sender as usize * 7919 + index * 104_729) as u32;
    (0..len)
        .map(|i| (seed.wrapping_add((i as u32).wrapping_mul(2_654_435_761)) >> 13) as u8 | 0x80)
        .collect()
}

fn assert_all_zero(counts: DriverCounts, what: &str) {
    assert_eq!(counts.in_flight_frames, 0, "{what}: {counts:?}");
    assert_eq!(counts.retained_bytes, 0, "{what}: {counts:?}");
    assert_eq!(counts.undrained_peers, 0, "{what}: {counts:?}");
}

fn assert_handle_empty(handle: &TransportHandle, what: &str) {
    let counts = handle.counts();
    assert_eq!(
        (
            counts.queued_control,
            counts.queued_action,
            counts.in_flight,
            counts.retained_bytes
        ),
        (0, 0, 0, 0),
        "{what}: {counts:?}"
    );
}

/// What [`receive_in_order`] saw.
struct Exchange {
    /// Frames and bytes received (all of the expected ones).
    frames: usize,
    bytes: usize,
    /// `PeerUp` events seen.
    ups: u32,
    /// Peers whose `PeerDrained` was seen.
    drained: Vec<Rank>,
}

/// Polls with `budget` until every frame of `expected` (per lane) came
/// from `previous` and nothing of this rank's is in flight; checks that
/// each lane's frames are exactly the expected ones, in order, and that
/// the driver counted them.
fn receive_in_order(
    driver: &mut MpiDriver,
    what: &str,
    budget: usize,
    previous: Rank,
    expected: &[Vec<Vec<u8>>; 2],
) -> Exchange {
    let frames = expected[0].len() + expected[1].len();
    let bytes: usize = expected.iter().flatten().map(Vec::len).sum();
    let mut received = [Vec::new(), Vec::new()];
    let mut exchange = Exchange {
        frames,
        bytes,
        ups: 0,
        drained: Vec::new(),
    };
    poll_until(driver, what, budget, |driver, events| {
        for event in events.drain(..) {
            match event {
                TransportEvent::Frame {
                    from,
                    channel,
                    frame,
                } => {
                    assert_eq!(from, previous);
                    received[channel.index()].push(frame.into_whole());
                }
                TransportEvent::PeerUp { .. } => exchange.ups += 1,
                TransportEvent::PeerDrained { peer } => exchange.drained.push(peer),
                other => panic!("unexpected {other:?}"),
            }
        }
        received[0].len() + received[1].len() == frames && driver.handle().counts().in_flight == 0
    });
    for channel in Channel::ALL {
        let (got, want) = (&received[channel.index()], &expected[channel.index()]);
        assert_eq!(got.len(), want.len(), "{channel} frames");
        if let Some(i) = got.iter().zip(want).position(|(got, want)| got != want) {
            panic!(
                "{channel} frame {i}: {} bytes, expected {} in order",
                got[i].len(),
                want[i].len()
            );
        }
    }
    let counts = driver.counts();
    assert_eq!(counts.frames_received, frames as u64);
    assert_eq!(counts.bytes_received, bytes as u64);
    // Nothing of this rank's is in flight. Received bytes are checked
    // after the close: a peer that finished first may have sent its
    // goodbyes already, and this rank may be receiving them.
    assert_eq!(counts.in_flight_frames, 0, "{counts:?}");
    exchange
}

// ---------------------------------------------------------------------------
// The driver alone.

/// Under `Funneled`, only the thread that initialised MPI may connect.
fn connect_from_another_thread_is_refused(_world: &SimpleCommunicator) {
    use dinah::mpi::mpi::{Threading, environment};
    // With more than Funneled (OpenMPI may grant more than asked), any
    // thread may call MPI and the check does not apply.
    if environment::threading_support() != Threading::Funneled {
        println!("mpi_transport: MPI granted more than Funneled; nothing to check");
        return;
    }
    let hello = bare_hello(HandleConfig::default());
    let error = std::thread::spawn(move || {
        let world = SimpleCommunicator::world();
        MpiTransport::new()
            .connect(&world, hello)
            .map(|_| ())
            .unwrap_err()
    })
    .join()
    .expect("the thread returns");
    assert_eq!(error, MpiError::NotMainThread);
}

/// Every rank sends frames of sizes from 1 byte to 1 MiB (eager and
/// rendezvous protocols; up to a posted receive's 3,968 bytes, and
/// announced on the lane's large tag past it) to the next rank on both
/// lanes, three rounds over the same driver; each lane's frames arrive
/// intact and in order, large and small interleaved, and afterwards every
/// count is back to zero. A 16-byte frame looks like the announcement of
/// a large frame; in the first round it is sent alone (between two large
/// frames of its lane, so nothing is batched with it): it arrives as it
/// was.
fn frames_of_every_size_and_request_reuse(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    let (handle, mut driver) = connect_bare(world, HandleConfig::default());
    let (next, previous) = ring(&driver);
    let sizes = [
        1,
        79,
        80,
        100,
        3968,
        3969,
        4096,
        16_384,
        16,
        16_385,
        65_536,
        300_000,
        1 << 20,
    ];
    // The 16-byte frame looks like an announcement.
    let frame = |sender: u32, index: usize, len: usize| {
        let body = pattern(sender, index, len);
        if len == 16 {
            [&b"DNAHbig1"[..], &body[..8]].concat()
        } else {
            body
        }
    };
    let rounds = 3;
    let mut expected = [Vec::new(), Vec::new()];
    let mut index = 0;
    for _ in 0..rounds {
        for &len in &sizes {
            let channel = if (len <= 4096 && index % 2 == 0) || len == 16_385 || len == 16 {
                Channel::Control
            } else {
                Channel::Action
            };
            handle
                .try_send(next, channel, frame(me, index, len))
                .expect("queued");
            expected[channel.index()].push(frame(previous.get(), index, len));
            index += 1;
        }
    }
    let exchange = receive_in_order(&mut driver, "every frame", 16, previous, &expected);
    assert_eq!(exchange.ups, size - 1, "one PeerUp per peer");
    assert_eq!(handle.counts().frames_sent, exchange.frames as u64);
    assert_handle_empty(&handle, "after the exchange");
    let closed = shut_down(driver, exchange.drained);
    assert_all_zero(closed, "after the close");
    assert_handle_empty(&handle, "after the close");
    assert!(handle.is_closed());
}

/// Every rank queues hundreds of small frames of assorted sizes (some
/// empty, one that starts like the transport's batch marker) to the next
/// rank on both lanes before its first poll, so the driver sends them in
/// batches; the receiver takes one event per poll, so batches are handed
/// out over many polls. Every frame arrives intact, in order per lane,
/// and every count (frames, bytes, in flight, retained) adds up. Each rank
/// advertises its own admission capacity (10 + its rank), and every handle
/// knows every peer's from the hellos.
fn small_frames_in_batches_under_a_budget_of_one(world: &SimpleCommunicator) {
    const ACTION: usize = 300;
    const CONTROL: usize = 40;
    let (me, _) = rank_of(world);
    let config = HandleConfig {
        action_queue: 512,
        control_queue: 64,
        retained_bytes: 1 << 20,
        admission_capacity: 10 + me,
    };
    let (handle, mut driver) = connect_bare(world, config);
    for peer in handle.world().ranks() {
        assert_eq!(
            handle.peer_admission(peer),
            NonZeroU32::new(10 + peer.get()),
            "rank {me}: the admission capacity of {peer}"
        );
    }
    let (next, previous) = ring(&driver);
    // Sizes 0..=199 and, every 50th frame, the batch marker itself
    // followed by a pattern (it must not be taken for a batch), and as
    // often what looks like the announcement of a large frame (it must
    // not be taken for one).
    let frame = |sender: u32, index: usize| {
        let body = pattern(sender, index, index % 200);
        match index % 50 {
            7 => [&b"DNAHbat1"[..], &body].concat(),
            23 => [&b"DNAHbig1"[..], &body[..8]].concat(),
            _ => body,
        }
    };
    let mut expected = [Vec::new(), Vec::new()];
    for index in 0..ACTION + CONTROL {
        let channel = if index % 8 == 3 && index / 8 < CONTROL {
            Channel::Control
        } else {
            Channel::Action
        };
        handle
            .try_send(next, channel, frame(me, index))
            .expect("queued");
        expected[channel.index()].push(frame(previous.get(), index));
    }
    let exchange = receive_in_order(&mut driver, "every small frame", 1, previous, &expected);
    let sent = handle.counts();
    assert_eq!(
        (sent.frames_sent, sent.bytes_sent),
        (exchange.frames as u64, exchange.bytes as u64)
    );
    assert_handle_empty(&handle, "after the small frames");
    assert_all_zero(
        shut_down(driver, exchange.drained),
        "after the small frames",
    );
}

/// `flush` posts the handle's frames (control lane first) without
/// receiving anything; with nothing queued it reports no progress.
fn flush_posts_queued_frames(world: &SimpleCommunicator) {
    let (me, _) = rank_of(world);
    let config = HandleConfig {
        action_queue: 64,
        control_queue: 64,
        retained_bytes: 1 << 20,
        admission_capacity: 0,
    };
    let (handle, mut driver) = connect_bare(world, config);
    let (next, previous) = ring(&driver);
    let mut events = Vec::new();
    assert!(
        !driver.flush(16, &mut events).expect("flush"),
        "nothing queued, nothing posted"
    );
    handle
        .try_send(next, Channel::Action, pattern(me, 0, 64))
        .expect("queued");
    handle
        .try_send(next, Channel::Control, pattern(me, 1, 8))
        .expect("queued");
    assert!(driver.flush(16, &mut events).expect("flush"));
    assert!(events.is_empty(), "a flush receives nothing: {events:?}");
    assert!(!handle.has_queued(), "both frames were posted");
    let expected = [
        vec![pattern(previous.get(), 1, 8)],
        vec![pattern(previous.get(), 0, 64)],
    ];
    let exchange = receive_in_order(&mut driver, "the flushed frames", 16, previous, &expected);
    assert_handle_empty(&handle, "after the flushed frames");
    assert_all_zero(
        shut_down(driver, exchange.drained),
        "after the flushed frames",
    );
}

/// A receive slot a poll took a message from is posted again after the
/// poll's sends, and before the owner waits: each rank sends frames around
/// the ring, one at a time; right after the poll that takes one, its slot
/// is not posted yet, and after the next poll, or an idle wait, every slot
/// is again, so a ring never runs short while its owner waits.
fn taken_receive_slots_are_posted_again_before_waiting(world: &SimpleCommunicator) {
    const DEPTH: usize = 4;
    let (me, _) = rank_of(world);
    let mut config = MpiConfig::DEFAULT;
    config.posted_receives = DEPTH;
    // No heartbeats: nothing but the test's frames is received.
    config.liveness_timeout = None;
    let (handle, mut driver) = MpiTransport::with_config(config)
        .connect(world, bare_hello(HandleConfig::default()))
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let (next, previous) = ring(&driver);
    assert_eq!(driver.posted_receives_for_tests(), [DEPTH, DEPTH]);
    for index in 0..2 * DEPTH {
        let sent = pattern(me, index, 64);
        handle
            .try_send(next, Channel::Action, sent)
            .expect("queued");
        let mut got = None;
        poll_until(&mut driver, "the next frame", 16, |_, events| {
            for event in events.drain(..) {
                match event {
                    TransportEvent::Frame { from, frame, .. } => {
                        got = Some((from, frame.into_whole()));
                    }
                    TransportEvent::PeerUp { .. } => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            got.is_some()
        });
        assert_eq!(got, Some((previous, pattern(previous.get(), index, 64))));
        assert_eq!(
            driver.posted_receives_for_tests(),
            [DEPTH, DEPTH - 1],
            "frame {index}: the slot it was taken from waits for the next sends"
        );
        // Posted again by whichever comes next: a poll (after its sends),
        // or an idle wait (before it waits).
        let when = if index % 2 == 0 {
            let mut events = Vec::new();
            driver.poll(16, &mut events).expect("poll");
            assert!(events.is_empty(), "frame {index}: nothing else: {events:?}");
            "by the next poll"
        } else {
            driver.idle_wait(Duration::ZERO, Duration::from_micros(1));
            "before the wait"
        };
        assert_eq!(
            driver.posted_receives_for_tests(),
            [DEPTH, DEPTH],
            "frame {index}: posted again {when}"
        );
        // One frame at a time: no rank sends the next before all took this.
        world.barrier();
    }
    assert_all_zero(shut_down(driver, Vec::new()), "after the frames");
}

/// Rank 0 fills its action lane to the next rank with 32 frames of
/// 256 KiB, then queues one control frame; the receiver, taking one event
/// per poll, gets the control frame before the action lane is through.
fn control_passes_a_saturated_action_lane(world: &SimpleCommunicator) {
    const FLOOD: usize = 32;
    let (me, size) = rank_of(world);
    let (handle, mut driver) = connect_bare(world, HandleConfig::default());
    let w = driver.world();
    let target = w.rank(1 % size).unwrap();
    let mut events = Vec::new();
    let mut drained = Vec::new();
    if me == 0 {
        for i in 0..FLOOD {
            handle
                .try_send(target, Channel::Action, pattern(0, i, 256 * 1024))
                .expect("queued");
        }
        driver.poll(1024, &mut events).expect("poll");
        handle
            .try_send(target, Channel::Control, b"cancel".to_vec())
            .expect("queued");
        driver.poll(1024, &mut events).expect("poll");
    }
    // Everything is posted before the target starts taking. (In a world of
    // one, rank 0 sends to itself and may already have taken some.)
    world.barrier();
    let mut order: Vec<_> = events
        .drain(..)
        .filter_map(|event| {
            if let TransportEvent::Frame { channel, .. } = event {
                Some(channel)
            } else {
                None
            }
        })
        .collect();
    let is_target = me == target.get();
    poll_until(&mut driver, "the flood", 1, |driver, events| {
        for event in events.drain(..) {
            match event {
                TransportEvent::Frame { channel, .. } => order.push(channel),
                TransportEvent::PeerDrained { peer } => drained.push(peer),
                _ => {}
            }
        }
        (!is_target || order.len() == FLOOD + 1) && driver.handle().counts().in_flight == 0
    });
    if is_target && size > 1 {
        let position = order
            .iter()
            .position(|&c| c == Channel::Control)
            .expect("the control frame arrived");
        println!(
            "mpi_transport: control frame delivered at position {position} of {}",
            FLOOD + 1
        );
        assert!(
            position < FLOOD,
            "the control frame waited behind the whole action lane: {order:?}"
        );
    }
    assert_all_zero(shut_down(driver, drained), "after the flood");
    assert_handle_empty(&handle, "after the flood");
}

/// A control frame posted before an action frame to the same peer is
/// handed out before it, however the receiver finds them: each rank sends
/// both around the ring, many times over, while the next rank waits in
/// its idle check (which tests the action tag first) and polls with a
/// budget of one event.
fn a_control_frame_sent_first_is_handed_out_first(world: &SimpleCommunicator) {
    const ROUNDS: usize = 50;
    let (me, _) = rank_of(world);
    let mut config = MpiConfig::DEFAULT;
    // No heartbeats: nothing but the test's frames is received.
    config.liveness_timeout = None;
    let (handle, mut driver) = MpiTransport::with_config(config)
        .connect(world, bare_hello(HandleConfig::default()))
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let (next, previous) = ring(&driver);
    let mut drained = Vec::new();
    for index in 0..ROUNDS {
        for channel in [Channel::Control, Channel::Action] {
            handle
                .try_send(next, channel, pattern(me, index, 24))
                .expect("queued");
        }
        let mut order = Vec::new();
        poll_until(&mut driver, "both frames", 1, |_, events| {
            for event in events.drain(..) {
                match event {
                    TransportEvent::Frame { from, channel, .. } => {
                        assert_eq!(from, previous, "round {index}");
                        order.push(channel);
                    }
                    TransportEvent::PeerUp { .. } => {}
                    TransportEvent::PeerDrained { peer } => drained.push(peer),
                    other => panic!("unexpected {other:?}"),
                }
            }
            order.len() == 2
        });
        assert_eq!(
            order,
            [Channel::Control, Channel::Action],
            "round {index}: the control frame was sent first"
        );
        // One round at a time, so each starts with both tags empty.
        world.barrier();
    }
    assert_all_zero(shut_down(driver, drained), "after the rounds");
    assert_handle_empty(&handle, "after the rounds");
}

/// Rank 1 breaks the protocol: it announces to rank 0 an action frame one
/// byte longer than `max_frame_bytes`, which no dinah sender does, then
/// sends an ordinary frame on the same lane. Rank 0 reports rank 1 down for
/// a protocol violation without receiving the announced frame, takes the
/// ordinary frame's message behind it and drops it unread: nothing from
/// rank 1 is handed over.
/// Nobody drains (rank 1 never learns that rank 0 gave up on it): every
/// rank closes. With one rank there is nobody to break the protocol, and
/// the step does nothing.
fn an_oversized_announcement_is_a_protocol_violation(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    if size < 2 {
        return;
    }
    let (handle, mut driver) = connect_bare(world, HandleConfig::default());
    let w = driver.world();
    let (zero, one) = (w.rank(0).unwrap(), w.rank(1).unwrap());
    let mut from_one = Vec::new();
    let mut down = None;
    // What rank 1's messages became at rank 0.
    let mut note = |events: &mut Vec<TransportEvent>| -> bool {
        for event in events.drain(..) {
            match event {
                TransportEvent::Frame { from, frame, .. } if from == one => {
                    from_one.push(frame.into_whole());
                }
                TransportEvent::PeerDown { peer, error } if peer == one => down = Some(error),
                _ => {}
            }
        }
        down.is_some()
    };
    if me == 1 {
        let too_long = ProtocolLimits::DEFAULT.max_frame_bytes as usize + 1;
        driver.send_announcement_for_tests(zero, Channel::Action, too_long);
        handle
            .try_send(zero, Channel::Action, b"after the violation".to_vec())
            .expect("queued");
        poll_until(
            &mut driver,
            "the ordinary frame sent",
            64,
            |driver, events| {
                events.clear();
                let counts = driver.handle().counts();
                counts.queued_action == 0 && counts.in_flight == 0
            },
        );
    }
    // Both of rank 1's messages are with MPI before rank 0 looks.
    world.barrier();
    if me == 0 {
        poll_until(&mut driver, "rank 1 down", 64, |_, events| note(events));
        // The ordinary frame's message arrives behind the announcement
        // and is dropped unread.
        poll_until(
            &mut driver,
            "the later message dropped",
            64,
            |driver, events| {
                note(events);
                driver.dropped_from_violators_for_tests() >= 1
            },
        );
        assert!(
            matches!(
                down,
                Some(TransportError::PeerDown {
                    reason: DownReason::ProtocolViolation,
                    ..
                })
            ),
            "rank 0: rank 1 went down for another cause: {down:?}"
        );
        assert!(
            from_one.is_empty(),
            "rank 0: frames from rank 1 were handed over: {from_one:?}"
        );
        assert_eq!(handle.peer_status(one), PeerStatus::Down);
        println!("mpi_transport: rank 1 down for a protocol violation, nothing of it handed over");
    }
    world.barrier();
    driver.close(Instant::now() + Duration::from_secs(1));
}

/// Every rank sends the next around the ring frames held in parts: a
/// head with two middle parts (eight-byte numbers, then bytes) and a tail
/// of numbers, one whose last segment is in its head, and one whose parts
/// are long enough to travel in pieces (odd lengths, so a piece of
/// numbers ends inside a number). Each arrives as its bytes, every part in
/// a buffer of its own at its place, numbers in their width, and nothing
/// stays counted as retained.
fn frames_in_parts_arrive_in_parts(world: &SimpleCommunicator) {
    let (me, _) = rank_of(world);
    let (handle, mut driver) = connect_bare(world, HandleConfig::default());
    let (next, previous) = ring(&driver);
    let sent = |sender: u32| {
        let numbers: Vec<u64> = (0..9_000).map(|i| i * 3 + u64::from(sender)).collect();
        let bytes = pattern(sender, 1, 70_001);
        let tail: Vec<u32> = (0..20_000).map(|i| i ^ sender).collect();
        let middle = vec![(40, Tail::from_numbers(numbers)), (60, Tail::from(bytes))];
        let with_tail =
            Frame::with_middle(pattern(sender, 0, 100), middle, Tail::from_numbers(tail));
        let middle = vec![(0, Tail::from(pattern(sender, 2, 66_000)))];
        let without = Frame::with_middle(pattern(sender, 3, 10), middle, Vec::new());
        let long_numbers: Vec<u32> = (0..150_001).map(|i| i * 7 + sender).collect();
        let middle = vec![(5, Tail::from(pattern(sender, 4, 600_001)))];
        let long = Frame::with_middle(
            pattern(sender, 5, 30),
            middle,
            Tail::from_numbers(long_numbers),
        );
        [with_tail, without, long]
    };
    for frame in sent(me) {
        handle
            .try_send(next, Channel::Action, frame)
            .expect("queued");
    }
    let mut frames = Vec::new();
    poll_until(&mut driver, "the frames in parts", 64, |_, events| {
        for event in events.drain(..) {
            if let TransportEvent::Frame { from, frame, .. } = event {
                assert_eq!(from, previous, "rank {me}: from the previous rank");
                frames.push(frame);
            }
        }
        frames.len() == 3
    });
    let expected = sent(previous.get());
    for (got, want) in frames.iter_mut().zip(&expected) {
        assert!(got.bytes_eq(&want.to_vec()), "rank {me}: the bytes");
        let places: Vec<_> = got.part_places().collect();
        let wanted: Vec<_> = want.part_places().collect();
        assert_eq!(places, wanted, "rank {me}: each part at its place");
        let widths = |frame: &mut Frame| -> Vec<TailWidth> {
            let (_, middle, tail) = frame.parts_apart_mut();
            let middle = middle.iter().map(|(_, part)| part.width());
            middle.chain(tail.map(|tail| tail.width())).collect()
        };
        let mut want = want.clone();
        assert_eq!(widths(got), widths(&mut want), "rank {me}: in their widths");
    }
    poll_until(&mut driver, "nothing retained", 64, |driver, _| {
        driver.counts().retained_bytes == 0
    });
    println!("mpi_transport: frames in parts arrived in parts");
    world.barrier();
    driver.close(Instant::now() + Duration::from_secs(1));
}

/// Rank 1 sends rank 0 two split frames whose tails are announced as
/// eight-byte numbers: one whose tail is what it announced, which arrives
/// kept in that width (on a little-endian machine), and one whose tail is
/// half as long as announced, which arrives as the bytes received (so the
/// runtime's length checks see what came). Then one whose head is shorter
/// than announced, with a middle part placed past it, which arrives with
/// every byte received and nothing placed past its head. Then one whose
/// tail is announced long enough to be received in pieces and is shorter
/// than announced, so the sender's pieces are not the receiver's: it
/// arrives with the bytes up to the first piece that came short, none
/// past them. Nothing stays counted as retained once the frames are
/// handed out.
fn a_tail_of_numbers_arrives_in_its_width_or_as_received(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    if size < 2 {
        return;
    }
    let (_handle, mut driver) = connect_bare(world, HandleConfig::default());
    let w = driver.world();
    let (zero, one) = (w.rank(0).unwrap(), w.rank(1).unwrap());
    let head = pattern(1, 0, 200);
    let whole = pattern(1, 1, 80_000);
    let short = pattern(1, 2, 40_000);
    // Sent as two pieces of 300,000 bytes into receives of 450,000 each.
    let cut = pattern(1, 3, 600_000);
    if me == 1 {
        for tail in [&whole, &short] {
            let parts = (&head[..], &tail[..]);
            driver.send_split_for_tests(zero, Channel::Action, parts, 80_000, TailWidth::Eight);
        }
        // A head shorter than announced, a middle part placed past it.
        let places = [
            (150, 70_000, TailWidth::One),
            (200, 80_000, TailWidth::Eight),
        ];
        let parts: [&[u8]; 2] = [&short, &whole];
        driver.send_parts_for_tests(zero, Channel::Action, (200, &head[..100]), &places, &parts);
        let parts = (&head[..], &cut[..]);
        driver.send_split_for_tests(zero, Channel::Action, parts, 900_000, TailWidth::Eight);
    }
    if me == 0 {
        let mut frames = Vec::new();
        poll_until(&mut driver, "the split frames", 64, |_, events| {
            for event in events.drain(..) {
                if let TransportEvent::Frame { from, frame, .. } = event {
                    assert_eq!(from, one, "rank 0: only rank 1 sends");
                    frames.push(frame);
                }
            }
            frames.len() == 4
        });
        let cut_short = &frames[3];
        assert_eq!(cut_short.head(), head, "rank 0: the head");
        assert_eq!(
            cut_short.tail(),
            &cut[..300_000],
            "rank 0: the first piece, nothing after it"
        );
        assert_eq!(cut_short.tail_width(), TailWidth::One);
        // Every byte received, the middle part at the short head's end
        // (the runtime refuses it: its parts do not match its table).
        let lying = &frames[2];
        assert_eq!(
            lying.len(),
            100 + short.len() + whole.len(),
            "rank 0: every byte"
        );
        let places: Vec<usize> = lying.part_places().map(|place| place.at).collect();
        assert_eq!(places, [100, 100], "rank 0: the places clamped to the head");
        let kept = TailWidth::Eight.for_len(whole.len());
        for (frame, tail, width) in [
            (&frames[0], &whole, kept),
            (&frames[1], &short, TailWidth::One),
        ] {
            assert_eq!(frame.head(), head, "rank 0: the head");
            assert_eq!(frame.tail(), &tail[..], "rank 0: the tail as received");
            assert_eq!(frame.tail_width(), width, "rank 0: the tail's width");
        }
        poll_until(&mut driver, "nothing retained", 64, |driver, _| {
            driver.counts().retained_bytes == 0
        });
        println!("mpi_transport: a tail of numbers arrived in its width, a short one as received");
    }
    world.barrier();
    driver.close(Instant::now() + Duration::from_secs(1));
}

// ---------------------------------------------------------------------------
// Runtimes.

fn start(world: &SimpleCommunicator, builder: RuntimeBuilder, state: Arc<RankState>) -> RankCtx {
    let hello = builder.hello().expect("hello");
    let (handle, driver) = MpiTransport::new()
        .connect(world, hello)
        .unwrap_or_else(|error| panic!("connect: {error}"));
    RankCtx::new(builder.start(handle, driver).expect("start"), state)
}

fn suite_runtime(world: &SimpleCommunicator) -> RankCtx {
    let state = Arc::new(RankState::default());
    start(world, conformance::builder(&state), state)
}

/// Calls on every rank, a barrier, and a shutdown whose report is zero in
/// every outstanding count and in the dropped cancellations and responses.
fn clean_shutdown_reports_all_zero(world: &SimpleCommunicator) {
    let mut ctx = suite_runtime(world);
    let client = ctx.rt().client();
    let calls: Vec<_> = ctx
        .world()
        .ranks()
        .map(|rank| client.spawn_on(rank, Add((rank.get().into(), 1))))
        .collect();
    for (rank, call) in ctx.world().ranks().zip(calls) {
        assert_eq!(ctx.wait(call).expect("add"), u64::from(rank.get()) + 1);
    }
    let report = ctx.finish().expect("clean shutdown");
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        (
            report.pending_calls,
            report.action_jobs,
            report.send_tickets,
            report.dedup_entries,
            report.pending_events,
            report.retained_bytes,
            report.undrained_peers,
            report.cancels_dropped.total(),
        ),
        (0, 0, 0, 0, 0, 0, 0, 0),
        "{report}"
    );
}

/// An action only some ranks register.
struct Extra(u64);

impl WireValue for Extra {
    const SCHEMA_ID: u64 = schema_id("mpi_transport.Extra/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Extra)
    }
}

impl Action for Extra {
    const ID: u128 = 0xe47a_0001;
    type Output = u64;
}

/// Connects with `builder`; at one rank the connection must succeed, at
/// more every rank must fail with a handshake error on `field`, naming the
/// odd rank (or, on the odd rank, rank 0).
fn expect_mismatch(
    world: &SimpleCommunicator,
    builder: RuntimeBuilder,
    odd: u32,
    field: HelloField,
) {
    let (me, size) = rank_of(world);
    let result = MpiTransport::new().connect(world, builder.hello().expect("hello"));
    if size == 1 {
        let (handle, driver) = result.expect("a world of one has no peer to disagree with");
        let report = builder
            .start(handle, driver)
            .expect("start")
            .shutdown(Duration::from_secs(10))
            .expect("clean");
        assert!(report.is_clean(), "{report}");
        return;
    }
    let error = result
        .map(|_| ())
        .expect_err("an incompatible world must not connect");
    let MpiError::Handshake { peer, mismatch } = error else {
        panic!("rank {me}: unexpected {error:?}")
    };
    assert_eq!(mismatch.field, field, "rank {me}: {error}");
    assert_eq!(
        peer.get(),
        if me == odd { 0 } else { odd },
        "rank {me}: {error}"
    );
    println!("mpi_transport: rank {me}: refused as expected: {error}");
}

/// The highest rank registers one more action than the others.
fn fingerprint_mismatch_fails_every_rank(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    let state = Arc::new(RankState::default());
    let mut builder = conformance::builder(&state);
    if me == size - 1 {
        builder
            .register_in::<Extra, _>(conformance::WORK, |Extra(x)| Ok(x))
            .expect("register");
    }
    expect_mismatch(world, builder, size - 1, HelloField::Fingerprint);
}

/// The highest rank belongs to another run.
fn run_id_mismatch_fails_every_rank(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    let state = Arc::new(RankState::default());
    let run = if me == size - 1 {
        conformance::RUN_ID + 1
    } else {
        conformance::RUN_ID
    };
    let mut builder =
        Runtime::builder(run, ProtocolLimits::default(), conformance::limits()).expect("builder");
    conformance::register(&mut builder, &state);
    expect_mismatch(world, builder, size - 1, HelloField::RunId);
}

/// The highest rank connects only after the others' bootstrap deadline:
/// they all fail with a setup timeout instead of waiting, and so does the
/// late rank (nobody answers its hello).
fn a_late_rank_makes_the_others_time_out(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    if size == 1 {
        return;
    }
    let mut config = MpiConfig::default();
    config.bootstrap_timeout = Duration::from_millis(300);
    if me == size - 1 {
        std::thread::sleep(Duration::from_millis(1200));
    }
    let start = Instant::now();
    let error = MpiTransport::with_config(config)
        .connect(world, bare_hello(HandleConfig::default()))
        .map(|_| ())
        .expect_err("a late rank cannot complete the bootstrap");
    assert!(
        matches!(error, MpiError::SetupTimeout { .. }),
        "rank {me}: {error:?}"
    );
    println!(
        "mpi_transport: rank {me}: {error} after {:.2?}",
        start.elapsed()
    );
    // Let every rank be done with the failed bootstrap before the next step
    // (its late messages then find nobody waiting, on a leaked communicator).
    world.barrier();
}

/// A call to a blocked handler fails with its deadline; the result that
/// comes after the gate opens is discarded as late.
fn deadline_then_late_result(world: &SimpleCommunicator) {
    let mut ctx = suite_runtime(world);
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(ctx.world().get() - 1);
        let options = SpawnOptions::deadline(Duration::from_millis(100));
        let call = client.spawn_on_with(target, Block(()), options);
        let error = ctx.wait(call).unwrap_err();
        assert!(
            matches!(error, RuntimeError::DeadlineExceeded { .. }),
            "{error:?}"
        );
        // The handler is blocked (or its job was refused, being cancelled
        // before it started): open the gate; its result, if any, is late.
        ctx.release(target, true);
        ctx.wait_until("the handler to finish", move |ctx| {
            ctx.stats_of(target).3 == 0
        });
        if target != ctx.rank() {
            ctx.wait_until("the late answer", |ctx| {
                ctx.rt().stats().metrics.late_results_discarded >= 1
            });
        }
        ctx.release(target, false);
        assert!(ctx.rt().stats().metrics.deadline_expiries >= 1);
    }
    let report = ctx.finish().expect("clean shutdown");
    assert!(report.is_clean(), "{report}");
}

/// Rank 0 starts and at once drops 300 calls to the last rank: each
/// cancellation travels on the control tag and may overtake its request
/// on the action tag. Whatever the interleaving, nothing hangs, every
/// call ends exactly once, at most the calls that were not cancelled in
/// time run, and the shutdown is clean (the tombstones of cancellations
/// that arrived first are cleared with the dedup table).
fn cancels_overtaking_their_requests(world: &SimpleCommunicator) {
    const CALLS: u64 = 300;
    let mut ctx = suite_runtime(world);
    if ctx.rank() == Rank::ZERO {
        let client = ctx.rt().client();
        let target = ctx.next(ctx.world().get() - 1);
        let (counted_before, ..) = ctx.stats_of(target);
        let requested_before = ctx.rt().stats().metrics.cancellation_requested;
        let waited_before = ctx.rt().stats().flow.waited;
        for _ in 0..CALLS {
            drop(client.spawn_on(target, Count(())));
        }
        if target != ctx.rank() {
            // A call sent asks for its cancellation; one still waiting for
            // room in this rank's share of the target's queue was never
            // sent and is dropped here.
            let stats = ctx.rt().stats();
            let requested = stats.metrics.cancellation_requested - requested_before;
            let waited = stats.flow.waited - waited_before;
            assert!(
                requested + waited >= CALLS && requested <= CALLS,
                "{requested} cancellations requested and {waited} calls never sent \
                 for {CALLS} dropped calls"
            );
        }
        // A marker behind them all (the target's queue may still be full
        // of the calls whose cancellation came too late).
        let start = Instant::now();
        let marker = loop {
            assert!(start.elapsed() < PATIENCE, "the marker was never admitted");
            match ctx.wait(client.spawn_on(target, Count(()))) {
                Ok(counted) => break counted,
                Err(RuntimeError::ResourceExhausted { .. }) => {
                    // Let the owner thread finish the admitted calls.
                    let _ = ctx.rt().progress();
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(other) => panic!("marker: {other:?}"),
            }
        };
        let ran = marker - counted_before - 1;
        println!(
            "mpi_transport: {ran} of {CALLS} dropped calls ran before their cancellation reached them"
        );
        assert!(ran <= CALLS);
        assert_eq!(ctx.rt().stats().pending_calls, 0);
    }
    let report = ctx.finish().expect("clean shutdown");
    assert!(report.is_clean(), "{report}");
}

/// The liveness timeout of the stopped-rank step.
const LIVENESS: Duration = Duration::from_secs(1);

/// Waits until this rank has answered every call it served and its
/// transport has sent the answers, with `running` calls still running:
/// a rank about to stop or leave must not take a barrier answer with it
/// (its barrier completes once every arrival ran here, which may be before
/// the answers went out).
fn wait_for_answers_sent(ctx: &mut RankCtx, running: usize) {
    ctx.wait_until("the answers sent", move |ctx| {
        let stats = ctx.rt().stats();
        stats.action_jobs <= running
            && stats.completions == 0
            && stats.handle.queued_action == 0
            && stats.handle.queued_control == 0
            && stats.handle.in_flight == 0
            && stats.serve.responses_waiting == 0
    });
}

/// The highest rank stops itself with `SIGSTOP` while the others wait on
/// a call to it: each declares it down ([`DownReason::Silent`]) within the
/// liveness timeout, far before the call's deadline, and shuts down
/// cleanly without it; rank 0 then wakes it, and it shuts down too (its
/// peers, gone by then, fall silent for it in turn). With one rank there
/// is nobody to stop: the rank checks that liveness leaves it alone.
fn a_stopped_rank_is_declared_down_within_the_liveness_timeout(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    let freezer = freeze::Freezer::prepare();
    let mut pids = vec![0u32; size as usize];
    world.all_gather_into(&freezer.pid(), &mut pids[..]);
    let state = Arc::new(RankState::default());
    let builder = conformance::builder(&state);
    let hello = builder.hello().expect("hello");
    let mut config = MpiConfig::default();
    config.liveness_timeout = Some(LIVENESS);
    let (handle, driver) = MpiTransport::with_config(config)
        .connect(world, hello)
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let mut ctx = RankCtx::new(builder.start(handle, driver).expect("start"), state);
    ctx.barrier();
    if size == 1 {
        // Alone: three timeouts of progress, and nobody is declared down.
        let start = Instant::now();
        ctx.wait_until("three liveness timeouts", |_| {
            start.elapsed() > 3 * LIVENESS
        });
        let report = ctx.finish().expect("clean shutdown");
        assert!(report.is_clean(), "{report}");
        return;
    }
    let last = ctx.world().rank(size - 1).unwrap();
    if me == last.get() {
        // Every other rank's call arrived here (after its barrier arrival;
        // this rank's own arrival is served locally, not counted), so
        // every barrier answer reached its rank before this one stops.
        ctx.wait_until("the others' calls", move |ctx| {
            ctx.rt().stats().serve.served >= u64::from(2 * (size - 1))
        });
        let resumed_unwoken = freezer.freeze_until_woken();
        println!("mpi_transport: rank {me}: resumed without a wake {resumed_unwoken} time(s)");
        // Woken by rank 0 after the others shut down.
        let report = ctx.take_runtime().shutdown(Duration::from_secs(20));
        println!("mpi_transport: rank {me}: woke up; shutdown: {report:?}");
        return;
    }
    let client = ctx.rt().client();
    let started = Instant::now();
    let call = client.spawn_on_with(
        last,
        Sleep((120_000, true)),
        SpawnOptions::deadline(PATIENCE),
    );
    match ctx.wait(call) {
        Err(RuntimeError::Transport { peer, error }) => {
            assert_eq!(peer, last);
            assert!(
                matches!(error, dinah::std::transport::TransportError::PeerDown { reason, .. }
                    if reason == dinah::std::transport::DownReason::Silent),
                "{error}"
            );
        }
        other => panic!("the call to the stopped rank ended with {other:?}"),
    }
    assert!(
        started.elapsed() < PATIENCE / 2,
        "declared down only after {:?}",
        started.elapsed()
    );
    let report = ctx
        .take_runtime()
        .shutdown(Duration::from_secs(20))
        .expect("the live ranks shut down cleanly without the stopped one");
    assert!(report.is_clean(), "{report}");
    println!(
        "mpi_transport: rank {me}: rank {} declared down (silent) and shut down cleanly",
        last.get()
    );
    if me == 0 {
        // Kept awake while this rank lives: the steps that follow need it.
        drop(freeze::wake(pids[last.index()]));
    }
}

/// Runs right after the stopped-rank step, whose woken rank sent
/// heartbeats and goodbyes on that transport's communicator after its
/// peers had closed theirs. None of it may reach this transport (MPI hands
/// a message for a freed communicator to the next one that reuses its
/// context, so a transport with a peer that went down without draining
/// never frees its communicator): the hellos match, every peer stays up
/// through a quiet while, and each drains exactly once at the shutdown.
fn nothing_stale_reaches_the_next_transport(world: &SimpleCommunicator) {
    let (handle, mut driver) = connect_bare(world, HandleConfig::default());
    let me = driver.rank().get();
    let start = Instant::now();
    poll_until(&mut driver, "a quiet while", 64, |_, events| {
        for event in events.drain(..) {
            assert!(
                matches!(event, TransportEvent::PeerUp { .. }),
                "rank {me}: something stale arrived: {event:?}"
            );
        }
        start.elapsed() > Duration::from_millis(300)
    });
    for peer in driver.world().ranks().filter(|&peer| peer != driver.rank()) {
        assert_eq!(handle.peer_status(peer), PeerStatus::Up, "rank {me}");
    }
    // Nobody says goodbye before every rank has looked.
    world.barrier();
    assert_all_zero(shut_down(driver, Vec::new()), "after a quiet while");
    assert_handle_empty(&handle, "after a quiet while");
}

/// The highest rank drops its runtime without a shutdown while rank 0 has
/// a call running there, stops taking part in dinah, and only reaches
/// `MPI_Finalize` at the end of the program, like every rank. Rank 0's
/// running call ends with its deadline or a transport error, later calls
/// to the departed rank fail fast with a transport error, and the ranks
/// that stay shut down among themselves without hanging.
fn a_rank_that_leaves_early(world: &SimpleCommunicator) {
    let (me, size) = rank_of(world);
    let mut ctx = suite_runtime(world);
    let last = ctx.world().rank(size - 1).unwrap();
    ctx.barrier();
    if me == last.get() {
        // Wait until rank 0's call is running here, then leave.
        let state = Arc::clone(&ctx.state);
        ctx.wait_until("rank 0's call", move |_| {
            size == 1 || state.sleeps_started.load(Ordering::SeqCst) >= 1
        });
        wait_for_answers_sent(&mut ctx, usize::from(size > 1));
        drop(ctx.take_runtime());
        println!("mpi_transport: rank {me}: left without a shutdown");
        // Out of dinah; MPI_Finalize comes with the other ranks'.
        std::thread::sleep(Duration::from_millis(300));
        return;
    }
    if me == 0 {
        let client = ctx.rt().client();
        let options = SpawnOptions::deadline(Duration::from_secs(5));
        let running = client.spawn_on_with(last, Sleep((60_000, true)), options);
        // Its deadline, its transport error, or, if the departing rank's
        // answer got out before it closed, that it was shutting down.
        match ctx.wait(running) {
            Err(
                RuntimeError::DeadlineExceeded { .. }
                | RuntimeError::Transport { .. }
                | RuntimeError::ShuttingDown,
            ) => {}
            other => panic!("the call to the departed rank ended with {other:?}"),
        }
        // Once the departure is known, calls to it fail at once.
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < PATIENCE,
                "the departed rank never failed fast"
            );
            let call = client.spawn_on_with(
                last,
                Add((1, 1)),
                SpawnOptions::deadline(Duration::from_secs(5)),
            );
            match ctx.wait(call) {
                Err(RuntimeError::Transport { peer, error }) => {
                    assert_eq!(peer, last);
                    println!(
                        "mpi_transport: rank 0: a call to the departed rank fails fast: {error}"
                    );
                    break;
                }
                // Said goodbye, not closed yet: calls fail as to a rank
                // shutting down until its close marker arrives.
                Err(RuntimeError::DeadlineExceeded { .. } | RuntimeError::ShuttingDown) => {}
                other => panic!("a call to the departed rank ended with {other:?}"),
            }
        }
    }
    // The remaining ranks end together. Their own barrier would need the
    // departed rank, so each one waits only for its own calls: the shutdown
    // drains every live peer's goodbye (or gives up at the deadline).
    let runtime = ctx.take_runtime();
    match runtime.shutdown(Duration::from_secs(20)) {
        Ok(report) => {
            println!("mpi_transport: rank {me}: clean shutdown without the departed rank: {report}")
        }
        Err(timeout) => panic!("rank {me}: {timeout}"),
    }
}
