//! The hello record: the first thing each side of each channel sends.
//! [`Hello`] documents its layout and the handshake rules.

use core::fmt;

use super::{Channel, MAGIC, MessageKind, PROTOCOL_VERSION, get, put};
use crate::{Fingerprint, LimitField, LimitsError, ProtocolLimits, Rank, WorldSize};

/// The length of a hello record, in bytes.
pub const HELLO_LEN: usize = 72;

mod at {
    pub(super) const MAGIC: usize = 0;
    pub(super) const VERSION: usize = 4;
    pub(super) const KIND: usize = 6;
    pub(super) const CHANNEL: usize = 7;
    pub(super) const RANK: usize = 8;
    pub(super) const WORLD: usize = 12;
    pub(super) const RUN_ID: usize = 16;
    pub(super) const FINGERPRINT: usize = 32;
    pub(super) const MAX_FRAME: usize = 48;
    pub(super) const MAX_SEGMENT: usize = 52;
    pub(super) const MAX_SEGMENTS: usize = 56;
    pub(super) const RESERVED: usize = 58;
    pub(super) const MAX_ERROR_TEXT: usize = 60;
    pub(super) const ADMISSION: usize = 64;
    pub(super) const AUTH: usize = 68;
    pub(super) const RESERVED_TAIL: usize = 69;
}

const _: () = {
    assert!(at::VERSION == at::MAGIC + 4);
    assert!(at::KIND == at::VERSION + 2);
    assert!(at::CHANNEL == at::KIND + 1);
    assert!(at::RANK == at::CHANNEL + 1);
    assert!(at::WORLD == at::RANK + 4);
    assert!(at::RUN_ID == at::WORLD + 4);
    assert!(at::FINGERPRINT == at::RUN_ID + 16);
    assert!(at::MAX_FRAME == at::FINGERPRINT + 16);
    assert!(at::MAX_SEGMENT == at::MAX_FRAME + 4);
    assert!(at::MAX_SEGMENTS == at::MAX_SEGMENT + 4);
    assert!(at::RESERVED == at::MAX_SEGMENTS + 2);
    assert!(at::MAX_ERROR_TEXT == at::RESERVED + 2);
    assert!(at::ADMISSION == at::MAX_ERROR_TEXT + 4);
    assert!(at::AUTH == at::ADMISSION + 4);
    assert!(at::RESERVED_TAIL == at::AUTH + 1);
    assert!(at::RESERVED_TAIL + 3 == HELLO_LEN);
};

