//! The in-memory transport on its own, with raw frames: delivery order,
//! every fault of the plan, back-pressure, goodbye and drain, determinism
//! from the seed, and a threaded all-to-all exchange.
//!
//! Assertion messages include the network's `Display` (world, seed, mode,
//! faults) so any failure can be replayed.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::wire::{
    Call, DecodeContext, Header, Message, RelativeDeadline, decode_frame, encode_frame,
};
use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
use dinah_std::transport::memory::{
    Delay, FaultPlan, Partition, PartitionMode, SimCounts, SimDriver, SimError, SimMode, SimNetwork,
};
use dinah_std::transport::{
    Channel, DownReason, HandleConfig, SendErrorKind, TransportDriver, TransportError,
    TransportEvent, TransportHandle,
};
use proptest::prelude::*;

const CONTROL: Channel = Channel::Control;
const ACTION: Channel = Channel::Action;

/// Long enough never to expire in a passing run; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

fn config(queue: usize) -> HandleConfig {
    HandleConfig {
        action_queue: queue,
        control_queue: queue,
        retained_bytes: 1 << 20,
        admission_capacity: 0,
    }
}

/// A raw frame from `origin` whose request ID is `id`: a request with an
/// 8-byte payload on the action lane, a cancel on the control lane.
fn frame(origin: Rank, channel: Channel, id: u64) -> Vec<u8> {
    let call = Call {
        request: RequestId::new(id).unwrap(),
        action: ActionId::new(7).unwrap(),
        domain: DomainId::new(1).unwrap(),
        trace: None,
    };
    let payload = id.to_le_bytes();
    let (message, segments): (Message, Vec<&[u8]>) = match channel {
        Channel::Control => (Message::Cancel { call }, Vec::new()),
        Channel::Action => (
            Message::Request {
                call,
                deadline: RelativeDeadline::from_nanos(1_000_000).unwrap(),
            },
            vec![&payload[..]],
        ),
    };
    let header = Header::new(origin, message, &segments, &ProtocolLimits::DEFAULT).unwrap();
    let mut bytes = vec![0; header.frame_len()];
    encode_frame(&header, &segments, &mut bytes).unwrap();
    bytes
}

/// The request ID of a frame `from` sent on `channel` (validating it).
fn id_of(world: WorldSize, from: Rank, channel: Channel, bytes: &[u8]) -> u64 {
    let ctx = DecodeContext::new(channel, from, world, ProtocolLimits::DEFAULT).unwrap();
    let frame = decode_frame(bytes, &ctx).unwrap();
    frame.header().message().call().unwrap().request.get()
}

/// An event, decoded for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Frame {
        from: u32,
        channel: Channel,
        id: u64,
    },
    Up(u32),
    Down(u32, DownReason),
    Drained(u32),
    Failed {
        to: u32,
        channel: Channel,
        id: u64,
        reason: DownReason,
    },
}

fn reason(error: &TransportError) -> DownReason {
    match error {
        TransportError::PeerDown { reason, .. } => *reason,
        other => panic!("expected a peer-down error, got {other}"),
    }
}

fn decode(world: WorldSize, me: Rank, event: TransportEvent) -> Ev {
    match event {
        TransportEvent::Frame {
            from,
            channel,
            frame,
        } => Ev::Frame {
            from: from.get(),
            channel,
            id: id_of(world, from, channel, frame.head()),
        },
        TransportEvent::PeerUp { peer } => Ev::Up(peer.get()),
        TransportEvent::PeerDown { peer, error } => Ev::Down(peer.get(), reason(&error)),
        TransportEvent::PeerDrained { peer } => Ev::Drained(peer.get()),
        TransportEvent::SendFailed {
            to,
            channel,
            frame,
            error,
        } => Ev::Failed {
            to: to.get(),
            channel,
            id: id_of(world, me, channel, frame.head()),
            reason: reason(&error),
        },
        other => panic!("unexpected event {other:?}"),
    }
}

/// A network and all its endpoints.
struct Net {
    network: SimNetwork,
    world: WorldSize,
    handles: Vec<TransportHandle>,
    drivers: Vec<SimDriver>,
}

impl Net {
    fn with(world: u32, seed: u64, plan: FaultPlan, mode: SimMode, queue: usize) -> Self {
        let world = WorldSize::new(world).unwrap();
        let network = SimNetwork::with_mode(world, seed, plan, mode).unwrap();
        let (handles, drivers) = network
            .endpoints(config(queue))
            .unwrap()
            .into_iter()
            .unzip();
        Self {
            network,
            world,
            handles,
            drivers,
        }
    }

    fn new(world: u32, seed: u64, plan: FaultPlan) -> Self {
        Self::with(world, seed, plan, SimMode::stepped(), 1024)
    }

    fn rank(&self, index: u32) -> Rank {
        self.world.rank(index).unwrap()
    }

    fn send(&self, from: u32, to: u32, channel: Channel, id: u64) {
        let bytes = frame(self.rank(from), channel, id);
        self.handles[from as usize]
            .try_send(self.rank(to), channel, bytes)
            .unwrap();
    }

