//! Strangers speaking raw TCP to dinah ranks: garbage, frames instead of
//! hellos, hellos of another run, registry, version or world, ranks out of
//! range or already connected, silence, and broken frames after a good
//! handshake. Each is refused with its typed error, nothing panics,
//! nothing allocates what the stranger announces, and the legitimate
//! ranks' run goes on. The ranks here run without the proof of the run
//! key, so that the test can play a rank (`tcp_auth.rs` tests the proof).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dinah_core::wire::{
    Call, Channel, HELLO_LEN, Header, Hello, HelloError, HelloField, Message, ProtocolError,
    RelativeDeadline,
};
use dinah_core::{ActionId, DomainId, Fingerprint, ProtocolLimits, Rank, RequestId, WorldSize};
use dinah_std::transport::{
    DownReason, PeerStatus, TransportDriver, TransportError, TransportEvent, TransportHandle,
    TransportHello,
};
use dinah_tcp::{Membership, TcpConfig, TcpDriver, TcpError, TcpTransport};

#[path = "support/bare_hello.rs"]
mod bare_hello;

const RUN_ID: u64 = 0xbad_5eed;
const PATIENCE: Duration = Duration::from_secs(60);

fn transport_hello() -> TransportHello {
    bare_hello::transport_hello(RUN_ID)
}

fn config() -> TcpConfig {
    TcpConfig::default()
        .with_hello_timeout(Duration::from_millis(300))
        .with_setup_timeout(PATIENCE)
}

/// The hello a legitimate `rank` of a world of `size` sends on `channel`.
fn hello(rank: u32, size: u32, channel: Channel) -> Hello {
    let world = WorldSize::new(size).unwrap();
    Hello::new(
        u128::from(RUN_ID),
        world.rank(rank).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
        bare_hello::fingerprint(),
        channel,
    )
    .unwrap()
}

type Connected = Result<(TransportHandle, TcpDriver), TcpError>;

/// In-process memberships of a world of `size` whose ranks do not prove
/// the run key: these tests play ranks with hand-made hellos, which carry
/// no proof (the proof has its own tests, in `tcp_auth.rs`).
fn loopback(size: u32) -> Vec<Membership> {
    Membership::loopback(WorldSize::new(size).unwrap())
        .unwrap()
        .into_iter()
        .map(Membership::without_authentication)
        .collect()
}

fn start(membership: Membership) -> JoinHandle<Connected> {
    thread::spawn(move || TcpTransport::connect_with(membership, transport_hello(), config()))
}

/// Sends `bytes` to `addr` and reads until the rank closes the connection;
/// returns what it answered (a refused stranger gets nothing).
fn probe(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(bytes).unwrap();
    read_to_close(&mut stream)
}

fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // Closing with our unread bytes in its buffer makes the rank's
        // side reset the connection.
        Err(error) if error.kind() == ErrorKind::ConnectionReset => {}
        Err(error) => panic!("the rank neither answered nor closed: {error}"),
    }
    answer
}

/// Connects as `rank` on `channel` with a valid hello and reads the answer.
fn join_as(addr: SocketAddr, rank: u32, size: u32, channel: Channel) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(&hello(rank, size, channel).encode())
        .unwrap();
    let mut answer = [0; HELLO_LEN];
    stream.read_exact(&mut answer).unwrap();
    let answer = Hello::decode(&answer).unwrap();
    assert_eq!(answer.channel, channel);
    stream
}

/// A request frame header from `origin` announcing a 2 GiB payload.
fn huge_header(origin: Rank) -> Vec<u8> {
    let call = Call {
        request: RequestId::MIN,
        action: ActionId::new(1).unwrap(),
        domain: DomainId::MIN,
        trace: None,
    };
    let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
    let one: [&[u8]; 1] = [b"x"];
    let mut bytes = Header::new(
        origin,
        Message::Request { call, deadline },
        &one,
        &ProtocolLimits::DEFAULT,
    )
    .unwrap()
    .encode()
    .to_vec();
    bytes[12..16].copy_from_slice(&(1u32 << 31).to_le_bytes());
    bytes
}