/// One side's handshake record for one channel.
///
/// A hello says who the sender is (run, rank, world), what it speaks
/// (protocol version, limits), what it serves (registry fingerprint) and
/// how much work each of its domains admits at once (admission capacity).
/// It is not a frame: the receiver does not know the sender's rank before
/// reading it (a TCP acceptor learns it from the hello), so it has its own
/// fixed [`HELLO_LEN`]-byte layout, decoded without a context. Its first
/// seven bytes match a frame header's (magic, version, kind 5: hello), so
/// a hello where a frame is expected, or a frame where a hello is
/// expected, is rejected precisely.
///
/// | bytes | field | type |
/// | --- | --- | --- |
/// | 0..4 | magic | [`MAGIC`] |
/// | 4..6 | version | `u16` |
/// | 6 | kind | `u8`, always 5 ([`MessageKind::Hello`]) |
/// | 7 | channel | `u8`: 0 control, 1 action ([`Channel::index`]) |
/// | 8..12 | rank | `u32` |
/// | 12..16 | world size | `u32` |
/// | 16..32 | run ID | `u128` |
/// | 32..48 | registry fingerprint | `u128` |
/// | 48..52 | `max_frame_bytes` | `u32` |
/// | 52..56 | `max_segment_bytes` | `u32` |
/// | 56..58 | `max_segments` | `u16` |
/// | 58..60 | reserved | `u16`, 0 |
/// | 60..64 | `max_error_text_bytes` | `u32` |
/// | 64..68 | admission capacity | `u32`, 0: not advertised ([`Hello::admission_capacity`]) |
/// | 68 | authentication | `u8`: 0 none, 1 HMAC-SHA256 ([`HelloAuth`]) |
/// | 69..72 | reserved | 3 bytes, 0 |
///
/// [`check_compatible`] then decides whether the peer may join. It checks
/// one hello against another; that no two connections claim the same
/// remote rank, and that the peer is the rank the transport dialled, are
/// the transport's checks, since only it sees all connections.
///
/// # Examples
///
/// ```
/// use dinah_core::{Fingerprint, ProtocolLimits, WorldSize};
/// use dinah_core::wire::{Channel, Hello, HelloField, check_compatible};
///
/// let world = WorldSize::new(2)?;
/// let fingerprint = Fingerprint::of(&mut [])?;
/// let limits = ProtocolLimits::DEFAULT;
/// let me = Hello::new(0x5eed, world.rank(0)?, world, limits, fingerprint, Channel::Action)?;
/// let peer = Hello::new(0x5eed, world.rank(1)?, world, limits, fingerprint, Channel::Action)?;
///
/// // Over the wire and back.
/// let received = Hello::decode(&peer.encode())?;
/// check_compatible(&me, &received)?;
///
/// // A peer from another run is refused, naming the field.
/// let mut stranger = peer;
/// stranger.run_id = 0xbad;
/// assert_eq!(check_compatible(&me, &stranger).unwrap_err().field, HelloField::RunId);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Hello {
    /// The run both sides must belong to: any value the launcher chooses
    /// for the whole run (a random 128-bit number keeps concurrent runs on
    /// one machine apart).
    pub run_id: u128,
    /// The sender's rank.
    pub rank: Rank,
    /// The sender's world size.
    pub world_size: WorldSize,
    /// The protocol version the sender speaks ([`PROTOCOL_VERSION`] when
    /// built by [`Hello::new`] or decoded).
    pub protocol_version: u16,
    /// The sender's protocol limits (validated when built or decoded).
    pub limits: ProtocolLimits,
    /// The sender's registry fingerprint.
    pub fingerprint: Fingerprint,
    /// The channel this hello opens.
    pub channel: Channel,
    /// How many action jobs each of the sender's worker domains admits at
    /// once, queued or running; 0 = not advertised (a hello not built by a
    /// runtime). Informative: [`check_compatible`] does not compare it, so
    /// ranks may advertise different capacities.
    pub admission_capacity: u32,
    /// How the sender proves that it belongs to the run, after the hello
    /// ([`HelloAuth::None`] when built by [`Hello::new`]). Both sides must
    /// agree ([`HelloField::Authentication`]).
    pub auth: HelloAuth,
}

/// How a hello's sender proves its membership of the run. The proof
/// itself is the transport's (the TCP transport's challenge-response
/// follows the hello); the hello only announces it, so that two sides
/// that disagree name the difference instead of waiting for bytes that
/// never come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HelloAuth {
    /// No proof: anyone who knows the run's hello may join.
    #[default]
    None,
    /// HMAC-SHA256 over both sides' hellos and fresh nonces, with a key
    /// shared by the run's ranks.
    HmacSha256,
}

impl HelloAuth {
    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::HmacSha256 => 1,
        }
    }

    /// The scheme with wire byte `code`, if there is one.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::None),
            1 => Some(Self::HmacSha256),
            _ => None,
        }
    }
}

impl Hello {
    /// A hello for this build's [`PROTOCOL_VERSION`], advertising no
    /// admission capacity (0; see
    /// [`with_admission_capacity`](Self::with_admission_capacity)).
    ///
    /// # Errors
    ///
    /// [`HelloError::RankOutOfRange`] if `rank` is not below `world_size`;
    /// [`HelloError::InvalidLimits`] if `limits` fail validation.
    pub const fn new(
        run_id: u128,
        rank: Rank,
        world_size: WorldSize,
        limits: ProtocolLimits,
        fingerprint: Fingerprint,
        channel: Channel,
    ) -> Result<Self, HelloError> {
        if !world_size.contains(rank) {
            return Err(HelloError::RankOutOfRange {
                rank: rank.get(),
                world_size: world_size.get(),
            });
        }
        if let Err(error) = limits.validate() {
            return Err(HelloError::InvalidLimits(error));
        }
        Ok(Self {
            run_id,
            rank,
            world_size,
            protocol_version: PROTOCOL_VERSION,
            limits,
            fingerprint,
            channel,
            admission_capacity: 0,
            auth: HelloAuth::None,
        })
    }

    /// The same hello for another channel.
    pub const fn with_channel(mut self, channel: Channel) -> Self {
        self.channel = channel;
        self
    }