    fn poll_budget(&mut self, index: u32, budget: usize) -> Vec<Ev> {
        let mut events = Vec::new();
        self.drivers[index as usize]
            .poll(budget, &mut events)
            .unwrap();
        assert!(events.len() <= budget, "{}", self.network);
        let me = self.rank(index);
        events
            .into_iter()
            .map(|event| decode(self.world, me, event))
            .collect()
    }

    fn poll(&mut self, index: u32) -> Vec<Ev> {
        self.poll_budget(index, 1 << 16)
    }

    /// Polls every rank once, in rank order; returns each rank's events.
    fn poll_all(&mut self) -> Vec<Vec<Ev>> {
        (0..self.world.get())
            .map(|index| self.poll(index))
            .collect()
    }

    fn counts(&self) -> SimCounts {
        self.network.counts()
    }
}

fn frames(events: &[Ev]) -> Vec<(u32, Channel, u64)> {
    events
        .iter()
        .filter_map(|event| match *event {
            Ev::Frame { from, channel, id } => Some((from, channel, id)),
            _ => None,
        })
        .collect()
}

/// Per (source, lane), the IDs in arrival order.
fn by_link(received: &[(u32, Channel, u64)]) -> BTreeMap<(u32, Channel), Vec<u64>> {
    let mut links: BTreeMap<(u32, Channel), Vec<u64>> = BTreeMap::new();
    for &(from, channel, id) in received {
        links.entry((from, channel)).or_default().push(id);
    }
    links
}

#[test]
fn every_peer_comes_up_on_the_first_poll() {
    let mut net = Net::new(3, 1, FaultPlan::new());
    assert_eq!(net.poll(1), [Ev::Up(0), Ev::Up(2)]);
    assert_eq!(net.poll(1), []);
}

#[test]
fn lanes_are_fifo_between_every_pair_by_default() {
    for world in [2, 4] {
        let mut net = Net::new(world, 3, FaultPlan::new());
        for id in 1..=50 {
            for from in 0..world {
                for to in 0..world {
                    net.send(from, to, ACTION, id);
                    net.send(from, to, CONTROL, id + 1000);
                }
            }
        }
        let events = net.poll_all();
        let events2 = net.poll_all();
        for to in 0..world as usize {
            let got = by_link(&frames(&[events[to].clone(), events2[to].clone()].concat()));
            for from in 0..world {
                assert_eq!(
                    got[&(from, ACTION)],
                    (1..=50).collect::<Vec<_>>(),
                    "{}",
                    net.network
                );
                assert_eq!(
                    got[&(from, CONTROL)],
                    (1001..=1050).collect::<Vec<_>>(),
                    "{}",
                    net.network
                );
            }
        }
        assert_eq!(net.counts().delivered, u64::from(world * world * 100));
        assert_eq!(net.counts().in_transit_frames, 0);
    }
}

#[test]
fn control_frames_come_before_action_frames_within_one_poll() {
    let mut net = Net::new(2, 5, FaultPlan::new());
    for id in 1..=5 {
        net.send(0, 1, ACTION, id);
    }
    for id in 11..=15 {
        net.send(0, 1, CONTROL, id);
    }
    net.poll(0);
    let got = frames(&net.poll(1));
    let channels: Vec<Channel> = got.iter().map(|&(_, channel, _)| channel).collect();
    assert_eq!(channels, [[CONTROL; 5], [ACTION; 5]].concat());
}

#[test]
fn flush_sends_queued_frames_without_receiving() {
    let mut net = Net::new(2, 5, FaultPlan::new());
    assert_eq!(net.poll_all(), [vec![Ev::Up(1)], vec![Ev::Up(0)]]);
    let mut events = Vec::new();
    assert!(
        !net.drivers[0].flush(16, &mut events).unwrap(),
        "nothing queued"
    );
    net.send(0, 1, ACTION, 1);
    net.send(0, 1, CONTROL, 2);
    // A frame for rank 0 waits; a flush must not deliver it.
    net.send(1, 0, ACTION, 3);
    net.poll(1);
    assert!(net.drivers[0].flush(16, &mut events).unwrap());
    assert!(
        events.is_empty(),
        "a flush receives nothing: {}",
        net.network
    );
    assert!(!net.handles[0].has_queued());
    assert_eq!(net.counts().sent, 3, "{}", net.network);
    net.network.step();
    assert_eq!(
        frames(&net.poll(1)),
        [(0, CONTROL, 2), (0, ACTION, 1)],
        "{}",
        net.network
    );
    assert_eq!(frames(&net.poll(0)), [(1, ACTION, 3)], "{}", net.network);
}

#[test]
fn the_event_budget_is_respected_and_nothing_is_lost() {
    let mut net = Net::new(3, 5, FaultPlan::new());
    for id in 1..=10 {
        net.send(0, 2, ACTION, id);
        net.send(1, 2, ACTION, id);
    }
    net.poll(0);
    net.poll(1);
    let mut got = Vec::new();
    for _ in 0..30 {
        got.extend(frames(&net.poll_budget(2, 3)));
    }
    let links = by_link(&got);
    assert_eq!(links[&(0, ACTION)], (1..=10).collect::<Vec<_>>());
    assert_eq!(links[&(1, ACTION)], (1..=10).collect::<Vec<_>>());
    // Sources take turns within a poll.
    assert_ne!(got[0].0, got[1].0);
}

