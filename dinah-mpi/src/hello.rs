//! The bootstrap exchange: every rank sends its hello to every other rank
//! and receives theirs, then judges them all.
//!
//! The message on the hello tag is the [`HELLO_LEN`]-byte [`Hello`] record
//! of `dinah_core::wire` (run ID, rank, world size, protocol version and
//! limits, registry fingerprint, admission capacity) followed by the
//! sender's **session number** (a little-endian `u64`, unique per
//! transport within a process) and the [`FRAMING_VERSION`] of its MPI
//! transport (a little-endian `u32`). Close markers carry the session
//! number too, so a marker left over from an earlier transport on a reused
//! communicator context is recognised and ignored.
//!
//! The protocol version in the record covers the frames; the framing
//! version covers what only this transport puts around them (batches,
//! announcements and the large tags, goodbyes, close markers), so two
//! builds of `dinah-mpi` that would misread each other's messages refuse
//! each other at the hello instead. A build from before the framing
//! version sends the record and the session number only: that hello is
//! read as framing version 1 and refused like any other version.
//!
//! A rank judges only after it has every peer's hello (or the deadline
//! passed), and [`verdict`] looks at all of them, so an incompatibility is
//! seen by every rank: if any two ranks disagree, every rank disagrees
//! with at least one of them. Nothing here blocks: sends and receives are
//! immediate and polled until done or the deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dinah_core::WorldSize;
use dinah_core::wire::{HELLO_LEN, Hello, HelloError, check_compatible};
use dinah_std::transport::TransportHandle;
use mpi::topology::SimpleCommunicator;

use crate::error::MpiError;
use crate::pool::BufferPool;
use crate::receive::{Probe, Receives};
use crate::send::{SendKind, Sends};
use crate::tags::Stream;

/// The version of the MPI transport's own framing (see the module docs).
/// It changes whenever a change to this crate would make two builds
/// misread each other's messages. Version 2 was the one of the posted
/// receives: batches of at most 3,968 bytes on a lane's tag, longer frames
/// announced there and sent on the lane's large tag. Version 3 sends the
/// long messages of a large tag in pieces (`pieces.rs`).
pub(crate) const FRAMING_VERSION: u32 = 3;

/// The length of a hello message: the record, the session number and the
/// framing version.
pub(crate) const HELLO_MESSAGE_LEN: usize = HELLO_LEN + 8 + 4;

/// The length of a hello message of framing version 1, which carried no
/// version: the record and the session number.
const VERSION_1_LEN: usize = HELLO_LEN + 8;

/// Where the session number starts in a hello message.
const SESSION_AT: usize = HELLO_LEN;

/// Where the framing version starts in a hello message.
const FRAMING_AT: usize = HELLO_LEN + 8;

/// Session numbers handed out in this process.
///
/// # Memory ordering
///
/// `Relaxed`: the counter only has to hand out distinct values, which a
/// read-modify-write guarantees under any ordering.
static SESSIONS: AtomicU64 = AtomicU64::new(1);

/// A session number not used by any other transport of this process.
pub(crate) fn next_session() -> u64 {
    SESSIONS.fetch_add(1, Ordering::Relaxed)
}

/// The hello message: `hello`'s record, then `session`, then
/// [`FRAMING_VERSION`].
pub(crate) fn encode(hello: &Hello, session: u64) -> [u8; HELLO_MESSAGE_LEN] {
    encode_with_framing(hello, session, FRAMING_VERSION)
}

/// The hello message of a transport of framing version `framing`.
fn encode_with_framing(hello: &Hello, session: u64, framing: u32) -> [u8; HELLO_MESSAGE_LEN] {
    let mut out = [0; HELLO_MESSAGE_LEN];
    out[..SESSION_AT].copy_from_slice(&hello.encode());
    out[SESSION_AT..FRAMING_AT].copy_from_slice(&session.to_le_bytes());
    out[FRAMING_AT..].copy_from_slice(&framing.to_le_bytes());
    out
}

/// A decoded hello message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// The record.
    pub(crate) hello: Hello,
    /// The sender's session number.
    pub(crate) session: u64,
    /// The sender's framing version.
    pub(crate) framing: u32,
}

