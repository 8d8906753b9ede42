//! The TCP transport alone, driven with raw frames (no runtime): the
//! handshake, FIFO order per lane, peers going down, the goodbye and
//! drain, back-pressure, and what `close` reports.
//!
//! Every rank runs in this process; one test thread polls all drivers in
//! turn. Waits are bounded by a generous patience so a broken transport
//! fails instead of hanging; nothing asserts on elapsed time.

use std::borrow::Cow;
use std::num::NonZeroU32;
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::wire::{Call, Channel, Header, Message, RelativeDeadline, encode_frame};
use dinah_core::{ActionId, DomainId, Fingerprint, ProtocolLimits, Rank, RequestId, WorldSize};
use dinah_std::transport::{
    DownReason, Frame, HandleConfig, PeerStatus, SendErrorKind, Tail, TransportDriver,
    TransportError, TransportEvent, TransportHandle, TransportHello,
};
use dinah_tcp::{Membership, TcpConfig, TcpDriver, TcpError, TcpTransport};

const PATIENCE: Duration = Duration::from_secs(60);

fn transport_hello(handle: HandleConfig) -> TransportHello {
    TransportHello {
        run_id: 0x7e57,
        protocol_limits: ProtocolLimits::DEFAULT,
        fingerprint: Fingerprint::of(&mut []).unwrap(),
        handle,
    }
}

fn roomy() -> HandleConfig {
    HandleConfig {
        action_queue: 8192,
        control_queue: 1024,
        retained_bytes: 512 << 20,
        admission_capacity: 64,
    }
}

/// One rank: its handle, its driver, and every event it reported.
struct Node {
    handle: TransportHandle,
    driver: TcpDriver,
    events: Vec<TransportEvent>,
}

impl Node {
    fn rank(&self) -> Rank {
        self.handle.rank()
    }

    fn poll(&mut self) -> bool {
        self.driver.poll(256, &mut self.events).expect("poll")
    }

    /// Frames received so far: (from, channel, bytes). A frame received
    /// split (a large last segment in a buffer of its own) is joined.
    fn frames(&self) -> impl Iterator<Item = (Rank, Channel, Cow<'_, [u8]>)> {
        self.events.iter().filter_map(|event| match event {
            TransportEvent::Frame {
                from,
                channel,
                frame,
            } => {
                let bytes = if frame.is_split() {
                    Cow::Owned(frame.to_vec())
                } else {
                    Cow::Borrowed(frame.head())
                };
                Some((*from, *channel, bytes))
            }
            _ => None,
        })
    }

    fn downs(&self) -> Vec<(Rank, &TransportError)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                TransportEvent::PeerDown { peer, error } => Some((*peer, error)),
                _ => None,
            })
            .collect()
    }

    fn drained(&self) -> Vec<Rank> {
        self.events
            .iter()
            .filter_map(|event| match event {
                TransportEvent::PeerDrained { peer } => Some(*peer),
                _ => None,
            })
            .collect()
    }
}

/// Connects a world of `size` ranks in this process.
fn connect(size: u32, config: TcpConfig, handle: HandleConfig) -> Vec<Node> {
    connect_each(config, &vec![handle; size as usize])
}

/// Connects a world of `handles.len()` ranks in this process, rank `i`
/// with `handles[i]`.
fn connect_each(config: TcpConfig, handles: &[HandleConfig]) -> Vec<Node> {
    let world = WorldSize::new(handles.len() as u32).unwrap();
    let ranks: Vec<_> = Membership::loopback(world)
        .unwrap()
        .into_iter()
        .zip(handles.iter().copied())
        .map(|(membership, handle)| {
            thread::spawn(move || {
                TcpTransport::connect_with(membership, transport_hello(handle), config)
            })
        })
        .collect();
    ranks
        .into_iter()
        .map(|rank| {
            let (handle, driver) = rank.join().unwrap().expect("connect");
            Node {
                handle,
                driver,
                events: Vec::new(),
            }
        })
        .collect()
}

/// Polls every node until `done` holds.
fn pump(nodes: &mut [Node], what: &str, mut done: impl FnMut(&mut [Node]) -> bool) {
    let start = Instant::now();
    loop {
        let mut busy = false;
        for node in nodes.iter_mut() {
            busy |= node.poll();
        }
        if done(nodes) {
            return;
        }
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        if !busy {
            thread::sleep(Duration::from_micros(200));
        }
    }
}