/// A small valid request frame from rank 0.
fn small_frame() -> Vec<u8> {
    let call = Call {
        request: RequestId::MIN,
        action: ActionId::new(1).unwrap(),
        domain: DomainId::MIN,
        trace: None,
    };
    let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
    let one: [&[u8]; 1] = [b"x"];
    let header = Header::new(
        Rank::ZERO,
        Message::Request { call, deadline },
        &one,
        &ProtocolLimits::DEFAULT,
    )
    .unwrap();
    let mut frame = vec![0; header.frame_len()];
    dinah_core::wire::encode_frame(&header, &one, &mut frame).unwrap();
    frame
}

/// Polls `driver` until `done` holds for its events.
fn poll_until(
    driver: &mut TcpDriver,
    events: &mut Vec<TransportEvent>,
    what: &str,
    done: impl Fn(&[TransportEvent]) -> bool,
) {
    let start = Instant::now();
    while !done(events) {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        driver.poll(64, events).unwrap();
        driver.idle_wait(Duration::ZERO, Duration::from_millis(1));
    }
}

#[test]
fn strangers_are_refused_with_typed_errors_and_the_run_goes_on() {
    let size = 2;
    let mut members = loopback(size);
    let addr = members[0].bind_addr();
    let one = members.remove(1);
    let zero = start(members.remove(0));

    let mut wrong_version = hello(1, size, Channel::Action).encode();
    wrong_version[4..6].copy_from_slice(&(dinah_core::wire::PROTOCOL_VERSION + 1).to_le_bytes());
    let mut out_of_range = hello(1, size, Channel::Action).encode();
    out_of_range[8..12].copy_from_slice(&7u32.to_le_bytes());
    let mut other_run = hello(1, size, Channel::Action);
    other_run.run_id = 0xdead;
    let mut other_registry = hello(1, size, Channel::Control);
    other_registry.fingerprint = Fingerprint::from_u128(0xbeef);
    let other_world = hello(1, 5, Channel::Action);
    let myself = hello(0, size, Channel::Action);
    let probes: [(&str, Vec<u8>); 9] = [
        ("garbage", vec![0xab; 200]),
        ("a frame header announcing 2 GiB", huge_header(Rank::ZERO)),
        ("another protocol version", wrong_version.to_vec()),
        ("a rank outside its world", out_of_range.to_vec()),
        ("another run", other_run.encode().to_vec()),
        ("another registry", other_registry.encode().to_vec()),
        ("another world size", other_world.encode().to_vec()),
        ("the listener's own rank", myself.encode().to_vec()),
        (
            "half a hello, then goodbye",
            hello(1, size, Channel::Action).encode()[..30].to_vec(),
        ),
    ];
    // A hello of this run that differs in what it says is answered with
    // the listener's own hello (so that a genuine dialler can name the
    // difference) before the close; nothing else gets an answer.
    let answered = [
        "another registry",
        "another world size",
        "the listener's own rank",
    ];
    for (what, bytes) in &probes {
        if what.starts_with("half") {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.write_all(bytes).unwrap();
            stream.shutdown(std::net::Shutdown::Write).unwrap();
            assert!(read_to_close(&mut stream).is_empty(), "{what}");
        } else if answered.contains(what) {
            let answer = probe(addr, bytes);
            let answer: [u8; HELLO_LEN] = answer[..].try_into().expect("one hello");
            let asked: [u8; HELLO_LEN] = bytes[..].try_into().unwrap();
            let (theirs, asked) = (
                Hello::decode(&answer).unwrap(),
                Hello::decode(&asked).unwrap(),
            );
            assert_eq!(theirs.rank, Rank::ZERO, "{what}");
            assert_eq!(theirs.channel, asked.channel, "{what}");
        } else {
            assert!(probe(addr, bytes).is_empty(), "{what} got an answer");
        }
    }
    // Silence: dropped when its hello timeout passes.
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    assert!(read_to_close(&mut silent).is_empty());

    // The legitimate rank still gets in, and the two talk.
    let one = start(one);
    let (zero_handle, mut zero_driver) = zero.join().unwrap().expect("rank 0 connects");
    let (one_handle, mut one_driver) = one.join().unwrap().expect("rank 1 connects");
    let rejected = zero_driver.rejected();
    assert_eq!(zero_driver.rejected_total(), 10, "{rejected:#?}");
    let bad_hello = |error: &TcpError| match error {
        TcpError::BadHello { error, .. } => Some(*error),
        _ => None,
    };
    let mismatch = |error: &TcpError| match error {
        TcpError::Mismatch { mismatch, .. } => Some(mismatch.field),
        _ => None,
    };
    assert!(
        matches!(bad_hello(&rejected[0]), Some(HelloError::BadMagic { .. })),
        "{}",
        rejected[0]
    );
    assert_eq!(
        bad_hello(&rejected[1]),
        Some(HelloError::NotHello { kind: 1 }),
        "{}",
        rejected[1]
    );
    assert_eq!(
        bad_hello(&rejected[2]),
        Some(HelloError::UnsupportedVersion {
            found: dinah_core::wire::PROTOCOL_VERSION + 1
        }),
        "{}",
        rejected[2]
    );
    assert_eq!(
        bad_hello(&rejected[3]),
        Some(HelloError::RankOutOfRange {
            rank: 7,
            world_size: 2
        }),
        "{}",
        rejected[3]
    );
    assert_eq!(
        mismatch(&rejected[4]),
        Some(HelloField::RunId),
        "{}",
        rejected[4]
    );
    assert_eq!(
        mismatch(&rejected[5]),
        Some(HelloField::Fingerprint),
        "{}",
        rejected[5]
    );
    assert_eq!(
        mismatch(&rejected[6]),
        Some(HelloField::WorldSize),
        "{}",
        rejected[6]
    );
    assert_eq!(
        mismatch(&rejected[7]),
        Some(HelloField::DuplicateRank),
        "{}",
        rejected[7]
    );
    assert!(
        matches!(rejected[8], TcpError::HandshakeClosed { peer: None, .. }),
        "{}",
        rejected[8]
    );
    assert!(
        matches!(rejected[9], TcpError::HelloTimeout { peer: None, .. }),
        "{}",
        rejected[9]
    );
    for error in rejected {
        let text = error.to_string();
        assert!(!text.is_empty() && !text.ends_with('.'), "{text}");
    }

    let cancel = Header::without_payload(
        one_handle.rank(),
        Message::Cancel {
            call: Call {
                request: RequestId::MIN,
                action: ActionId::new(1).unwrap(),
                domain: DomainId::MIN,
                trace: None,
            },
        },
    )
    .unwrap();
    one_handle
        .try_send(
            zero_handle.rank(),
            Channel::Control,
            cancel.encode().to_vec(),
        )
        .unwrap();
    let mut events = Vec::new();
    let start = Instant::now();
    while !events
        .iter()
        .any(|e| matches!(e, TransportEvent::Frame { .. }))
    {
        assert!(
            start.elapsed() < PATIENCE,
            "the legitimate frame never arrived"
        );
        one_driver.poll(64, &mut Vec::new()).unwrap();
        zero_driver.poll(64, &mut events).unwrap();
        thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn beyond_a_thousand_waiting_strangers_the_oldest_makes_room() {
    let size = 2;
    let mut members = loopback(size);
    let addr = members[0].bind_addr();
    let one = members.remove(1);
    // Long enough that none of the crowd is dropped for its silence
    // before the last one arrives.
    let patient = config().with_hello_timeout(Duration::from_secs(10));
    let zero = {
        let membership = members.remove(0);
        thread::spawn(move || TcpTransport::connect_with(membership, transport_hello(), patient))
    };
    // More silent connections than the listener waits for at once: the
    // first 76 are dropped as the last 76 arrive.
    let strangers = 1100;
    let mut crowd: Vec<TcpStream> = (0..strangers)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    for stream in &mut crowd[..76] {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        assert!(read_to_close(stream).is_empty());
    }
    // The genuine rank still gets in while the rest of the crowd waits.
    let one = start(one);
    one.join().unwrap().expect("rank 1 connects");
    let (_, zero_driver) = zero.join().unwrap().expect("rank 0 connects");
    let rejected = zero_driver.rejected();
    assert_eq!(rejected.len(), 64, "the kept refusals are bounded");
    assert!(
        rejected
            .iter()
            .all(|e| matches!(e, TcpError::Evicted { .. })),
        "{rejected:#?}"
    );
    assert!(zero_driver.rejected_total() >= 76);
    drop(crowd);
}

#[test]
fn a_duplicate_connection_and_a_lower_rank_dialling_are_refused() {
    // World 3: ranks 0 and 1 are dinah; the test plays rank 2 (and
    // strangers).
    let size = 3;
    let mut members = loopback(size);
    let addrs = members[0].addrs().to_vec();
    let one = start(members.remove(1));
    let zero = start(members.remove(0));
    // Rank 0's set-up cannot finish (and close its listener) before "rank
    // 2"'s action connection, so the duplicate comes in between.
    let control = join_as(addrs[0], 2, size, Channel::Control);
    // A second control connection claiming rank 2.
    assert!(probe(addrs[0], &hello(2, size, Channel::Control).encode()).is_empty());
    let mut to_zero = [control, join_as(addrs[0], 2, size, Channel::Action)];
    // Rank 0 dialling rank 1 is backwards: rank 1 dials rank 0.
    assert!(probe(addrs[1], &hello(0, size, Channel::Action).encode()).is_empty());
    let mut to_one = [
        join_as(addrs[1], 2, size, Channel::Control),
        join_as(addrs[1], 2, size, Channel::Action),
    ];
    let (zero_handle, mut zero_driver) = zero.join().unwrap().expect("rank 0 connects");
    let (one_handle, mut one_driver) = one.join().unwrap().expect("rank 1 connects");
    assert!(
        matches!(
            zero_driver.rejected(),
            [TcpError::Duplicate {
                channel: Channel::Control,
                ..
            }]
        ),
        "{:#?}",
        zero_driver.rejected()
    );
    assert!(
        matches!(one_driver.rejected(), [TcpError::WrongDirection { .. }]),
        "{:#?}",
        one_driver.rejected()
    );

    // After the handshake "rank 2" announces a 2 GiB frame to rank 0 and
    // sends garbage to rank 1: each closes that peer and reports it down
    // with the protocol error.
    let two = WorldSize::new(size).unwrap().rank(2).unwrap();
    to_zero[1].write_all(&huge_header(two)).unwrap();
    to_one[0].write_all(&[0x42; 100]).unwrap();
    let mut zero_events = Vec::new();
    poll_until(
        &mut zero_driver,
        &mut zero_events,
        "rank 0's peer-down",
        |e| {
            e.iter()
                .any(|e| matches!(e, TransportEvent::PeerDown { .. }))
        },
    );
    let mut one_events = Vec::new();
    poll_until(
        &mut one_driver,
        &mut one_events,
        "rank 1's peer-down",
        |e| {
            e.iter()
                .any(|e| matches!(e, TransportEvent::PeerDown { .. }))
        },
    );
    let down = |events: &[TransportEvent]| {
        events.iter().find_map(|e| match e {
            TransportEvent::PeerDown { peer, error } => Some((*peer, error.clone())),
            _ => None,
        })
    };
    let (peer, error) = down(&zero_events).unwrap();
    assert_eq!(peer, two);
    assert!(
        matches!(
            error,
            TransportError::Protocol {
                error: ProtocolError::FrameTooLarge { .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        zero_handle.down_reason(two),
        Some(DownReason::ProtocolViolation)
    );
    let (peer, error) = down(&one_events).unwrap();
    assert_eq!(peer, two);
    assert!(
        matches!(
            error,
            TransportError::Protocol {
                error: ProtocolError::BadMagic { .. },
                ..
            }
        ),
        "{error:?}"
    );
    // Both of "rank 2"'s connections to each rank are closed.
    for stream in to_zero.iter_mut().chain(to_one.iter_mut()) {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        read_to_close(stream);
    }
    // Ranks 0 and 1 carry on.
    assert_eq!(zero_handle.peer_status(one_handle.rank()), PeerStatus::Up);
    let cancel = Header::without_payload(
        zero_handle.rank(),
        Message::Cancel {
            call: Call {
                request: RequestId::MIN,
                action: ActionId::new(1).unwrap(),
                domain: DomainId::MIN,
                trace: None,
            },
        },
    )
    .unwrap();
    zero_handle
        .try_send(
            one_handle.rank(),
            Channel::Control,
            cancel.encode().to_vec(),
        )
        .unwrap();
    let start = Instant::now();
    while !one_events
        .iter()
        .any(|e| matches!(e, TransportEvent::Frame { .. }))
    {
        assert!(start.elapsed() < PATIENCE, "ranks 0 and 1 stopped talking");
        zero_driver.poll(64, &mut Vec::new()).unwrap();
        one_driver.poll(64, &mut one_events).unwrap();
        thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn a_reset_connection_is_a_peer_down() {
    let size = 2;
    let mut members = loopback(size);
    let addr = members[0].bind_addr();
    let zero = start(members.remove(0));
    let control = join_as(addr, 1, size, Channel::Control);
    let action = join_as(addr, 1, size, Channel::Action);
    let (handle, mut driver) = zero.join().unwrap().expect("rank 0 connects");
    // Closing a socket with unread bytes resets the connection: let rank 0
    // send a frame this side never reads, then close.
    let peer = WorldSize::new(size).unwrap().rank(1).unwrap();
    handle
        .try_send(peer, Channel::Action, small_frame())
        .unwrap();
    driver.poll(64, &mut Vec::new()).unwrap();
    let mut probe = [0u8; 1];
    action.peek(&mut probe).unwrap();
    drop(action);
    let mut events = Vec::new();
    poll_until(&mut driver, &mut events, "the peer-down", |e| {
        e.iter()
            .any(|e| matches!(e, TransportEvent::PeerDown { .. }))
    });
    assert_eq!(handle.down_reason(peer), Some(DownReason::Reset));
    drop(control);
}

/// A fake rank 0: accepts one connection, reads the dialler's hello, and
/// answers as `answer` says.
fn fake_listener(
    answer: impl FnOnce(&mut TcpStream, Hello) + Send + 'static,
) -> (Membership, JoinHandle<()>) {
    let size = 2;
    let mut members = loopback(size);
    let one = members.remove(1);
    let listener: TcpListener = members.remove(0).listener().unwrap().try_clone().unwrap();
    let fake = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = [0; HELLO_LEN];
        stream.read_exact(&mut bytes).unwrap();
        answer(&mut stream, Hello::decode(&bytes).unwrap());
        // Hold the connection until the dialler gives up.
        let _ = stream.read_to_end(&mut Vec::new());
    });
    (one, fake)
}

#[test]
fn a_dialler_refuses_a_listener_that_answers_wrongly() {
    type Answer = fn(&mut TcpStream, Hello);
    type Expected = fn(&TcpError) -> bool;
    let cases: [(&str, Answer, Expected); 3] = [
        (
            "another run",
            |stream, mut theirs| {
                theirs.rank = WorldSize::new(2).unwrap().rank(0).unwrap();
                theirs.run_id = 1;
                stream.write_all(&theirs.encode()).unwrap();
            },
            |e| matches!(e, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::RunId),
        ),
        (
            "the other channel",
            |stream, theirs| {
                let other = if theirs.channel == Channel::Control {
                    Channel::Action
                } else {
                    Channel::Control
                };
                stream.write_all(&hello(0, 2, other).encode()).unwrap();
            },
            |e| matches!(e, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::Channel),
        ),
        (
            "garbage",
            |stream, _| stream.write_all(&[7; HELLO_LEN]).unwrap(),
            |e| matches!(e, TcpError::BadHello { .. }),
        ),
    ];
    for (what, answer, expected) in cases {
        let (one, fake) = fake_listener(answer);
        let error = TcpTransport::connect_with(one, transport_hello(), config()).unwrap_err();
        assert!(expected(&error), "{what}: {error}");
        fake.join().unwrap();
    }
}

/// A fake rank 0 that drops the first `dropped` connections unanswered
/// and answers the next two (one per channel) as rank 0 would.
fn dropping_listener(dropped: usize) -> (Membership, JoinHandle<Vec<TcpStream>>) {
    let size = 2;
    let mut members = loopback(size);
    let one = members.remove(1);
    let listener: TcpListener = members.remove(0).listener().unwrap().try_clone().unwrap();
    let fake = thread::spawn(move || {
        for _ in 0..dropped {
            drop(listener.accept().unwrap());
        }
        (0..2)
            .map(|_| {
                let (mut stream, _) = listener.accept().unwrap();
                let mut bytes = [0; HELLO_LEN];
                stream.read_exact(&mut bytes).unwrap();
                let theirs = Hello::decode(&bytes).unwrap();
                stream
                    .write_all(&hello(0, size, theirs.channel).encode())
                    .unwrap();
                stream
            })
            .collect()
    });
    (one, fake)
}

#[test]
fn a_dialler_dropped_before_the_answer_dials_again() {
    let (one, fake) = dropping_listener(3);
    let (handle, driver) = TcpTransport::connect_with(one, transport_hello(), config())
        .expect("a later dial gets through");
    let answered = fake.join().unwrap();
    assert_eq!(answered.len(), 2);
    drop((handle, driver));
}

#[test]
fn a_dialler_dropped_every_time_gives_up_at_the_deadline() {
    let size = 2;
    let mut members = loopback(size);
    let one = members.remove(1);
    let listener: TcpListener = members.remove(0).listener().unwrap().try_clone().unwrap();
    listener.set_nonblocking(true).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fake = {
        let done = std::sync::Arc::clone(&done);
        thread::spawn(move || {
            let mut dropped = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        dropped += 1;
                        drop(stream);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(1)),
                }
            }
            dropped
        })
    };
    let config = config().with_setup_timeout(Duration::from_millis(300));
    let error = TcpTransport::connect_with(one, transport_hello(), config).unwrap_err();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let dropped = fake.join().unwrap();
    assert!(
        matches!(error, TcpError::HandshakeClosed { peer: Some(_), .. }),
        "{error}"
    );
    assert!(dropped > 1, "the dialler dialled again ({dropped} dials)");
}

#[test]
fn a_dialler_gives_up_on_a_silent_listener_at_the_deadline() {
    let (one, fake) = fake_listener(|_, _| {});
    let config = config().with_setup_timeout(Duration::from_millis(300));
    let error = TcpTransport::connect_with(one, transport_hello(), config).unwrap_err();
    assert!(
        matches!(error, TcpError::HelloTimeout { peer: Some(_), .. }),
        "{error}"
    );
    fake.join().unwrap();
}

#[test]
fn a_dialler_refuses_another_rank_answering() {
    // World 3: rank 2 dials rank 0's address, where "rank 1" answers.
    let size = 3;
    let mut members = loopback(size);
    let two = members.remove(2);
    let listener = members.remove(0).listener().unwrap().try_clone().unwrap();
    let fake = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = [0; HELLO_LEN];
        stream.read_exact(&mut bytes).unwrap();
        let theirs = Hello::decode(&bytes).unwrap();
        stream
            .write_all(&hello(1, size, theirs.channel).encode())
            .unwrap();
        let _ = stream.read_to_end(&mut Vec::new());
    });
    let error = TcpTransport::connect_with(two, transport_hello(), config()).unwrap_err();
    assert!(
        matches!(error, TcpError::UnexpectedPeer { expected, found, .. } if expected.get() == 0 && found.get() == 1),
        "{error}"
    );
    fake.join().unwrap();
    drop(members);
}