/// Decodes a hello message of any framing version (the caller judges
/// it): [`HELLO_MESSAGE_LEN`] bytes, or the shorter message of version 1.
///
/// # Errors
///
/// [`HelloError::WrongLength`] for any other length, or whatever
/// [`Hello::decode`] finds wrong with the record.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, HelloError> {
    let framing = match bytes.len() {
        HELLO_MESSAGE_LEN => {
            let mut framing = [0; 4];
            framing.copy_from_slice(&bytes[FRAMING_AT..]);
            u32::from_le_bytes(framing)
        }
        VERSION_1_LEN => 1,
        len => return Err(HelloError::WrongLength { len }),
    };
    let hello = Hello::decode(&bytes[..SESSION_AT])?;
    let mut session = [0; 8];
    session.copy_from_slice(&bytes[SESSION_AT..FRAMING_AT]);
    Ok(Decoded {
        hello,
        session: u64::from_le_bytes(session),
        framing,
    })
}

/// What arrived from one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Nothing yet.
    Missing,
    /// A valid record and its session number.
    Hello(Hello, u64),
    /// A valid message from a transport of another framing version (the
    /// version it names).
    OtherFraming(u32),
    /// Bytes that are not a hello message.
    Bad(HelloError),
    /// More than one message.
    Duplicate,
}

impl Slot {
    /// The slot of a message that decoded: its hello, if its framing is
    /// this transport's.
    fn of(decoded: Decoded) -> Self {
        if decoded.framing == FRAMING_VERSION {
            Self::Hello(decoded.hello, decoded.session)
        } else {
            Self::OtherFraming(decoded.framing)
        }
    }
}

/// Judges every peer's slot against this rank's hello (`slots` is
/// indexed by rank; this rank's own slot is ignored). The first problem in
/// rank order wins; missing peers are reported only when everything that
/// arrived is compatible.
///
/// # Errors
///
/// [`MpiError::BadHello`], [`MpiError::FramingMismatch`],
/// [`MpiError::DuplicateHello`], [`MpiError::Handshake`],
/// [`MpiError::WrongSender`] or [`MpiError::SetupTimeout`].
pub(crate) fn verdict(
    mine: &Hello,
    world: WorldSize,
    slots: &[Slot],
) -> Result<Vec<u64>, MpiError> {
    let mut missing = 0u32;
    let mut sessions = vec![0; slots.len()];
    for (peer, slot) in world.ranks().zip(slots) {
        if peer == mine.rank {
            continue;
        }
        match *slot {
            Slot::Missing => missing += 1,
            Slot::Bad(error) => return Err(MpiError::BadHello { peer, error }),
            Slot::OtherFraming(theirs) => {
                return Err(MpiError::FramingMismatch {
                    peer,
                    ours: FRAMING_VERSION,
                    theirs,
                });
            }
            Slot::Duplicate => return Err(MpiError::DuplicateHello { peer }),
            Slot::Hello(hello, session) => {
                check_compatible(mine, &hello)
                    .map_err(|mismatch| MpiError::Handshake { peer, mismatch })?;
                if hello.rank != peer {
                    return Err(MpiError::WrongSender {
                        source: peer,
                        claimed: hello.rank,
                    });
                }
                sessions[peer.index()] = session;
            }
        }
    }
    if missing > 0 {
        return Err(MpiError::SetupTimeout {
            missing_peers: missing,
        });
    }
    Ok(sessions)
}

/// The admission capacity each peer's hello advertised, indexed by rank
/// (0 for this rank's own slot, a slot without a valid hello, or a peer
/// that advertised none).
pub(crate) fn admissions(slots: &[Slot]) -> Vec<u32> {
    slots
        .iter()
        .map(|slot| match *slot {
            Slot::Hello(hello, _) => hello.admission_capacity,
            _ => 0,
        })
        .collect()
}

/// What the exchange leaves behind.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The verdict: every peer's session number, or why not.
    pub(crate) result: Result<Vec<u64>, MpiError>,
    /// Every peer's advertised admission capacity ([`admissions`]); only
    /// meaningful when `result` is `Ok`.
    pub(crate) admissions: Vec<u32>,
    /// Hello sends MPI has not completed yet (handed to the driver, or
    /// abandoned on failure).
    pub(crate) sends: Sends,
    /// Whether anything may still arrive on the communicator for this
    /// exchange (a missing peer's hello, a receive in progress).
    pub(crate) unsettled: bool,
}

