//! Unit tests of the simulated network's internals: goodbye encoding,
//! event budgets, wake-ups and threaded-mode ticks. The behaviour as a
//! transport is covered by the root `tests/std_memory_transport.rs`.

use std::num::NonZeroU32;
use std::time::Duration;

use dinah_core::wire::{DecodeContext, Message, decode_frame};
use dinah_core::{ProtocolLimits, Rank, WorldSize};

use super::*;
use crate::transport::{
    Channel, DownReason, PeerStatus, SendErrorKind, TransportDriver, TransportError, TransportEvent,
};

fn world(n: u32) -> WorldSize {
    WorldSize::new(n).unwrap()
}

fn rank(world: WorldSize, index: u32) -> Rank {
    world.rank(index).unwrap()
}

fn config() -> HandleConfig {
    HandleConfig {
        action_queue: 8,
        control_queue: 8,
        retained_bytes: 1 << 16,
        admission_capacity: 16,
    }
}

fn poll(driver: &mut SimDriver, budget: usize) -> Vec<TransportEvent> {
    let mut events = Vec::new();
    driver.poll(budget, &mut events).unwrap();
    events
}

#[test]
fn goodbyes_are_real_frames_with_the_count_sent_on_their_lane() {
    let w = world(2);
    let network = SimNetwork::new(w, 1, FaultPlan::new()).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    let (_handle1, _driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    for _ in 0..3 {
        handle0
            .try_send(rank(w, 1), Channel::Action, vec![1, 2, 3])
            .unwrap();
    }
    driver0.begin_shutdown();
    poll(&mut driver0, 16);
    let mut state = network.lock();
    for (lane, expected) in [(Channel::Control, 0), (Channel::Action, 3)] {
        let mut goodbye = None;
        while let Some(packet) = state.links.pop_due(0, 1, lane, 0) {
            if let link::PacketKind::Goodbye { frames_sent } = packet.kind {
                goodbye = Some((frames_sent, packet.frame.into_whole()));
            }
        }
        let (frames_sent, bytes) = goodbye.expect("a goodbye on every lane");
        assert_eq!(frames_sent, expected);
        let ctx = DecodeContext::new(lane, rank(w, 0), w, ProtocolLimits::DEFAULT).unwrap();
        let frame = decode_frame(&bytes, &ctx).unwrap();
        assert_eq!(
            frame.header().message(),
            &Message::Goodbye {
                frames_sent: expected
            }
        );
    }
}

#[test]
fn a_zero_budget_moves_frames_but_reports_nothing() {
    let w = world(2);
    let network = SimNetwork::new(w, 2, FaultPlan::new()).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    let (_handle1, mut driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    handle0
        .try_send(rank(w, 1), Channel::Action, vec![7])
        .unwrap();
    let mut events = Vec::new();
    assert!(driver0.poll(0, &mut events).unwrap());
    assert!(events.is_empty());
    assert_eq!(network.counts().in_transit_frames, 1);
    assert!(!driver1.poll(0, &mut events).unwrap());
    assert_eq!(poll(&mut driver1, 1).len(), 1); // PeerUp first
    assert_eq!(poll(&mut driver1, 8).len(), 1); // then the frame
}

#[test]
fn a_failure_without_budget_waits_in_the_stash() {
    let w = world(2);
    let plan = FaultPlan::new().disconnect_pair(rank(w, 0), rank(w, 1), 1);
    let network = SimNetwork::new(w, 3, plan).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    let (_handle1, _driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    poll(&mut driver0, 8);
    handle0
        .try_send(rank(w, 1), Channel::Action, vec![7; 5])
        .unwrap();
    network.step();
    // One event of budget: the PeerDown. The frame's failure waits.
    let events = poll(&mut driver0, 1);
    assert!(matches!(events[..], [TransportEvent::PeerDown { .. }]));
    // Counted by the handle, not again by the driver.
    assert_eq!(handle0.counts().in_flight, 1);
    assert_eq!(handle0.counts().retained_bytes, 5);
    assert_eq!(driver0.counts().in_flight_frames, 0);
    assert_eq!(driver0.counts().retained_bytes, 0);
    let events = poll(&mut driver0, 1);
    match &events[..] {
        [
            TransportEvent::SendFailed {
                to,
                channel,
                frame,
                error,
            },
        ] => {
            assert_eq!(
                (*to, *channel, frame.len()),
                (rank(w, 1), Channel::Action, 5)
            );
            assert!(matches!(
                error,
                TransportError::PeerDown {
                    reason: DownReason::Disconnected,
                    ..
                }
            ));
        }
        other => panic!("expected one SendFailed, got {other:?}"),
    }
    assert_eq!(handle0.counts().in_flight, 0);
    assert_eq!(handle0.counts().retained_bytes, 0);
}

#[test]
fn stepping_wakes_the_owner_when_a_delayed_frame_falls_due() {
    let w = world(2);
    let plan = FaultPlan::new().delay(Channel::Control, Delay::Fixed(2));
    let network = SimNetwork::new(w, 4, plan).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    let (handle1, mut driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    handle0
        .try_send(rank(w, 1), Channel::Control, vec![1])
        .unwrap();
    poll(&mut driver0, 8);
    poll(&mut driver1, 8);
    handle1.wakeup().take();
    network.step();
    assert!(!handle1.wakeup().take());
    network.step();
    assert!(handle1.wakeup().take());
    // Stepped mode never parks: an hour's timeout returns at once.
    driver1.idle_wait(Duration::ZERO, Duration::from_secs(3600));
    assert_eq!(poll(&mut driver1, 8).len(), 1);
}

#[test]
fn peers_learn_each_others_admission_capacity_when_their_endpoints_are_taken() {
    let w = world(3);
    let network = SimNetwork::new(w, 8, FaultPlan::new()).unwrap();
    let with = |capacity| HandleConfig {
        admission_capacity: capacity,
        ..config()
    };
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), with(7)).unwrap();
    assert_eq!(handle0.peer_admission(rank(w, 0)), NonZeroU32::new(7));
    assert_eq!(handle0.peer_admission(rank(w, 1)), None);
    // Up on the first poll, yet its capacity is not known: its endpoint
    // has not been taken.
    poll(&mut driver0, 8);
    assert_eq!(handle0.peer_status(rank(w, 2)), PeerStatus::Up);
    assert_eq!(handle0.peer_admission(rank(w, 2)), None);
    let (handle1, _driver1) = network.endpoint(rank(w, 1), with(9)).unwrap();
    assert_eq!(handle0.peer_admission(rank(w, 1)), NonZeroU32::new(9));
    assert_eq!(handle1.peer_admission(rank(w, 0)), NonZeroU32::new(7));
    assert_eq!(handle1.peer_admission(rank(w, 2)), None);
    // A rank advertising nothing stays unknown to the others.
    let (handle2, _driver2) = network.endpoint(rank(w, 2), with(0)).unwrap();
    assert_eq!(handle2.peer_admission(rank(w, 0)), NonZeroU32::new(7));
    assert_eq!(handle2.peer_admission(rank(w, 1)), NonZeroU32::new(9));
    assert_eq!(handle2.peer_admission(rank(w, 2)), None);
    assert_eq!(handle0.peer_admission(rank(w, 2)), None);
    assert_eq!(handle1.peer_admission(rank(w, 2)), None);
}

#[test]
fn a_rank_cut_off_before_its_endpoint_is_taken_starts_down() {
    let w = world(3);
    let plan = FaultPlan::new().disconnect_rank(rank(w, 2), 0);
    let network = SimNetwork::new(w, 5, plan).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    assert_eq!(handle0.peer_status(rank(w, 2)), PeerStatus::Down);
    let refused = handle0
        .try_send(rank(w, 2), Channel::Action, vec![1])
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: rank(w, 2) });
    let events = poll(&mut driver0, 8);
    assert!(matches!(
        events[..],
        [
            TransportEvent::PeerDown { .. },
            TransportEvent::PeerUp { .. }
        ]
    ));
    assert_eq!(handle0.peer_status(rank(w, 1)), PeerStatus::Up);
}