#[test]
fn drop_probability_one_drops_everything_and_zero_nothing() {
    let plan = FaultPlan::new()
        .drop_probability(ACTION, 1.0)
        .drop_probability(CONTROL, 0.0);
    let mut net = Net::new(2, 9, plan);
    for id in 1..=20 {
        net.send(0, 1, ACTION, id);
        net.send(0, 1, CONTROL, id);
    }
    net.poll(0);
    let got = frames(&net.poll(1));
    assert_eq!(
        got,
        (1..=20).map(|id| (0, CONTROL, id)).collect::<Vec<_>>(),
        "{}",
        net.network
    );
    assert_eq!(net.counts().dropped, 20);
    // A lost frame still counts as sent: its sender cannot know.
    assert_eq!(net.handles[0].counts().frames_sent, 40);
}

#[test]
fn duplicated_frames_arrive_twice() {
    let plan = FaultPlan::new().duplicate_probability(ACTION, 1.0);
    let mut net = Net::new(2, 11, plan);
    for id in 1..=10 {
        net.send(0, 1, ACTION, id);
    }
    net.poll(0);
    let got: Vec<u64> = frames(&net.poll(1))
        .into_iter()
        .map(|(_, _, id)| id)
        .collect();
    let twice: Vec<u64> = (1..=10).flat_map(|id| [id, id]).collect();
    assert_eq!(got, twice, "{}", net.network);
    assert_eq!(net.counts().duplicated, 10);
    assert_eq!(net.drivers[1].counts().frames_received, 20);
}

/// Sends one frame 0 -> 1 per tick for `ticks` ticks, polling both ranks
/// each tick; returns (send tick, arrival tick) per frame ID.
fn latencies(net: &mut Net, ticks: u64) -> BTreeMap<u64, (u64, u64)> {
    let mut sent = BTreeMap::new();
    let mut arrived = BTreeMap::new();
    for tick in 0..ticks * 3 {
        assert_eq!(net.network.tick(), tick);
        if tick < ticks {
            net.send(0, 1, ACTION, tick + 1);
            sent.insert(tick + 1, tick);
        }
        net.poll(0);
        for (_, _, id) in frames(&net.poll(1)) {
            assert!(
                arrived.insert(id, tick).is_none(),
                "{id} arrived twice; {}",
                net.network
            );
        }
        net.network.step();
    }
    sent.into_iter()
        .map(|(id, at)| (id, (at, arrived[&id])))
        .collect()
}

#[test]
fn a_fixed_delay_holds_frames_exactly_that_many_ticks() {
    let mut net = Net::new(2, 13, FaultPlan::new().delay(ACTION, Delay::Fixed(3)));
    for (id, (sent, arrived)) in latencies(&mut net, 10) {
        assert_eq!(arrived - sent, 3, "frame {id}; {}", net.network);
    }
}

#[test]
fn a_random_delay_stays_within_its_range_and_keeps_the_lane_fifo() {
    let mut net = Net::new(
        2,
        17,
        FaultPlan::new().delay(ACTION, Delay::Uniform { min: 2, max: 5 }),
    );
    let times = latencies(&mut net, 40);
    let mut latencies_seen = Vec::new();
    let mut last_arrival = 0;
    for (id, (sent, arrived)) in times {
        assert!(
            (2..=5).contains(&(arrived - sent)),
            "frame {id}: {sent} -> {arrived}; {}",
            net.network
        );
        assert!(
            arrived >= last_arrival,
            "frame {id} overtook; {}",
            net.network
        );
        last_arrival = arrived;
        latencies_seen.push(arrived - sent);
    }
    latencies_seen.sort_unstable();
    latencies_seen.dedup();
    assert!(
        latencies_seen.len() > 1,
        "random delays all equal; {}",
        net.network
    );
}

#[test]
fn the_clock_moves_one_tick_per_step() {
    let world = WorldSize::new(1).unwrap();
    let mode = SimMode::Stepped {
        tick: Duration::from_micros(250),
    };
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), mode).unwrap();
    let clock = network.clock();
    assert_eq!(network.advance(4), 4);
    assert_eq!(
        dinah_core::Clock::now(&clock),
        dinah_core::Instant::from_nanos(1_000_000)
    );
}

#[test]
fn reordering_stays_within_the_window_and_loses_nothing() {
    let window = 3;
    let mut net = Net::new(2, 19, FaultPlan::new().reorder(ACTION, window));
    for id in 1..=300 {
        net.send(0, 1, ACTION, id);
    }
    net.poll(0);
    let got: Vec<u64> = frames(&net.poll(1))
        .into_iter()
        .map(|(_, _, id)| id)
        .collect();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=300).collect::<Vec<_>>(), "{}", net.network);
    let position: BTreeMap<u64, usize> = got.iter().enumerate().map(|(at, &id)| (id, at)).collect();
    for id in 1..=300 {
        let overtaken = (1..id)
            .filter(|earlier| position[earlier] > position[&id])
            .count();
        assert!(
            overtaken <= window as usize,
            "frame {id} overtook {overtaken}; {}",
            net.network
        );
    }
    assert_ne!(got, sorted, "nothing was reordered; {}", net.network);
    assert!(net.counts().reordered > 0);
}