    /// The same hello advertising `capacity` as the sender's
    /// [`admission_capacity`](Self::admission_capacity) (0: none).
    pub const fn with_admission_capacity(mut self, capacity: u32) -> Self {
        self.admission_capacity = capacity;
        self
    }

    /// The same hello announcing `auth` as the sender's proof of
    /// membership.
    pub const fn with_auth(mut self, auth: HelloAuth) -> Self {
        self.auth = auth;
        self
    }

    /// The record's [`HELLO_LEN`] bytes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0; HELLO_LEN];
        put(&mut out, at::MAGIC, MAGIC);
        put(&mut out, at::VERSION, self.protocol_version.to_le_bytes());
        out[at::KIND] = MessageKind::Hello.code();
        // Channel indices are 0 and 1.
        out[at::CHANNEL] = self.channel.index() as u8;
        put(&mut out, at::RANK, self.rank.get().to_le_bytes());
        put(&mut out, at::WORLD, self.world_size.get().to_le_bytes());
        put(&mut out, at::RUN_ID, self.run_id.to_le_bytes());
        put(
            &mut out,
            at::FINGERPRINT,
            self.fingerprint.get().to_le_bytes(),
        );
        let limits = &self.limits;
        put(
            &mut out,
            at::MAX_FRAME,
            limits.max_frame_bytes.to_le_bytes(),
        );
        put(
            &mut out,
            at::MAX_SEGMENT,
            limits.max_segment_bytes.to_le_bytes(),
        );
        put(
            &mut out,
            at::MAX_SEGMENTS,
            limits.max_segments.to_le_bytes(),
        );
        put(
            &mut out,
            at::MAX_ERROR_TEXT,
            limits.max_error_text_bytes.to_le_bytes(),
        );
        put(
            &mut out,
            at::ADMISSION,
            self.admission_capacity.to_le_bytes(),
        );
        out[at::AUTH] = self.auth.code();
        out
    }

    /// Decodes and validates a hello record of exactly [`HELLO_LEN`] bytes.
    ///
    /// Checks, in order: length, magic, version, kind, channel, reserved
    /// bytes, authentication scheme, world size, rank, limits. Decoding is canonical: only the
    /// bytes [`Hello::encode`] produces decode.
    ///
    /// # Errors
    ///
    /// The first rule broken, as a [`HelloError`].
    pub fn decode(bytes: &[u8]) -> Result<Self, HelloError> {
        let Ok(b) = <&[u8; HELLO_LEN]>::try_from(bytes) else {
            return Err(HelloError::WrongLength { len: bytes.len() });
        };
        let magic: [u8; 4] = get(b, at::MAGIC);
        if magic != MAGIC {
            return Err(HelloError::BadMagic { found: magic });
        }
        let version = u16::from_le_bytes(get(b, at::VERSION));
        if version != PROTOCOL_VERSION {
            return Err(HelloError::UnsupportedVersion { found: version });
        }
        if b[at::KIND] != MessageKind::Hello.code() {
            return Err(HelloError::NotHello { kind: b[at::KIND] });
        }
        let Some(channel) = Channel::from_index(b[at::CHANNEL] as usize) else {
            return Err(HelloError::UnknownChannel {
                code: b[at::CHANNEL],
            });
        };
        if get::<2, HELLO_LEN>(b, at::RESERVED) != [0; 2]
            || get::<3, HELLO_LEN>(b, at::RESERVED_TAIL) != [0; 3]
        {
            return Err(HelloError::ReservedNotZero);
        }
        let Some(auth) = HelloAuth::from_code(b[at::AUTH]) else {
            return Err(HelloError::UnknownAuth { code: b[at::AUTH] });
        };
        let rank = u32::from_le_bytes(get(b, at::RANK));
        let world = u32::from_le_bytes(get(b, at::WORLD));
        let world_size = WorldSize::new(world).map_err(|_| HelloError::EmptyWorld)?;
        let rank = world_size
            .rank(rank)
            .map_err(|_| HelloError::RankOutOfRange {
                rank,
                world_size: world,
            })?;
        let mut limits = ProtocolLimits::DEFAULT;
        limits.max_frame_bytes = u32::from_le_bytes(get(b, at::MAX_FRAME));
        limits.max_segment_bytes = u32::from_le_bytes(get(b, at::MAX_SEGMENT));
        limits.max_segments = u16::from_le_bytes(get(b, at::MAX_SEGMENTS));
        limits.max_error_text_bytes = u32::from_le_bytes(get(b, at::MAX_ERROR_TEXT));
        limits.validate().map_err(HelloError::InvalidLimits)?;
        Ok(Self {
            run_id: u128::from_le_bytes(get(b, at::RUN_ID)),
            rank,
            world_size,
            protocol_version: version,
            limits,
            fingerprint: Fingerprint::from_u128(u128::from_le_bytes(get(b, at::FINGERPRINT))),
            channel,
            admission_capacity: u32::from_le_bytes(get(b, at::ADMISSION)),
            auth,
        })
    }
}