#[test]
fn in_threaded_mode_a_disconnect_happens_at_a_poll_count() {
    let w = world(2);
    let plan = FaultPlan::new().disconnect_rank(rank(w, 1), 3);
    let network = SimNetwork::with_mode(w, 6, plan, SimMode::Threaded).unwrap();
    let (_handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    let (_handle1, mut driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    assert!(matches!(
        poll(&mut driver0, 8)[..],
        [TransportEvent::PeerUp { .. }]
    ));
    assert!(matches!(
        poll(&mut driver1, 8)[..],
        [TransportEvent::PeerUp { .. }]
    ));
    assert_eq!(network.tick(), 2);
    assert!(matches!(
        poll(&mut driver0, 8)[..],
        [TransportEvent::PeerDown { .. }]
    ));
    assert!(matches!(
        poll(&mut driver1, 8)[..],
        [TransportEvent::PeerDown { .. }]
    ));
}

#[test]
fn a_closed_driver_refuses_polls_and_closing_twice_is_harmless() {
    let w = world(2);
    let network = SimNetwork::new(w, 7, FaultPlan::new()).unwrap();
    let (handle0, mut driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    handle0
        .try_send(rank(w, 1), Channel::Action, vec![1; 4])
        .unwrap();
    let left = driver0.close(std::time::Instant::now());
    // Nothing held; the peer was never drained, and the report says so.
    let expected = crate::transport::DriverCounts {
        undrained_peers: 1,
        ..Default::default()
    };
    assert_eq!(left, expected);
    assert_eq!(handle0.counts().retained_bytes, 0);
    assert!(handle0.is_closed());
    assert_eq!(driver0.close(std::time::Instant::now()), left);
    let mut events = Vec::new();
    assert!(matches!(
        driver0.poll(8, &mut events),
        Err(TransportError::Closed)
    ));
    // Frames for a closed endpoint are discarded.
    let (handle1, mut driver1) = network.endpoint(rank(w, 1), config()).unwrap();
    handle1
        .try_send(rank(w, 0), Channel::Action, vec![2])
        .unwrap();
    poll(&mut driver1, 8);
    assert_eq!(network.counts().closed_discarded, 1);
    assert_eq!(network.counts().in_transit_frames, 0);
}

#[test]
fn debug_and_display_show_counts_and_replay_information() {
    let w = world(2);
    let plan = FaultPlan::new().drop_probability(Channel::Action, 0.5);
    let network = SimNetwork::new(w, 99, plan).unwrap();
    let (_handle0, driver0) = network.endpoint(rank(w, 0), config()).unwrap();
    assert_eq!(
        network.to_string(),
        "simulated network of 2 ranks, seed 99, stepped, tick 1ms, at tick 0; \
         faults: action: drop 0.5"
    );
    let shown = format!("{network:?} {driver0:?}");
    assert!(shown.contains("seed: 99"), "{shown}");
    assert!(shown.contains("in_flight_frames: 0"), "{shown}");
}