#[test]
fn a_disconnected_rank_is_down_on_both_sides_and_sends_fail() {
    let world = WorldSize::new(3).unwrap();
    let plan = FaultPlan::new()
        .disconnect_rank(world.rank(2).unwrap(), 5)
        .delay(ACTION, Delay::Fixed(10));
    let mut net = Net::new(3, 23, plan);
    net.poll_all();
    net.send(0, 2, ACTION, 1); // in transit at the disconnect: lost
    net.send(2, 0, ACTION, 2); // likewise
    net.send(0, 1, ACTION, 3); // unaffected
    net.poll_all();
    net.network.advance(4);
    assert!(net.poll_all().iter().all(Vec::is_empty));
    net.send(0, 2, ACTION, 4); // queued before the disconnect, sent after
    net.network.step(); // tick 5
    assert_eq!(net.counts().disconnect_dropped, 2, "{}", net.network);
    assert_eq!(
        net.poll(0),
        [
            Ev::Down(2, DownReason::Disconnected),
            Ev::Failed {
                to: 2,
                channel: ACTION,
                id: 4,
                reason: DownReason::Disconnected
            }
        ]
    );
    assert_eq!(net.poll(1), [Ev::Down(2, DownReason::Disconnected)]);
    assert_eq!(
        net.poll(2),
        [
            Ev::Down(0, DownReason::Disconnected),
            Ev::Down(1, DownReason::Disconnected)
        ]
    );
    let refused = net.handles[0]
        .try_send(net.rank(2), ACTION, frame(net.rank(0), ACTION, 5))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: net.rank(2) });
    let refused = net.handles[2]
        .try_send(net.rank(1), ACTION, frame(net.rank(2), ACTION, 6))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: net.rank(1) });
    net.network.advance(10);
    assert_eq!(frames(&net.poll(1)), [(0, ACTION, 3)]);
    assert_eq!(net.drivers[0].counts().undrained_peers, 1);
}

#[test]
fn a_disconnected_pair_still_reaches_everyone_else() {
    let world = WorldSize::new(3).unwrap();
    let plan = FaultPlan::new().disconnect_pair(world.rank(0).unwrap(), world.rank(1).unwrap(), 0);
    let mut net = Net::new(3, 29, plan);
    assert_eq!(
        net.poll(0),
        [Ev::Down(1, DownReason::Disconnected), Ev::Up(2)]
    );
    assert_eq!(
        net.poll(1),
        [Ev::Down(0, DownReason::Disconnected), Ev::Up(2)]
    );
    net.send(0, 2, ACTION, 1);
    net.send(1, 2, ACTION, 2);
    net.poll(0);
    net.poll(1);
    assert_eq!(frames(&net.poll(2)).len(), 2);
}

/// Sends one frame per tick from 0 to 1 and from 0 to 2 for 8 ticks;
/// returns the IDs each receiver got (ID = 10 * receiver + send tick).
fn run_partition(mode: PartitionMode) -> (Net, Vec<u64>, Vec<u64>, BTreeMap<u64, u64>) {
    let world = WorldSize::new(3).unwrap();
    let partition = Partition::new(
        [world.rank(0).unwrap()],
        [world.rank(1).unwrap()],
        3..5,
        mode,
    );
    let mut net = Net::new(3, 31, FaultPlan::new().partition(partition));
    let (mut to1, mut to2, mut arrival) = (Vec::new(), Vec::new(), BTreeMap::new());
    for tick in 0..12 {
        if tick < 8 {
            net.send(0, 1, ACTION, 10 + tick);
            net.send(0, 2, ACTION, 20 + tick);
        }
        net.poll(0);
        for (_, _, id) in frames(&net.poll(1)) {
            to1.push(id);
            arrival.insert(id, tick);
        }
        to2.extend(frames(&net.poll(2)).into_iter().map(|(_, _, id)| id));
        net.network.step();
    }
    (net, to1, to2, arrival)
}

#[test]
fn a_dropping_partition_loses_exactly_the_crossing_frames_in_its_range() {
    let (net, to1, to2, _) = run_partition(PartitionMode::Drop);
    assert_eq!(to1, [10, 11, 12, 15, 16, 17], "{}", net.network);
    assert_eq!(to2, (20..28).collect::<Vec<_>>());
    assert_eq!(net.counts().partition_dropped, 2);
}

#[test]
fn a_holding_partition_delivers_the_crossing_frames_when_it_ends() {
    let (net, to1, to2, arrival) = run_partition(PartitionMode::Hold);
    assert_eq!(to1, (10..18).collect::<Vec<_>>(), "{}", net.network);
    assert_eq!(to2, (20..28).collect::<Vec<_>>());
    assert_eq!((arrival[&13], arrival[&14], arrival[&15]), (5, 5, 5));
    assert_eq!(arrival[&12], 2);
    assert_eq!(net.counts().partition_held, 2);
}