/// Runs the exchange for `mine` (with this transport's `session`) on
/// `comm` until every peer's hello arrived or `deadline` passed. `handle`
/// is the transport's (the hello sends are internal and never touch it).
pub(crate) fn exchange(
    comm: &SimpleCommunicator,
    mine: &Hello,
    session: u64,
    deadline: Instant,
    handle: &TransportHandle,
) -> Exchange {
    let world = mine.world_size;
    let me = mine.rank;
    let message = encode(mine, session);
    let mut sends = Sends::with_capacity(world.get() as usize);
    // Hellos are far below a batch's size: this pool stays empty.
    let mut pool = BufferPool::new();
    for peer in world.ranks().filter(|&peer| peer != me) {
        sends.post(
            comm,
            peer,
            Stream::Hello,
            message.to_vec(),
            SendKind::Internal,
        );
    }
    let mut slots = vec![Slot::Missing; world.get() as usize];
    let mut receives = Receives::new(world);
    let mut left = world.get() as usize - 1;
    let mut idle = Backoff::default();
    while left > 0 && Instant::now() < deadline {
        let mut progress = false;
        while let Probe::Started { .. } = receives.probe(comm, Stream::Hello, &mut pool) {
            progress = true;
        }
        receives.take_ready(
            Stream::Hello,
            false,
            usize::MAX,
            &mut pool,
            |from, bytes| {
                let slot = &mut slots[from.index()];
                // Probed messages: always whole.
                *slot = match (*slot, decode(bytes.head())) {
                    (Slot::Missing, Ok(decoded)) => Slot::of(decoded),
                    (Slot::Missing, Err(error)) => Slot::Bad(error),
                    _ => Slot::Duplicate,
                };
                left -= usize::from(!matches!(*slot, Slot::Missing | Slot::Duplicate));
                progress = true;
                true
            },
        );
        progress |= sends.complete(handle, &mut pool) > 0;
        idle.pause(progress);
    }
    let result = verdict(mine, world, &slots);
    if result.is_err() {
        // Nobody will take these over: give them until the deadline (small
        // eager sends are usually complete already).
        while !sends.is_empty() && Instant::now() < deadline {
            let done = sends.complete(handle, &mut pool) > 0;
            idle.pause(done);
        }
    }
    Exchange {
        result,
        admissions: admissions(&slots),
        sends,
        unsettled: left > 0 || receives.len() > 0,
    }
}

/// Spins, then yields, then sleeps in growing steps while nothing
/// happens (for a bootstrap that waits on a slow rank).
#[derive(Debug, Default)]
struct Backoff {
    idle: u32,
}

impl Backoff {
    fn pause(&mut self, progress: bool) {
        if progress {
            self.idle = 0;
            return;
        }
        self.idle = self.idle.saturating_add(1);
        match self.idle {
            0..=64 => std::hint::spin_loop(),
            65..=1024 => std::thread::yield_now(),
            n => std::thread::sleep(Duration::from_micros(u64::from((n - 1024).min(20)) * 50)),
        }
    }
}

#[cfg(test)]
mod tests {
    use dinah_core::wire::{Channel, HelloField};
    use dinah_core::{Fingerprint, ProtocolLimits};

    use super::*;

    fn hello(rank: u32, world: u32, fingerprint: u128) -> Hello {
        let world = WorldSize::new(world).unwrap();
        let rank = world.rank(rank).unwrap();
        let fingerprint = Fingerprint::from_u128(fingerprint);
        Hello::new(
            7,
            rank,
            world,
            ProtocolLimits::DEFAULT,
            fingerprint,
            Channel::Control,
        )
        .unwrap()
    }

    #[test]
    fn messages_round_trip_and_wrong_lengths_are_refused() {
        let mine = hello(1, 4, 0xf00d);
        let bytes = encode(&mine, 42);
        assert_eq!(
            decode(&bytes),
            Ok(Decoded {
                hello: mine,
                session: 42,
                framing: FRAMING_VERSION
            })
        );
        assert_eq!(
            decode(&bytes[..HELLO_LEN]),
            Err(HelloError::WrongLength { len: HELLO_LEN })
        );
        // A build from before the framing version: the record and the
        // session number only, read as version 1 and refused.
        let old = decode(&bytes[..HELLO_LEN + 8]).unwrap();
        assert_eq!((old.hello, old.session, old.framing), (mine, 42, 1));
        assert_eq!(Slot::of(old), Slot::OtherFraming(1));
        assert_eq!(
            decode(&bytes[..HELLO_LEN + 9]),
            Err(HelloError::WrongLength { len: HELLO_LEN + 9 })
        );
        let mut corrupt = bytes;
        corrupt[0] ^= 1;
        assert!(matches!(decode(&corrupt), Err(HelloError::BadMagic { .. })));
    }