fn call(seq: u64) -> Call {
    Call {
        request: RequestId::new(seq + 1).unwrap(),
        action: ActionId::new(0xf00d).unwrap(),
        domain: DomainId::MIN,
        trace: None,
    }
}

/// A request frame from `origin` carrying `seq` and `filler` extra bytes.
fn request(origin: Rank, seq: u64, filler: usize) -> Vec<u8> {
    let deadline = RelativeDeadline::from_duration(Duration::from_secs(60)).unwrap();
    let tail = vec![(seq % 251) as u8; filler];
    let seq_bytes = seq.to_le_bytes();
    let segments = [seq_bytes.as_slice(), tail.as_slice()];
    let header = Header::new(
        origin,
        Message::Request {
            call: call(seq),
            deadline,
        },
        &segments,
        &ProtocolLimits::DEFAULT,
    )
    .unwrap();
    let mut frame = vec![0; header.frame_len()];
    encode_frame(&header, &segments, &mut frame).unwrap();
    frame
}

/// A cancel frame from `origin` for request `seq`.
fn cancel(origin: Rank, seq: u64) -> Vec<u8> {
    Header::without_payload(origin, Message::Cancel { call: call(seq) })
        .unwrap()
        .encode()
        .to_vec()
}

/// The sequence number a test frame carries.
fn seq_of(frame: impl AsRef<[u8]>) -> u64 {
    let frame = frame.as_ref();
    u64::from_le_bytes(frame[24..32].try_into().unwrap()) - 1
}

#[test]
fn every_peer_comes_up_at_world_sizes_1_2_and_4() {
    for size in [1, 2, 4] {
        let mut nodes = connect(size, TcpConfig::default(), roomy());
        for node in &mut nodes {
            node.poll();
            let ups: Vec<_> = node
                .events
                .iter()
                .filter_map(|event| match event {
                    TransportEvent::PeerUp { peer } => Some(peer.get()),
                    _ => None,
                })
                .collect();
            let others: Vec<_> = (0..size).filter(|&r| r != node.rank().get()).collect();
            assert_eq!(ups, others, "world {size}, {}", node.rank());
            for peer in node.handle.world().ranks() {
                assert_eq!(node.handle.peer_status(peer), PeerStatus::Up);
            }
            assert!(node.driver.rejected().is_empty());
            assert_eq!(node.driver.counts().undrained_peers, size - 1);
        }
    }
}

#[test]
fn every_rank_knows_the_admission_capacity_each_peer_advertised() {
    // Rank 0 only accepts, rank 2 only dials, rank 1 does both; rank 2
    // advertises none.
    let capacities = [7, 9, 0];
    let handles: Vec<_> = capacities
        .iter()
        .map(|&admission_capacity| HandleConfig {
            admission_capacity,
            ..roomy()
        })
        .collect();
    let mut nodes = connect_each(TcpConfig::default(), &handles);
    for node in &mut nodes {
        // Known by the time the driver exists, before any `PeerUp` is
        // polled.
        for peer in node.handle.world().ranks() {
            assert_eq!(
                node.handle.peer_admission(peer),
                NonZeroU32::new(capacities[peer.index()]),
                "{} about {peer}",
                node.rank()
            );
        }
        node.poll();
        for peer in node.handle.world().ranks() {
            assert_eq!(node.handle.peer_status(peer), PeerStatus::Up);
        }
    }
}