#[test]
fn saturation_keeps_frames_in_the_senders_handle_until_the_receiver_polls() {
    let plan = FaultPlan::new().inbox_capacity(ACTION, 2);
    let mut net = Net::with(2, 37, plan, SimMode::stepped(), 4);
    for id in 1..=4 {
        net.send(0, 1, ACTION, id);
    }
    let refused = net.handles[0]
        .try_send(net.rank(1), ACTION, frame(net.rank(0), ACTION, 5))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::QueueFull { channel: ACTION });
    net.poll(0);
    net.poll(0);
    // Two in the network, one taken and waiting, one still queued.
    assert_eq!(net.counts().in_transit_frames, 2);
    let handle = net.handles[0].counts();
    assert_eq!((handle.queued_action, handle.in_flight), (1, 1));
    // The control lane is not held up.
    net.send(0, 1, CONTROL, 99);
    net.poll(0);
    let mut got = Vec::new();
    for _ in 0..4 {
        got.extend(frames(&net.poll(1)));
        net.poll(0);
    }
    assert_eq!(got[0], (0, CONTROL, 99));
    let action: Vec<u64> = got[1..].iter().map(|&(_, _, id)| id).collect();
    assert_eq!(action, [1, 2, 3, 4], "{}", net.network);
    assert_eq!(net.handles[0].counts().retained_bytes, 0);
    net.send(0, 1, ACTION, 5);
}

#[test]
fn retained_bytes_cover_frames_in_transit_from_and_to_a_rank() {
    let mut net = Net::new(2, 41, FaultPlan::new());
    net.poll_all();
    net.send(0, 1, ACTION, 1);
    let len = frame(net.rank(0), ACTION, 1).len() as u64;
    net.poll(0);
    let sender = net.drivers[0].counts();
    let receiver = net.drivers[1].counts();
    assert_eq!((sender.in_flight_frames, sender.retained_bytes), (1, len));
    assert_eq!(
        (receiver.in_flight_frames, receiver.retained_bytes),
        (0, len)
    );
    net.poll(1);
    let receiver = net.drivers[1].counts();
    assert_eq!(
        (
            receiver.retained_bytes,
            receiver.frames_received,
            receiver.bytes_received
        ),
        (0, 1, len)
    );
    assert_eq!(net.drivers[0].counts().retained_bytes, 0);
}

/// Shuts every rank down and polls (stepping) until all are drained or
/// `ticks` pass; returns every rank's events and whether all drained.
fn shut_down(net: &mut Net, ticks: u64) -> (Vec<Vec<Ev>>, bool) {
    for driver in &mut net.drivers {
        driver.begin_shutdown();
    }
    let mut events = vec![Vec::new(); net.world.get() as usize];
    for _ in 0..ticks {
        for (index, log) in events.iter_mut().enumerate() {
            log.extend(net.poll(index as u32));
        }
        if net.drivers.iter().all(|driver| driver.is_drained()) {
            return (events, true);
        }
        net.network.step();
    }
    (events, false)
}

fn exchange(net: &mut Net, per_link: u64) {
    let world = net.world.get();
    for id in 1..=per_link {
        for from in 0..world {
            for to in (0..world).filter(|&to| to != from) {
                net.send(from, to, ACTION, id);
                net.send(from, to, CONTROL, id);
            }
        }
    }
}

fn check_drained(net: &Net, events: &[Vec<Ev>], duplicates: bool) {
    let world = net.world.get();
    for (me, log) in events.iter().enumerate() {
        for peer in (0..world).filter(|&peer| peer as usize != me) {
            let drained_at = log.iter().position(|event| *event == Ev::Drained(peer));
            let drained_at = drained_at
                .unwrap_or_else(|| panic!("rank {me} never drained {peer}; {}", net.network));
            assert_eq!(
                log.iter()
                    .filter(|event| **event == Ev::Drained(peer))
                    .count(),
                1
            );
            let before = frames(&log[..drained_at]);
            for channel in [CONTROL, ACTION] {
                let mut ids: Vec<u64> = before
                    .iter()
                    .filter(|f| f.0 == peer && f.1 == channel)
                    .map(|f| f.2)
                    .collect();
                if duplicates {
                    ids.sort_unstable();
                    ids.dedup();
                }
                assert_eq!(
                    ids.len(),
                    20,
                    "rank {me} from {peer} on {channel}; {}",
                    net.network
                );
            }
        }
    }
    for driver in &net.drivers {
        let counts = driver.counts();
        assert_eq!(
            (
                counts.in_flight_frames,
                counts.retained_bytes,
                counts.undrained_peers
            ),
            (0, 0, 0)
        );
    }
    assert_eq!(net.counts().in_transit_frames, 0);
}