/// A hello record could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HelloError {
    /// Not exactly [`HELLO_LEN`] bytes.
    WrongLength {
        /// The bytes there were.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// A protocol version this build does not speak.
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// The kind byte is not [`MessageKind::Hello`] (a frame arrived before
    /// the handshake finished).
    NotHello {
        /// The kind byte found.
        kind: u8,
    },
    /// The channel byte is neither 0 nor 1.
    UnknownChannel {
        /// The byte found.
        code: u8,
    },
    /// The reserved bytes are not zero.
    ReservedNotZero,
    /// The authentication byte names no scheme this build knows.
    UnknownAuth {
        /// The byte found.
        code: u8,
    },
    /// The world size is zero.
    EmptyWorld,
    /// The rank is not below the world size.
    RankOutOfRange {
        /// The rank found.
        rank: u32,
        /// The world size found.
        world_size: u32,
    },
    /// The limits fail [`ProtocolLimits::validate`].
    InvalidLimits(LimitsError),
}

impl fmt::Display for HelloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::WrongLength { len } => {
                write!(f, "hello record of {len} bytes (expected {HELLO_LEN})")
            }
            Self::BadMagic { found } => write!(
                f,
                "bad hello magic {found:02x?} (expected {MAGIC:02x?}): not a dinah peer"
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "peer speaks protocol version {found}, this build speaks {PROTOCOL_VERSION}"
            ),
            Self::NotHello { kind } => {
                write!(f, "expected a hello record, found a record of kind {kind}")
            }
            Self::UnknownChannel { code } => write!(f, "hello names unknown channel {code}"),
            Self::ReservedNotZero => f.write_str("reserved hello bytes are not zero"),
            Self::UnknownAuth { code } => {
                write!(f, "hello names unknown authentication scheme {code}")
            }
            Self::EmptyWorld => f.write_str("hello announces an empty world"),
            Self::RankOutOfRange { rank, world_size } => write!(
                f,
                "hello rank {rank} is outside its world of {world_size} rank(s)"
            ),
            Self::InvalidLimits(_) => f.write_str("hello carries invalid protocol limits"),
        }
    }
}

impl core::error::Error for HelloError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::InvalidLimits(error) => Some(error),
            _ => None,
        }
    }
}

/// Which part of two hellos disagrees (see [`check_compatible`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HelloField {
    /// The protocol versions differ.
    Version,
    /// The run IDs differ.
    RunId,
    /// The world sizes differ.
    WorldSize,
    /// The remote rank is not in the local world (`local` is the local
    /// world size, `remote` the remote rank).
    RankOutOfRange,
    /// The remote claims the local rank (both values are that rank).
    DuplicateRank,
    /// The two sides opened different channels (values are
    /// [`Channel::index`]).
    Channel,
    /// A protocol limit differs.
    Limit(LimitField),
    /// The registry fingerprints differ: the two builds registered
    /// different actions, schemas or domains.
    Fingerprint,
    /// One side proves its membership and the other does not, or they use
    /// different schemes (values are [`HelloAuth::code`]).
    Authentication,
}

impl fmt::Display for HelloField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Version => f.write_str("protocol version"),
            Self::RunId => f.write_str("run id"),
            Self::WorldSize => f.write_str("world size"),
            Self::RankOutOfRange => f.write_str("remote rank out of range"),
            Self::DuplicateRank => f.write_str("remote rank equal to the local rank"),
            Self::Channel => f.write_str("channel"),
            Self::Limit(field) => write!(f, "limit `{field}`"),
            Self::Fingerprint => f.write_str("registry fingerprint"),
            Self::Authentication => f.write_str("authentication"),
        }
    }
}