    #[test]
    fn every_peer_hello_gives_its_admission_capacity() {
        let slots = [
            Slot::Hello(hello(0, 4, 1).with_admission_capacity(7), 10),
            Slot::Missing,
            Slot::Hello(hello(2, 4, 1), 12),
            Slot::Hello(hello(3, 4, 1).with_admission_capacity(9), 13),
        ];
        assert_eq!(admissions(&slots), vec![7, 0, 0, 9]);
        let bytes = encode(&hello(1, 4, 1).with_admission_capacity(5), 1);
        assert_eq!(decode(&bytes).unwrap().hello.admission_capacity, 5);
        let slots = [Slot::Bad(HelloError::EmptyWorld), Slot::Duplicate];
        assert_eq!(admissions(&slots), vec![0, 0]);
    }

    #[test]
    fn compatible_peers_pass_and_give_their_sessions() {
        let world = WorldSize::new(3).unwrap();
        let slots = [
            Slot::Hello(hello(0, 3, 1), 10),
            Slot::Missing,
            Slot::Hello(hello(2, 3, 1), 12),
        ];
        assert_eq!(verdict(&hello(1, 3, 1), world, &slots), Ok(vec![10, 0, 12]));
    }

    #[test]
    fn a_fingerprint_mismatch_is_seen_by_every_rank() {
        // Rank 2 registered other actions.
        let world = WorldSize::new(3).unwrap();
        let fingerprints = [1, 1, 2];
        for me in 0..3u32 {
            let slots: Vec<_> = (0..3u32)
                .map(|peer| Slot::Hello(hello(peer, 3, fingerprints[peer as usize]), 0))
                .collect();
            let error =
                verdict(&hello(me, 3, fingerprints[me as usize]), world, &slots).unwrap_err();
            let MpiError::Handshake { peer, mismatch } = error else {
                panic!("{error:?}")
            };
            assert_eq!(mismatch.field, HelloField::Fingerprint);
            assert_eq!(peer.get(), if me == 2 { 0 } else { 2 });
        }
    }

    #[test]
    fn a_peer_of_another_framing_version_is_refused() {
        // Rank 2 runs a build of the transport with other framing; ranks 0
        // and 1 refuse it (and its build refuses them the same way).
        let world = WorldSize::new(3).unwrap();
        let framings = [FRAMING_VERSION, FRAMING_VERSION, FRAMING_VERSION + 1];
        let messages: Vec<_> = (0..3u32)
            .map(|rank| encode_with_framing(&hello(rank, 3, 1), 0, framings[rank as usize]))
            .collect();
        for me in 0..2u32 {
            let slots: Vec<_> = messages
                .iter()
                .map(|bytes| Slot::of(decode(bytes).unwrap()))
                .collect();
            assert_eq!(
                verdict(&hello(me, 3, 1), world, &slots),
                Err(MpiError::FramingMismatch {
                    peer: world.rank(2).unwrap(),
                    ours: FRAMING_VERSION,
                    theirs: FRAMING_VERSION + 1
                })
            );
        }
    }

    #[test]
    fn problems_are_reported_in_rank_order_before_missing_peers() {
        let world = WorldSize::new(4).unwrap();
        let mine = hello(0, 4, 1);
        let slots = [
            Slot::Missing,
            Slot::Missing,
            Slot::Duplicate,
            Slot::Bad(HelloError::EmptyWorld),
        ];
        assert_eq!(
            verdict(&mine, world, &slots),
            Err(MpiError::DuplicateHello {
                peer: world.rank(2).unwrap()
            })
        );
        let slots = [
            Slot::Missing,
            Slot::Missing,
            Slot::Hello(hello(2, 4, 1), 0),
            Slot::Missing,
        ];
        assert_eq!(
            verdict(&mine, world, &slots),
            Err(MpiError::SetupTimeout { missing_peers: 2 })
        );
        // A hello that claims another (valid) rank than its source.
        let slots = [
            Slot::Missing,
            Slot::Hello(hello(3, 4, 1), 0),
            Slot::Missing,
            Slot::Missing,
        ];
        assert_eq!(
            verdict(&mine, world, &slots),
            Err(MpiError::WrongSender {
                source: world.rank(1).unwrap(),
                claimed: world.rank(3).unwrap()
            })
        );
    }

    #[test]
    fn sessions_are_distinct() {
        let a = next_session();
        let b = next_session();
        assert_ne!(a, b);
    }
}