#[test]
fn goodbyes_drain_every_peer_without_faults() {
    let mut net = Net::new(4, 43, FaultPlan::new());
    exchange(&mut net, 20);
    let (events, drained) = shut_down(&mut net, 10);
    assert!(drained, "{}", net.network);
    check_drained(&net, &events, false);
    let refused = net.handles[0]
        .try_send(net.rank(1), ACTION, frame(net.rank(0), ACTION, 1))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Closed);
    assert_eq!(net.counts().goodbyes, 4 * 3 * 2);
}

#[test]
fn goodbyes_drain_through_duplicates_delays_and_reordering() {
    let plan = FaultPlan::new()
        .duplicate_probability(ACTION, 0.3)
        .duplicate_probability(CONTROL, 0.3)
        .delay(ACTION, Delay::Uniform { min: 0, max: 4 })
        .delay(CONTROL, Delay::Fixed(1))
        .reorder(ACTION, 4)
        .reorder(CONTROL, 2);
    let mut net = Net::new(4, 47, plan);
    exchange(&mut net, 20);
    let (events, drained) = shut_down(&mut net, 100);
    assert!(drained, "{}", net.network);
    check_drained(&net, &events, true);
    assert!(net.counts().duplicated > 0 && net.counts().reordered > 0);
}

#[test]
fn a_lost_frame_keeps_its_sender_undrained() {
    let plan = FaultPlan::new().drop_probability(ACTION, 1.0);
    let mut net = Net::new(2, 53, plan);
    net.send(0, 1, ACTION, 1);
    let (events, drained) = shut_down(&mut net, 20);
    assert!(!drained, "{}", net.network);
    // The action goodbyes are lost too: neither side drains the other.
    assert!(
        events
            .iter()
            .flatten()
            .all(|event| !matches!(event, Ev::Drained(_)))
    );
    assert_eq!(net.drivers[1].counts().undrained_peers, 1);
    assert!(!net.drivers[0].is_drained());
}

#[test]
fn closing_without_goodbye_reports_the_end_after_the_last_frame() {
    let mut net = Net::new(2, 59, FaultPlan::new());
    net.poll_all();
    net.send(1, 0, ACTION, 1);
    net.poll(1);
    let left = net.drivers[1].close(Instant::now());
    assert_eq!(left.in_flight_frames, 1);
    assert_eq!(
        net.poll(0),
        [
            Ev::Frame {
                from: 1,
                channel: ACTION,
                id: 1
            },
            Ev::Down(1, DownReason::EndOfStream)
        ]
    );
    let mut events = Vec::new();
    assert!(matches!(
        net.drivers[1].poll(8, &mut events),
        Err(TransportError::Closed)
    ));
    let refused = net.handles[0]
        .try_send(net.rank(1), ACTION, frame(net.rank(0), ACTION, 2))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: net.rank(1) });
}

#[test]
fn closing_after_a_drain_is_quiet_and_later_sends_fail() {
    let mut net = Net::new(2, 61, FaultPlan::new());
    net.drivers[1].begin_shutdown();
    let mut log = Vec::new();
    for _ in 0..3 {
        log.extend(net.poll(0));
        net.poll(1);
    }
    assert!(log.contains(&Ev::Drained(1)));
    drop(net.drivers.pop());
    // Sent before the end marker arrived: accepted, then lost with the
    // closed endpoint (as a write to a closed socket).
    net.send(0, 1, ACTION, 1);
    assert_eq!(net.poll(0), []);
    assert_eq!(net.counts().closed_discarded, 1);
    let refused = net.handles[0]
        .try_send(net.rank(1), ACTION, frame(net.rank(0), ACTION, 2))
        .unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: net.rank(1) });
}

/// A scripted scenario with random faults; returns a log of every event.
fn scripted(seed: u64) -> Vec<String> {
    let plan = FaultPlan::new()
        .drop_probability(ACTION, 0.2)
        .duplicate_probability(ACTION, 0.2)
        .duplicate_probability(CONTROL, 0.1)
        .delay(ACTION, Delay::Uniform { min: 0, max: 3 })
        .reorder(ACTION, 2)
        .reorder(CONTROL, 1);
    let mut net = Net::new(3, seed, plan);
    let mut log = Vec::new();
    for tick in 0..30 {
        for from in 0..3 {
            net.send(from, (from + 1 + (tick as u32 % 2)) % 3, ACTION, tick + 1);
            if tick % 3 == 0 {
                net.send(from, (from + 1) % 3, CONTROL, tick + 1);
            }
        }
        for index in 0..3 {
            for event in net.poll_budget(index, 5) {
                log.push(format!("t{tick} r{index} {event:?}"));
            }
        }
        net.network.step();
    }
    log
}

#[test]
fn the_same_seed_replays_the_same_events_and_another_seed_does_not() {
    let first = scripted(0x5eed);
    assert!(first.len() > 50, "{}", first.len());
    assert_eq!(first, scripted(0x5eed));
    assert_ne!(first, scripted(0x5eee));
}