/// Two hellos are incompatible: the field that differs, with both values
/// (every field fits a `u128`; see [`HelloField`] for the rank checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelloMismatch {
    /// What differs.
    pub field: HelloField,
    /// The local value.
    pub local: u128,
    /// The remote value.
    pub remote: u128,
}

impl fmt::Display for HelloMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (field, local, remote) = (self.field, self.local, self.remote);
        match field {
            HelloField::RankOutOfRange => write!(
                f,
                "peer rejected: remote rank {remote} is outside the local world of {local} rank(s)"
            ),
            HelloField::DuplicateRank => {
                write!(f, "peer rejected: remote claims the local rank {local}")
            }
            HelloField::RunId | HelloField::Fingerprint => write!(
                f,
                "peer rejected: {field} differs (local {local:032x}, remote {remote:032x})"
            ),
            HelloField::Authentication => write!(
                f,
                "peer rejected: authentication differs (local {}, remote {})",
                auth_name(local),
                auth_name(remote)
            ),
            _ => write!(
                f,
                "peer rejected: {field} differs (local {local}, remote {remote})"
            ),
        }
    }
}

impl core::error::Error for HelloMismatch {}

/// A scheme's name, from its code as [`HelloMismatch`] carries it.
fn auth_name(code: u128) -> &'static str {
    match u8::try_from(code).ok().and_then(HelloAuth::from_code) {
        Some(HelloAuth::None) => "none",
        Some(HelloAuth::HmacSha256) => "HMAC-SHA256",
        None => "unknown",
    }
}

/// Checks that `remote`'s hello is compatible with `local`'s.
///
/// In order: protocol version, run ID, world size, remote rank in range,
/// remote rank different from the local one, channel, each limit
/// (`max_frame_bytes`, `max_segment_bytes`, `max_segments`,
/// `max_error_text_bytes`), fingerprint, authentication. Limits must be
/// equal, not merely compatible, so both sides enforce exactly the same
/// bounds. The
/// [`admission_capacity`](Hello::admission_capacity) is not compared: each
/// rank advertises its own.
///
/// # Errors
///
/// The first [`HelloMismatch`].
pub fn check_compatible(local: &Hello, remote: &Hello) -> Result<(), HelloMismatch> {
    let check = |field, local: u128, remote: u128| {
        if local == remote {
            Ok(())
        } else {
            Err(HelloMismatch {
                field,
                local,
                remote,
            })
        }
    };
    check(
        HelloField::Version,
        local.protocol_version.into(),
        remote.protocol_version.into(),
    )?;
    check(HelloField::RunId, local.run_id, remote.run_id)?;
    check(
        HelloField::WorldSize,
        local.world_size.get().into(),
        remote.world_size.get().into(),
    )?;
    if !local.world_size.contains(remote.rank) {
        return Err(HelloMismatch {
            field: HelloField::RankOutOfRange,
            local: local.world_size.get().into(),
            remote: remote.rank.get().into(),
        });
    }
    if local.rank == remote.rank {
        return Err(HelloMismatch {
            field: HelloField::DuplicateRank,
            local: local.rank.get().into(),
            remote: remote.rank.get().into(),
        });
    }
    check(
        HelloField::Channel,
        local.channel.index() as u128,
        remote.channel.index() as u128,
    )?;
    let (l, r) = (&local.limits, &remote.limits);
    check(
        HelloField::Limit(LimitField::MaxFrameBytes),
        l.max_frame_bytes.into(),
        r.max_frame_bytes.into(),
    )?;
    check(
        HelloField::Limit(LimitField::MaxSegmentBytes),
        l.max_segment_bytes.into(),
        r.max_segment_bytes.into(),
    )?;
    check(
        HelloField::Limit(LimitField::MaxSegments),
        l.max_segments.into(),
        r.max_segments.into(),
    )?;
    check(
        HelloField::Limit(LimitField::MaxErrorTextBytes),
        l.max_error_text_bytes.into(),
        r.max_error_text_bytes.into(),
    )?;
    check(
        HelloField::Fingerprint,
        local.fingerprint.get(),
        remote.fingerprint.get(),
    )?;
    check(
        HelloField::Authentication,
        local.auth.code().into(),
        remote.auth.code().into(),
    )
}

#[cfg(test)]
mod tests;