#[test]
fn each_lane_is_fifo_and_control_is_separate() {
    let mut nodes = connect(2, TcpConfig::default(), roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    let (actions, cancels) = (3000u64, 300u64);
    let mut sent = (0, 0);
    pump(&mut nodes, "every frame", |nodes| {
        // Keep both lanes busy, interleaved, a slice at a time.
        while sent.0 < actions && nodes[0].handle.counts().queued_action < 512 {
            let frame = request(zero, sent.0, (sent.0 % 97) as usize * 13);
            nodes[0]
                .handle
                .try_send(one, Channel::Action, frame)
                .unwrap();
            sent.0 += 1;
            if sent.1 < cancels && sent.0 % 10 == 0 {
                nodes[0]
                    .handle
                    .try_send(one, Channel::Control, cancel(zero, sent.1))
                    .unwrap();
                sent.1 += 1;
            }
        }
        nodes[1].frames().count() as u64 == actions + cancels
    });
    let lane = |channel| -> Vec<u64> {
        nodes[1]
            .frames()
            .filter(|&(from, c, _)| from == zero && c == channel)
            .map(|(_, _, f)| seq_of(f))
            .collect()
    };
    assert_eq!(lane(Channel::Action), (0..actions).collect::<Vec<_>>());
    assert_eq!(lane(Channel::Control), (0..cancels).collect::<Vec<_>>());
    for (_, _, frame) in nodes[1].frames().filter(|f| f.1 == Channel::Action) {
        assert_eq!(
            frame,
            request(zero, seq_of(&frame), (seq_of(&frame) % 97) as usize * 13),
            "byte for byte"
        );
    }
    let counts = nodes[0].handle.counts();
    assert_eq!(
        (counts.in_flight, counts.retained_bytes, counts.frames_sent),
        (0, 0, actions + cancels)
    );
    assert_eq!(nodes[1].driver.counts().frames_received, actions + cancels);
}

#[test]
fn every_rank_reaches_every_rank_in_a_world_of_4() {
    let mut nodes = connect(4, TcpConfig::default(), roomy());
    let per_peer = 200u64;
    for node in &nodes {
        for peer in node.handle.world().ranks().filter(|&p| p != node.rank()) {
            for seq in 0..per_peer {
                node.handle
                    .try_send(peer, Channel::Action, request(node.rank(), seq, 40))
                    .unwrap();
                node.handle
                    .try_send(peer, Channel::Control, cancel(node.rank(), seq))
                    .unwrap();
            }
        }
    }
    pump(&mut nodes, "all-to-all", |nodes| {
        nodes
            .iter()
            .all(|n| n.frames().count() as u64 == 3 * 2 * per_peer)
    });
    for node in &nodes {
        for from in node.handle.world().ranks().filter(|&p| p != node.rank()) {
            for channel in Channel::ALL {
                let seqs: Vec<_> = node
                    .frames()
                    .filter(|f| f.0 == from && f.1 == channel)
                    .map(|f| seq_of(f.2))
                    .collect();
                assert_eq!(
                    seqs,
                    (0..per_peer).collect::<Vec<_>>(),
                    "{} from {from} on {channel}",
                    node.rank()
                );
            }
        }
    }
}

#[test]
fn large_frames_arrive_intact() {
    let mut nodes = connect(2, TcpConfig::default(), roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    let sizes = [8 << 20, 1, 65_535, 65_536, 1 << 20, 3_000_001];
    let frames: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| request(zero, i as u64, n))
        .collect();
    for frame in &frames {
        nodes[0]
            .handle
            .try_send(one, Channel::Action, frame.clone())
            .unwrap();
    }
    pump(&mut nodes, "the large frames", |nodes| {
        nodes[1].frames().count() == frames.len()
    });
    let received: Vec<_> = nodes[1].frames().map(|f| f.2.to_vec()).collect();
    assert_eq!(received, frames);
}

/// A request frame from `origin` with `segments`, whole, and held as a
/// head with the segments at `apart` in buffers of their own (middle
/// parts, and the tail if the last is among them).
fn scattered(origin: Rank, seq: u64, segments: &[&[u8]], apart: &[usize]) -> (Vec<u8>, Frame) {
    let deadline = RelativeDeadline::from_duration(Duration::from_secs(60)).unwrap();
    let message = Message::Request {
        call: call(seq),
        deadline,
    };
    let header = Header::new(origin, message, segments, &ProtocolLimits::DEFAULT).unwrap();
    let mut whole = vec![0; header.frame_len()];
    encode_frame(&header, segments, &mut whole).unwrap();
    let mut head = whole[..header.head_len()].to_vec();
    let (mut middle, mut tail) = (Vec::new(), Vec::new());
    for (i, segment) in segments.iter().enumerate() {
        if !apart.contains(&i) {
            head.extend_from_slice(segment);
        } else if i + 1 == segments.len() {
            tail = segment.to_vec();
        } else {
            middle.push((head.len(), Tail::from(segment.to_vec())));
        }
    }
    (whole, Frame::with_middle(head, middle, tail))
}

#[test]
fn frames_held_in_several_parts_arrive_as_their_bytes() {
    let mut nodes = connect(2, TcpConfig::default(), roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    let (big, other, small) = (vec![1_u8; 1 << 20], vec![2_u8; 70_000], b"small");
    let shapes: [(&[&[u8]], &[usize]); 4] = [
        (&[small, &big, small, &other], &[1, 3]),
        (&[&big, small], &[0]),
        (&[&big, &other, &big], &[0, 1]),
        (&[small, &other], &[1]),
    ];
    let mut expected = Vec::new();
    for (seq, (segments, apart)) in shapes.iter().enumerate() {
        let (whole, frame) = scattered(zero, seq as u64, segments, apart);
        assert!(frame.bytes_eq(&whole));
        nodes[0]
            .handle
            .try_send(one, Channel::Action, frame)
            .unwrap();
        // A small whole frame between them.
        let small = request(zero, 100 + seq as u64, 3);
        nodes[0]
            .handle
            .try_send(one, Channel::Action, small.clone())
            .unwrap();
        expected.extend([whole, small]);
    }
    pump(&mut nodes, "the frames", |nodes| {
        nodes[1].frames().count() == expected.len()
    });
    let received: Vec<_> = nodes[1].frames().map(|f| f.2.to_vec()).collect();
    assert_eq!(received, expected);
}

#[test]
fn a_rank_that_vanishes_is_reported_down_and_the_others_go_on() {
    let mut nodes = connect(3, TcpConfig::default(), roomy());
    let gone = nodes.pop().unwrap();
    let gone_rank = gone.rank();
    // Dropped without a goodbye: its sockets close.
    drop(gone);
    pump(&mut nodes, "the peer-down reports", |nodes| {
        nodes.iter().all(|n| !n.downs().is_empty())
    });
    for node in &nodes {
        let downs = node.downs();
        assert_eq!(downs.len(), 1);
        let (peer, error) = downs[0];
        assert_eq!(peer, gone_rank);
        assert!(
            matches!(
                error,
                TransportError::PeerDown {
                    reason: DownReason::EndOfStream,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(node.handle.peer_status(gone_rank), PeerStatus::Down);
        assert_eq!(
            node.handle.down_reason(gone_rank),
            Some(DownReason::EndOfStream)
        );
        let refused = node
            .handle
            .try_send(gone_rank, Channel::Action, request(node.rank(), 0, 0))
            .unwrap_err();
        assert_eq!(refused.kind(), SendErrorKind::PeerDown { to: gone_rank });
        assert_eq!(node.driver.counts().undrained_peers, 1);
    }
    // The two survivors still talk.
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    nodes[0]
        .handle
        .try_send(one, Channel::Action, request(zero, 9, 9))
        .unwrap();
    nodes[1]
        .handle
        .try_send(zero, Channel::Control, cancel(one, 4))
        .unwrap();
    pump(&mut nodes, "the survivors' frames", |nodes| {
        nodes.iter().all(|n| n.frames().count() == 1)
    });
}

#[test]
fn unwritten_frames_for_a_peer_that_goes_down_come_back_as_send_failed() {
    let config = TcpConfig::default();
    // The receiver never polls, so it reads nothing: the sender's frames
    // pile up unwritten in its outbox.
    let mut nodes = connect(2, config, roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    let total = 200u64;
    for seq in 0..total {
        nodes[0]
            .handle
            .try_send(one, Channel::Action, request(zero, seq, 1 << 20))
            .unwrap();
    }
    // Only the sender polls: the receiver's socket buffers fill, and TCP
    // flow control stops the sender.
    let mut sender = nodes.remove(0);
    for _ in 0..50 {
        sender.poll();
        thread::sleep(Duration::from_millis(2));
    }
    assert!(
        sender.handle.counts().in_flight > 0,
        "frames wait in the outbox"
    );
    drop(nodes);
    let start = Instant::now();
    while sender.downs().is_empty() {
        assert!(start.elapsed() < PATIENCE, "no peer-down report");
        sender.poll();
        sender
            .driver
            .idle_wait(Duration::ZERO, Duration::from_millis(1));
    }
    sender.poll();
    let failed = sender
        .events
        .iter()
        .filter(|e| matches!(e, TransportEvent::SendFailed { to, error: TransportError::PeerDown { .. }, .. } if *to == one))
        .count() as u64;
    let counts = sender.handle.counts();
    assert!(failed > 0, "some frames were still unwritten");
    assert_eq!(
        counts.frames_sent + failed,
        total,
        "every frame is either sent or handed back"
    );
    assert_eq!(
        (counts.in_flight, counts.retained_bytes),
        (0, 0),
        "{counts:?}"
    );
    let driver = sender.driver.counts();
    assert_eq!(
        (driver.in_flight_frames, driver.retained_bytes),
        (0, 0),
        "{driver:?}"
    );
}

#[test]
fn a_graceful_shutdown_drains_every_peer_after_its_frames() {
    let mut nodes = connect(3, TcpConfig::default(), roomy());
    let per_peer = 500u64;
    for node in &nodes {
        for peer in node.handle.world().ranks().filter(|&p| p != node.rank()) {
            for seq in 0..per_peer {
                node.handle
                    .try_send(peer, Channel::Action, request(node.rank(), seq, 100))
                    .unwrap();
            }
        }
        // Nothing polled yet: the goodbye must wait behind these frames.
    }
    for node in &mut nodes {
        node.driver.begin_shutdown();
        let refused = node
            .handle
            .try_send(node.rank(), Channel::Action, vec![0])
            .unwrap_err();
        assert_eq!(refused.kind(), SendErrorKind::Closed);
    }
    pump(&mut nodes, "the drain", |nodes| {
        nodes.iter().all(|n| n.driver.is_drained())
    });
    for node in &mut nodes {
        assert!(node.downs().is_empty(), "{:?}", node.downs());
        let mut drained = node.drained();
        drained.sort();
        let others: Vec<_> = node
            .handle
            .world()
            .ranks()
            .filter(|&p| p != node.rank())
            .collect();
        assert_eq!(drained, others);
        // Each peer's drain comes after every frame from it.
        for peer in &others {
            let last_frame = node
                .events
                .iter()
                .rposition(|e| matches!(e, TransportEvent::Frame { from, .. } if from == peer));
            let drain = node
                .events
                .iter()
                .position(|e| matches!(e, TransportEvent::PeerDrained { peer: p } if p == peer));
            assert!(
                last_frame < drain,
                "{} drained {peer} before its last frame",
                node.rank()
            );
        }
        assert_eq!(node.frames().count() as u64, 2 * per_peer);
        let left = node.driver.close(Instant::now() + Duration::from_secs(5));
        assert_eq!(
            (
                left.in_flight_frames,
                left.retained_bytes,
                left.undrained_peers
            ),
            (0, 0, 0),
            "{left:?}"
        );
        assert_eq!(node.handle.counts().in_flight, 0);
        assert!(matches!(
            node.driver.poll(1, &mut Vec::new()),
            Err(TransportError::Closed)
        ));
    }
}

#[test]
fn back_pressure_is_a_typed_refusal_and_memory_stays_bounded() {
    let config = TcpConfig::default()
        .with_inbox_frames(8)
        .with_write_queue_bytes(512 << 10);
    let budget = 4 << 20;
    let handle = HandleConfig {
        action_queue: 256,
        control_queue: 16,
        retained_bytes: budget,
        admission_capacity: 0,
    };
    let mut nodes = connect(2, config, handle);
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    let frame_len = request(zero, 0, 64 << 10).len() as u64;
    // Rank 1 does not poll: rank 0 sends until the handle refuses.
    let mut sent = 0u64;
    let refusal = loop {
        match nodes[0]
            .handle
            .try_send(one, Channel::Action, request(zero, sent, 64 << 10))
        {
            Ok(()) => sent += 1,
            Err(refused) => break refused.kind(),
        }
        nodes[0].poll();
        assert!(sent < 100_000, "never refused: the buffers grow");
    };
    assert!(
        matches!(
            refusal,
            SendErrorKind::RetainedBytes { .. } | SendErrorKind::QueueFull { .. }
        ),
        "{refusal:?}"
    );
    assert!(nodes[0].handle.counts().retained_bytes <= budget + frame_len);
    let receiver = nodes[1].driver.counts().retained_bytes;
    assert!(
        receiver <= (256 << 10) * 2 + 2 * frame_len,
        "receiver holds {receiver} bytes"
    );
    // The control lane has its own reserve: a cancel still goes through.
    nodes[0]
        .handle
        .try_send(one, Channel::Control, cancel(zero, 1))
        .unwrap();
    pump(&mut nodes, "everything to arrive", |nodes| {
        nodes[1].frames().count() as u64 == sent + 1
    });
    let seqs: Vec<_> = nodes[1]
        .frames()
        .filter(|f| f.1 == Channel::Action)
        .map(|f| seq_of(f.2))
        .collect();
    assert_eq!(seqs, (0..sent).collect::<Vec<_>>());
}

#[test]
fn close_reports_what_it_discarded() {
    let config = TcpConfig::default().with_inbox_frames(2);
    let mut nodes = connect(2, config, roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    for seq in 0..64 {
        nodes[0]
            .handle
            .try_send(one, Channel::Action, request(zero, seq, 1 << 20))
            .unwrap();
    }
    for _ in 0..20 {
        nodes[0].poll();
        thread::sleep(Duration::from_millis(2));
    }
    let left = nodes[0]
        .driver
        .close(Instant::now() + Duration::from_secs(5));
    assert!(
        left.in_flight_frames > 0 && left.retained_bytes > 0,
        "{left:?}"
    );
    assert_eq!(
        nodes[0].driver.counts(),
        left,
        "counts after close are what close reported"
    );
    let handle = nodes[0].handle.counts();
    assert_eq!(
        (
            handle.in_flight,
            handle.queued_action,
            handle.retained_bytes
        ),
        (0, 0, 0),
        "{handle:?}"
    );
    assert!(nodes[0].handle.is_closed());
}

#[test]
fn a_rank_can_send_to_itself() {
    let mut nodes = connect(2, TcpConfig::default(), roomy());
    let zero = nodes[0].rank();
    nodes[0]
        .handle
        .try_send(zero, Channel::Action, request(zero, 5, 3))
        .unwrap();
    pump(&mut nodes, "the loopback frame", |nodes| {
        nodes[0].frames().count() == 1
    });
    let (from, channel, frame) = nodes[0].frames().next().unwrap();
    assert_eq!((from, channel, seq_of(frame)), (zero, Channel::Action, 5));
}

#[test]
fn set_up_times_out_when_a_rank_never_comes() {
    let world = WorldSize::new(3).unwrap();
    let config = TcpConfig::default().with_setup_timeout(Duration::from_millis(300));
    let mut members = Membership::loopback(world).unwrap();
    // Only rank 1 shows up: rank 0 is bound but silent, rank 2 absent.
    let one = members.remove(1);
    let error = TcpTransport::connect_with(one, transport_hello(roomy()), config).unwrap_err();
    drop(members);
    assert!(
        matches!(
            error,
            TcpError::HelloTimeout { .. } | TcpError::SetupTimeout { .. }
        ),
        "{error}"
    );
    let transport: TransportError = error.into();
    assert!(transport.to_string().contains("time"), "{transport}");
}

#[test]
fn set_up_fails_when_a_lower_rank_refuses_connections() {
    let world = WorldSize::new(2).unwrap();
    let config = TcpConfig::default().with_setup_timeout(Duration::from_millis(300));
    let mut members = Membership::loopback(world).unwrap();
    // Rank 0's port is closed: every dial is refused until the deadline.
    drop(members.remove(0));
    let error = TcpTransport::connect_with(members.remove(0), transport_hello(roomy()), config)
        .unwrap_err();
    assert!(matches!(error, TcpError::Connect { .. }), "{error}");
    assert!(std::error::Error::source(&error).is_some());
}

/// Ranks 0 and 1 of a world of two, each past its `PeerUp` (events
/// cleared).
fn settled_pair() -> (Node, Node) {
    settled_pair_with(TcpConfig::default())
}

/// The default configuration without heartbeats: nothing arrives that the
/// test did not send.
fn quiet() -> TcpConfig {
    TcpConfig::default().with_liveness_timeout(None)
}

fn settled_pair_with(config: TcpConfig) -> (Node, Node) {
    let mut nodes = connect(2, config, roomy());
    pump(&mut nodes, "the peers", |nodes| {
        nodes.iter().all(|n| !n.events.is_empty())
    });
    let mut one = nodes.pop().unwrap();
    let mut zero = nodes.pop().unwrap();
    zero.events.clear();
    one.events.clear();
    (zero, one)
}

#[test]
fn frames_beyond_the_poll_budget_wait_read_and_counted_for_the_next_poll() {
    let (mut sender, mut receiver) = settled_pair();
    let (zero, one) = (sender.rank(), receiver.rank());
    let total = 20u64;
    for seq in 0..total {
        sender
            .handle
            .try_send(one, Channel::Action, request(zero, seq, 100))
            .unwrap();
    }
    let start = Instant::now();
    while sender.handle.counts().in_flight > 0 || sender.handle.counts().queued_action > 0 {
        assert!(start.elapsed() < PATIENCE, "the sender never wrote");
        sender.poll();
    }
    // One frame per poll: the rest waits on the receiving side (read into
    // its buffer or still in the socket), and what was read is counted.
    let mut seqs = Vec::new();
    let mut held = 0;
    while (seqs.len() as u64) < total {
        assert!(start.elapsed() < PATIENCE, "frames stopped coming");
        let mut events = Vec::new();
        receiver.driver.poll(1, &mut events).unwrap();
        assert!(events.len() <= 1, "{events:?}");
        for event in events {
            if let TransportEvent::Frame { frame, .. } = event {
                seqs.push(seq_of(frame.head()));
            }
        }
        held = held.max(receiver.driver.counts().retained_bytes);
    }
    assert_eq!(seqs, (0..total).collect::<Vec<_>>());
    assert!(held > 0, "frames read and not yet handed over are counted");
    assert_eq!(receiver.driver.counts().retained_bytes, 0);
}

#[test]
fn a_parked_owner_is_woken_when_its_peer_sends() {
    let (sender, mut receiver) = settled_pair_with(quiet());
    let zero = sender.rank();
    let (_sender, got) = woken_by(&mut receiver, sender, Channel::Control, cancel(zero, 9));
    assert_eq!(got, (zero, Channel::Control, 9));
}

/// An owner spinning in its idle wait catches an arrival whichever way it
/// looks: reading its two sockets itself (two ranks and the default
/// configuration) or asking the readiness set (`spin_read_connections`
/// 0); the next poll hands the frame over, on either lane.
#[test]
fn a_spinning_owner_catches_an_arrival_either_way_it_looks() {
    for reads in [TcpConfig::DEFAULT.spin_read_connections, 0] {
        for channel in [Channel::Control, Channel::Action] {
            let config = quiet().with_spin_read_connections(reads);
            let (sender, mut receiver) = settled_pair_with(config);
            let zero = sender.rank();
            let frame = match channel {
                Channel::Control => cancel(zero, 5),
                Channel::Action => request(zero, 5, 16),
            };
            let (_sender, got) = caught_by(&mut receiver, PATIENCE * 2, sender, channel, frame);
            assert_eq!(got, (zero, channel, 5), "reading up to {reads} sockets");
        }
    }
}

/// Parks `receiver` (no spin, and a wait far longer than the test allows)
/// while `sender`, on another thread, sends it `frame` on `channel` 50 ms
/// later: only the receiver's watcher can end the wait early, and the
/// receiver's next poll must hand the frame over. Returns the sender and
/// the frame's origin, lane and sequence number. The two ranks must not
/// send heartbeats ([`quiet`]), which would end the wait first.
fn woken_by(
    receiver: &mut Node,
    sender: Node,
    channel: Channel,
    frame: Vec<u8>,
) -> (Node, (Rank, Channel, u64)) {
    caught_by(receiver, Duration::ZERO, sender, channel, frame)
}

/// As [`woken_by`], with the receiver spinning for `spin` before it parks.
fn caught_by(
    receiver: &mut Node,
    spin: Duration,
    mut sender: Node,
    channel: Channel,
    frame: Vec<u8>,
) -> (Node, (Rank, Channel, u64)) {
    let to = receiver.rank();
    let send = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        sender.handle.try_send(to, channel, frame).unwrap();
        sender.poll();
        sender
    });
    assert!(receiver.handle.wakeup().bind_current());
    let start = Instant::now();
    receiver.driver.idle_wait(spin, PATIENCE * 2);
    assert!(
        start.elapsed() < PATIENCE,
        "neither the spin nor the watcher ended the wait"
    );
    let sender = send.join().unwrap();
    // The frame is what ended the wait, so the first poll hands it over,
    // however the owner found it.
    receiver.poll();
    assert_eq!(
        receiver.frames().count(),
        1,
        "the poll after the wait did not hand the frame over"
    );
    let (from, channel, bytes) = receiver.frames().next().unwrap();
    (sender, (from, channel, seq_of(bytes)))
}

/// With a peer gone (its streams ended), a survivor's idle wait still
/// parks: an ended stream leaves the watcher's set instead of keeping it
/// readable, which would end every idle wait at once and turn the idle
/// owner into a busy loop. Also after a graceful drain.
#[test]
fn ended_streams_do_not_cut_idle_waits_short() {
    let parks = |node: &mut Node| {
        assert!(node.handle.wakeup().bind_current());
        let _ = node.handle.wakeup().take();
        let wait = Duration::from_millis(300);
        let start = Instant::now();
        node.driver.idle_wait(Duration::ZERO, wait);
        // A lower bound only: the wait may run late, never early.
        assert!(
            start.elapsed() >= wait - Duration::from_millis(50),
            "rank {}: the idle wait ended after {:?}",
            node.rank().get(),
            start.elapsed()
        );
    };
    let mut nodes = connect(3, TcpConfig::default(), roomy());
    pump(&mut nodes, "every peer up", |nodes| {
        nodes.iter().all(|n| n.driver.counts().undrained_peers == 2)
    });
    let gone = nodes.pop().unwrap();
    drop(gone);
    pump(&mut nodes, "the peer-down reports", |nodes| {
        nodes.iter().all(|n| !n.downs().is_empty())
    });
    parks(&mut nodes[0]);
    // The two survivors drain each other gracefully (goodbyes, then the
    // ends of both streams). An end not read yet ends an idle wait (the
    // next poll has it to read); once the polls have read both ends, the
    // idle waits park again.
    for node in &mut nodes {
        node.driver.begin_shutdown();
    }
    pump(&mut nodes, "the drain", |nodes| {
        nodes.iter().all(|n| n.driver.is_drained())
    });
    let start = Instant::now();
    loop {
        for node in &mut nodes {
            node.poll();
        }
        if node_parks_briefly(&mut nodes[0]) && node_parks_briefly(&mut nodes[1]) {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the ended streams keep ending the idle waits"
        );
    }
    parks(&mut nodes[1]);
}

/// Whether an idle wait of 20 ms lasts (nearly) that long.
fn node_parks_briefly(node: &mut Node) -> bool {
    assert!(node.handle.wakeup().bind_current());
    let _ = node.handle.wakeup().take();
    let wait = Duration::from_millis(20);
    let start = Instant::now();
    node.driver.idle_wait(Duration::ZERO, wait);
    start.elapsed() >= wait - Duration::from_millis(5)
}

/// In a world of 6 (ten sockets per rank in the watcher's set), a parked
/// owner is woken by whichever peer sends, here the highest rank.
#[test]
fn a_parked_owner_in_a_world_of_6_is_woken_by_any_peer() {
    let mut nodes = connect(6, quiet(), roomy());
    pump(&mut nodes, "every peer up", |nodes| {
        nodes.iter().all(|n| n.driver.counts().undrained_peers == 5)
    });
    let mut receiver = nodes.remove(0);
    let sender = nodes.pop().unwrap();
    let from = sender.rank();
    let frame = request(from, 3, 16);
    let (sender, got) = woken_by(&mut receiver, sender, Channel::Action, frame);
    assert_eq!(got, (from, Channel::Action, 3));
    drop((sender, nodes));
}

#[test]
fn flush_writes_queued_frames_without_a_poll() {
    let mut nodes = connect(2, TcpConfig::default(), roomy());
    let (zero, one) = (nodes[0].rank(), nodes[1].rank());
    assert!(
        !nodes[0].driver.flush(256, &mut Vec::new()).unwrap(),
        "nothing queued, nothing sent"
    );
    nodes[0]
        .handle
        .try_send(one, Channel::Action, request(zero, 1, 16))
        .unwrap();
    nodes[0]
        .handle
        .try_send(one, Channel::Control, cancel(zero, 1))
        .unwrap();
    let mut events = Vec::new();
    assert!(nodes[0].driver.flush(256, &mut events).unwrap());
    assert!(events.is_empty(), "{events:?}");
    assert!(!nodes[0].handle.has_queued(), "both frames left the handle");
    // Only rank 1 polls from here: the bytes are already on the socket.
    let start = Instant::now();
    while nodes[1].frames().count() < 2 {
        if !nodes[1].poll() {
            thread::sleep(Duration::from_micros(200));
        }
        assert!(start.elapsed() < PATIENCE, "the flushed frames never came");
    }
    let mut got: Vec<_> = nodes[1]
        .frames()
        .map(|(from, channel, frame)| (from, channel, seq_of(frame)))
        .collect();
    got.sort_by_key(|&(_, channel, _)| channel.index());
    assert_eq!(
        got,
        [(zero, Channel::Control, 1), (zero, Channel::Action, 1)]
    );
}