#[test]
fn endpoints_are_handed_out_once_and_plans_are_checked() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::new(world, 1, FaultPlan::new()).unwrap();
    let rank = world.rank(1).unwrap();
    let _kept = network.endpoint(rank, config(4)).unwrap();
    assert_eq!(
        network.endpoint(rank, config(4)).unwrap_err(),
        SimError::EndpointTaken { rank }
    );
    let stranger = WorldSize::new(3).unwrap().rank(2).unwrap();
    assert_eq!(
        network.endpoint(stranger, config(4)).unwrap_err(),
        SimError::NoSuchRank { rank: stranger }
    );
    assert_eq!(
        network
            .endpoint(world.rank(0).unwrap(), config(0))
            .unwrap_err(),
        SimError::EmptyHandleQueue
    );
    let zero_tick = SimMode::Stepped {
        tick: Duration::ZERO,
    };
    assert_eq!(
        SimNetwork::with_mode(world, 1, FaultPlan::new(), zero_tick).unwrap_err(),
        SimError::ZeroTick
    );
    let shown = network.to_string();
    assert_eq!(
        shown,
        "simulated network of 2 ranks, seed 1, stepped, tick 1ms, at tick 0; faults: no faults"
    );
}

#[test]
fn debug_output_shows_counts_not_payload() {
    let mut net = Net::new(2, 67, FaultPlan::new());
    let secret = 0x1122_3344_5566_7788_u64;
    net.send(0, 1, ACTION, secret);
    net.poll(0);
    let shown = format!(
        "{:?} {:?} {:?}",
        net.network, net.drivers[0], net.handles[0]
    );
    for byte in secret.to_le_bytes() {
        assert!(!shown.contains(&format!("{byte}, ")), "{shown}");
    }
    assert!(shown.contains("in_transit_frames: 1"), "{shown}");
}

#[test]
fn public_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<SimNetwork>();
    send_sync::<dinah_std::transport::memory::SimClock>();
    send_sync::<FaultPlan>();
    send::<SimDriver>();
}

/// Four ranks, each polled by its own thread, send each other `PER_PEER`
/// frames (every fifth on the control lane), then shut down and drain.
/// Every frame arrives (once, unless `duplicates`), and the unreordered
/// control lane stays FIFO.
fn threaded_exchange(plan: FaultPlan, duplicates: bool) {
    const WORLD: u32 = 4;
    const PER_PEER: u64 = 500;
    let net = Net::with(WORLD, 71, plan, SimMode::Threaded, 16);
    let Net {
        network,
        world,
        handles,
        drivers,
    } = net;
    let deadline = Instant::now() + PATIENCE;
    let threads: Vec<_> = handles
        .into_iter()
        .zip(drivers)
        .map(|(handle, mut driver)| {
            thread::spawn(move || {
                assert!(handle.wakeup().bind_current());
                let me = handle.rank();
                let mut to_send: Vec<(Rank, Channel, u64)> = Vec::new();
                for id in 1..=PER_PEER {
                    for peer in world.ranks().filter(|&peer| peer != me) {
                        to_send.push((peer, if id % 5 == 0 { CONTROL } else { ACTION }, id));
                    }
                }
                to_send.reverse();
                let mut received: BTreeMap<(u32, Channel), Vec<u64>> = BTreeMap::new();
                let mut drained = 0;
                let mut events = Vec::new();
                let expected = PER_PEER * u64::from(WORLD - 1);
                let mut shutting_down = false;
                loop {
                    assert!(Instant::now() < deadline, "{me} hung");
                    while let Some(&(peer, channel, id)) = to_send.last() {
                        match handle.try_send(peer, channel, frame(me, channel, id)) {
                            Ok(()) => {
                                to_send.pop();
                            }
                            Err(error) => {
                                assert_eq!(error.kind(), SendErrorKind::QueueFull { channel });
                                break;
                            }
                        }
                    }
                    if to_send.is_empty() && !shutting_down {
                        driver.begin_shutdown();
                        shutting_down = true;
                    }
                    events.clear();
                    let progress = driver.poll(64, &mut events).unwrap();
                    for event in events.drain(..) {
                        match event {
                            TransportEvent::Frame {
                                from,
                                channel,
                                frame,
                            } => {
                                let id = id_of(world, from, channel, frame.head());
                                received.entry((from.get(), channel)).or_default().push(id);
                            }
                            TransportEvent::PeerDrained { .. } => drained += 1,
                            TransportEvent::PeerUp { .. } => {}
                            other => panic!("{me}: unexpected {other:?}"),
                        }
                    }
                    let got: u64 = received.values().map(|ids| ids.len() as u64).sum();
                    if shutting_down && driver.is_drained() {
                        if duplicates {
                            assert!(got >= expected, "{me} got {got} of {expected}");
                        } else {
                            assert_eq!(got, expected, "{me}");
                        }
                        assert_eq!(drained, WORLD - 1);
                        break;
                    }
                    if !progress {
                        driver.idle_wait(Duration::from_micros(20), Duration::from_millis(5));
                    }
                }
                driver.close(Instant::now());
                (me, received)
            })
        })
        .collect();
    for thread in threads {
        let (me, received) = thread.join().unwrap();
        assert_eq!(received.len(), 2 * (WORLD as usize - 1));
        for ((from, channel), mut ids) in received {
            let expected: Vec<u64> = (1..=PER_PEER)
                .filter(|id| (id % 5 == 0) == (channel == CONTROL))
                .collect();
            if channel == CONTROL {
                // The control lane is not reordered: FIFO (first arrivals).
                let mut first_seen = Vec::new();
                for &id in &ids {
                    if !first_seen.contains(&id) {
                        first_seen.push(id);
                    }
                }
                assert_eq!(first_seen, expected, "{me} from {from}; {network}");
            }
            ids.sort_unstable();
            if duplicates {
                ids.dedup();
            }
            assert_eq!(ids, expected, "{me} from {from} on {channel}; {network}");
        }
    }
    assert_eq!(network.counts().in_transit_frames, 0);
}

#[test]
fn threaded_ranks_exchange_everything_all_to_all() {
    threaded_exchange(FaultPlan::new().reorder(ACTION, 2), false);
}

#[test]
fn threaded_ranks_exchange_through_duplicates_and_saturation() {
    let plan = FaultPlan::new()
        .duplicate_probability(ACTION, 0.2)
        .duplicate_probability(CONTROL, 0.2)
        .inbox_capacity(ACTION, 3)
        .inbox_capacity(CONTROL, 2);
    threaded_exchange(plan, true);
}

/// Polls rank `to` with `budget`, recording the frames it receives per
/// (source, destination, lane).
fn poll_into(
    net: &mut Net,
    to: u32,
    budget: usize,
    got: &mut BTreeMap<(u32, u32, Channel), Vec<u64>>,
) {
    for (from, channel, id) in frames(&net.poll_budget(to, budget)) {
        got.entry((from, to, channel)).or_default().push(id);
    }
}

/// A randomly generated plan without drop or disconnect.
fn lossless_plan() -> impl Strategy<Value = (FaultPlan, bool, bool)> {
    (
        0u32..3,
        0u64..4,
        0u32..4,
        proptest::option::of(1usize..4),
        prop::bool::ANY,
    )
        .prop_map(|(dup, max_delay, window, capacity, random_delay)| {
            let duplicate = f64::from(dup) * 0.25;
            let delay = if random_delay {
                Delay::Uniform {
                    min: 0,
                    max: max_delay,
                }
            } else {
                Delay::Fixed(max_delay)
            };
            let mut plan = FaultPlan::new()
                .duplicate_probability(ACTION, duplicate)
                .delay(ACTION, delay)
                .delay(CONTROL, Delay::Fixed(max_delay / 2))
                .reorder(ACTION, window);
            if let Some(capacity) = capacity {
                plan = plan
                    .inbox_capacity(ACTION, capacity)
                    .inbox_capacity(CONTROL, capacity);
            }
            (plan, dup > 0, window > 0)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Compared with a plain model (the list of IDs sent per link), every
    /// frame arrives at least once, exactly once without duplication, and
    /// in order when reordering is off.
    #[test]
    fn lossless_plans_deliver_every_frame(
        (plan, duplicates, reordering) in lossless_plan(),
        seed in any::<u64>(),
        sends in prop::collection::vec((0u32..3, 0u32..3, prop::bool::ANY, 0u8..3), 1..120),
    ) {
        let mut net = Net::with(3, seed, plan, SimMode::stepped(), 256);
        let mut model: BTreeMap<(u32, u32, Channel), Vec<u64>> = BTreeMap::new();
        let mut got: BTreeMap<(u32, u32, Channel), Vec<u64>> = BTreeMap::new();
        for (id, &(from, to, control, steps)) in sends.iter().enumerate() {
            let channel = if control { CONTROL } else { ACTION };
            net.send(from, to, channel, id as u64 + 1);
            model.entry((from, to, channel)).or_default().push(id as u64 + 1);
            poll_into(&mut net, from, 1 << 16, &mut got);
            for to in 0..3 {
                poll_into(&mut net, to, 4, &mut got);
            }
            net.network.advance(u64::from(steps));
        }
        for _ in 0..200 {
            for to in 0..3 {
                poll_into(&mut net, to, 4, &mut got);
            }
            net.network.step();
        }
        prop_assert_eq!(net.counts().in_transit_frames, 0, "{}", net.network);
        for (link, sent) in &model {
            let arrived = got.get(link).cloned().unwrap_or_default();
            let mut distinct = arrived.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let mut expected = sent.clone();
            expected.sort_unstable();
            prop_assert_eq!(&distinct, &expected, "{:?}; {}", link, net.network);
            if !duplicates {
                prop_assert_eq!(arrived.len(), sent.len(), "{:?}; {}", link, net.network);
            }
            if !(reordering && link.2 == ACTION) {
                // FIFO: first arrivals in send order (a copy follows its
                // original).
                let mut first_seen = Vec::new();
                for id in arrived {
                    if !first_seen.contains(&id) {
                        first_seen.push(id);
                    }
                }
                prop_assert_eq!(&first_seen, sent, "{:?}; {}", link, net.network);
            }
        }
    }
}
