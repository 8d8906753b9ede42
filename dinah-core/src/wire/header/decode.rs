//! Decoding a header: every check a receiver makes of a header's
//! [`HEADER_LEN`] bytes, in the order [`Header::decode`] documents.

use super::super::shape::check_shape;
use super::super::{
    Call, DecodeContext, ErrorCode, HEADER_LEN, HeaderField, MAGIC, Message, MessageKind,
    PROTOCOL_VERSION, ProtocolError, RelativeDeadline, TailWidth, TraceId, get,
};
use super::{Header, at, tail_width_allowed};
use crate::{ActionId, DomainId, IdKind, RequestId};

impl Header {
    /// Decodes and validates a header of exactly [`HEADER_LEN`] bytes that
    /// arrived as described by `ctx`.
    ///
    /// Checks, in this order (the first failure is returned): the length;
    /// magic; version; kind (a hello record is not a frame); reserved bytes;
    /// the tail width byte names a width; the kind against `ctx`'s channel; the origin against the world and
    /// then against `ctx`'s source; the kind-specific fields in byte order
    /// (error code, request, action, domain, deadline, trace, frames sent:
    /// required ones non-zero, unused ones zero); the payload shape against
    /// the kind and `ctx`'s limits; the tail width against the kind and
    /// segment count. The segment lengths follow the header
    /// and are checked by the frame decoders.
    ///
    /// Decoding is canonical: a header decodes only from the bytes
    /// [`Header::encode`] produces for it.
    ///
    /// # Errors
    ///
    /// The first rule broken, as a [`ProtocolError`]:
    /// [`ShortHeader`](ProtocolError::ShortHeader),
    /// [`LongHeader`](ProtocolError::LongHeader),
    /// [`BadMagic`](ProtocolError::BadMagic),
    /// [`UnsupportedVersion`](ProtocolError::UnsupportedVersion),
    /// [`UnknownKind`](ProtocolError::UnknownKind),
    /// [`UnexpectedHello`](ProtocolError::UnexpectedHello),
    /// [`ReservedNotZero`](ProtocolError::ReservedNotZero),
    /// [`InvalidTailWidth`](ProtocolError::InvalidTailWidth),
    /// [`ChannelMismatch`](ProtocolError::ChannelMismatch),
    /// [`OriginOutOfWorld`](ProtocolError::OriginOutOfWorld),
    /// [`OriginMismatch`](ProtocolError::OriginMismatch),
    /// [`ZeroId`](ProtocolError::ZeroId),
    /// [`ZeroDeadline`](ProtocolError::ZeroDeadline),
    /// [`UnexpectedField`](ProtocolError::UnexpectedField),
    /// [`UnknownErrorCode`](ProtocolError::UnknownErrorCode),
    /// [`UnexpectedPayload`](ProtocolError::UnexpectedPayload),
    /// [`ErrorSegmentCount`](ProtocolError::ErrorSegmentCount),
    /// [`TooManySegments`](ProtocolError::TooManySegments),
    /// [`ErrorTextTooLong`](ProtocolError::ErrorTextTooLong),
    /// [`FrameTooLarge`](ProtocolError::FrameTooLarge) or
    /// [`LengthMismatch`](ProtocolError::LengthMismatch) (segments declared
    /// with no payload bytes, or payload bytes with no segments).
    pub fn decode(bytes: &[u8], ctx: &DecodeContext) -> Result<Self, ProtocolError> {
        match bytes.try_into() {
            Ok(array) => Self::decode_array(array, ctx),
            Err(_) if bytes.len() < HEADER_LEN => {
                Err(ProtocolError::ShortHeader { len: bytes.len() })
            }
            Err(_) => Err(ProtocolError::LongHeader { len: bytes.len() }),
        }
    }

    /// [`Header::decode`] for a buffer already known to be a header long.
    ///
    /// # Errors
    ///
    /// As [`Header::decode`], without the length errors.
    #[inline]
    pub fn decode_array(b: &[u8; HEADER_LEN], ctx: &DecodeContext) -> Result<Self, ProtocolError> {
        // Magic and version in one comparison; the slow path says which.
        if u64::from_le_bytes(get(b, at::MAGIC)) & PREFIX_MASK != PREFIX {
            return Err(prefix_error(b));
        }
        let kind = match MessageKind::from_code(b[at::KIND]) {
            Some(MessageKind::Hello) => return Err(ProtocolError::UnexpectedHello),
            Some(kind) => kind,
            None => return Err(ProtocolError::UnknownKind { code: b[at::KIND] }),
        };
        if b[at::RESERVED_B] | b[at::RESERVED_B + 1] != 0 {
            return Err(ProtocolError::ReservedNotZero);
        }
        let width_code = b[at::TAIL_WIDTH];
        let Some(tail_width) = TailWidth::from_log2(width_code) else {
            return Err(ProtocolError::InvalidTailWidth { code: width_code });
        };
        if !kind.allowed_on(ctx.channel()) {
            return Err(ProtocolError::ChannelMismatch {
                kind,
                channel: ctx.channel(),
            });
        }
        // The source is in the world, so matching it proves both checks.
        let origin = u32::from_le_bytes(get(b, at::ORIGIN));
        if origin != ctx.source().get() {
            return Err(origin_error(origin, ctx));
        }
        let origin = ctx.source();
        let message = decode_message(b, kind)?;
        let payload_len = u32::from_le_bytes(get(b, at::PAYLOAD_LEN));
        let segment_count = u16::from_le_bytes(get(b, at::SEGMENTS));
        check_shape(kind, segment_count, payload_len, ctx.limits())?;
        if !tail_width_allowed(kind, segment_count, tail_width) {
            return Err(ProtocolError::InvalidTailWidth { code: width_code });
        }
        Ok(Self {
            origin,
            message,
            segment_count,
            payload_len,
            tail_width,
        })
    }
}

/// Bytes 0..6 (magic and version) of every header, as the low 48 bits of
/// a little-endian `u64`.
const PREFIX: u64 = u32::from_le_bytes(MAGIC) as u64 | (PROTOCOL_VERSION as u64) << 32;
const PREFIX_MASK: u64 = (1 << 48) - 1;

#[cold]
fn prefix_error(b: &[u8; HEADER_LEN]) -> ProtocolError {
    let magic: [u8; 4] = get(b, at::MAGIC);
    if magic == MAGIC {
        ProtocolError::UnsupportedVersion {
            found: u16::from_le_bytes(get(b, at::VERSION)),
        }
    } else {
        ProtocolError::BadMagic { found: magic }
    }
}

#[cold]
fn origin_error(origin: u32, ctx: &DecodeContext) -> ProtocolError {
    match ctx.world().rank(origin) {
        Ok(origin) => ProtocolError::OriginMismatch {
            origin,
            source: ctx.source(),
        },
        Err(_) => ProtocolError::OriginOutOfWorld {
            origin,
            world_size: ctx.world().get(),
        },
    }
}

/// The kind-specific fields of a header, read but not yet checked.
struct Fields {
    code: u16,
    detail: u16,
    request: u64,
    action: u128,
    domain: u64,
    deadline: u64,
    trace: u64,
    frames_sent: u64,
    kind: MessageKind,
}

impl Fields {
    fn read(b: &[u8; HEADER_LEN], kind: MessageKind) -> Self {
        Self {
            code: u16::from_le_bytes(get(b, at::ERROR_CODE)),
            detail: u16::from_le_bytes(get(b, at::ERROR_DETAIL)),
            request: u64::from_le_bytes(get(b, at::REQUEST)),
            action: u128::from_le_bytes(get(b, at::ACTION)),
            domain: u64::from_le_bytes(get(b, at::DOMAIN)),
            deadline: u64::from_le_bytes(get(b, at::DEADLINE)),
            trace: u64::from_le_bytes(get(b, at::TRACE)),
            frames_sent: u64::from_le_bytes(get(b, at::FRAMES_SENT)),
            kind,
        }
    }

    fn zero(&self, set: bool, field: HeaderField) -> Result<(), ProtocolError> {
        if set {
            Err(ProtocolError::UnexpectedField {
                kind: self.kind,
                field,
            })
        } else {
            Ok(())
        }
    }

    /// Request, action and domain, each required; the optional trace.
    fn call(&self) -> Result<Call, ProtocolError> {
        let zero = |id| ProtocolError::ZeroId {
            kind: self.kind,
            id,
        };
        Ok(Call {
            request: RequestId::new(self.request).map_err(|_| zero(IdKind::Request))?,
            action: ActionId::new(self.action).map_err(|_| zero(IdKind::Action))?,
            domain: DomainId::new(self.domain).map_err(|_| zero(IdKind::Domain))?,
            trace: TraceId::new(self.trace),
        })
    }

    fn no_deadline(&self) -> Result<(), ProtocolError> {
        self.zero(self.deadline != 0, HeaderField::Deadline)
    }

    fn no_error_code(&self) -> Result<(), ProtocolError> {
        self.zero(self.code != 0 || self.detail != 0, HeaderField::ErrorCode)
    }

    fn no_frames_sent(&self) -> Result<(), ProtocolError> {
        self.zero(self.frames_sent != 0, HeaderField::FramesSent)
    }

    /// A transport frame (goodbye, heartbeat): no call, deadline, trace or
    /// error code, checked in that order.
    fn no_call(&self) -> Result<(), ProtocolError> {
        self.zero(self.request != 0, HeaderField::Request)?;
        self.zero(self.action != 0, HeaderField::Action)?;
        self.zero(self.domain != 0, HeaderField::Domain)?;
        self.no_deadline()?;
        self.zero(self.trace != 0, HeaderField::Trace)?;
        self.no_error_code()
    }
}

/// The kind-specific fields, checked in this order: request, action,
/// domain, deadline, trace, error code, frames sent.
#[inline(always)]
pub(super) fn decode_message(
    b: &[u8; HEADER_LEN],
    kind: MessageKind,
) -> Result<Message, ProtocolError> {
    let f = Fields::read(b, kind);
    match kind {
        MessageKind::Request => {
            let call = f.call()?;
            let Some(deadline) = RelativeDeadline::from_nanos(f.deadline) else {
                return Err(ProtocolError::ZeroDeadline);
            };
            f.no_error_code()?;
            f.no_frames_sent()?;
            Ok(Message::Request { call, deadline })
        }
        MessageKind::Result | MessageKind::Cancel => {
            let call = f.call()?;
            f.no_deadline()?;
            f.no_error_code()?;
            f.no_frames_sent()?;
            Ok(if kind == MessageKind::Result {
                Message::Result { call }
            } else {
                Message::Cancel { call }
            })
        }
        MessageKind::Error => {
            let call = f.call()?;
            f.no_deadline()?;
            let Some(code) = ErrorCode::from_wire(f.code, f.detail) else {
                return Err(ProtocolError::UnknownErrorCode {
                    code: f.code,
                    detail: f.detail,
                });
            };
            f.no_frames_sent()?;
            Ok(Message::Error { call, code })
        }
        MessageKind::Goodbye => {
            f.no_call()?;
            Ok(Message::Goodbye {
                frames_sent: f.frames_sent,
            })
        }
        MessageKind::Heartbeat => {
            f.no_call()?;
            f.no_frames_sent()?;
            Ok(Message::Heartbeat)
        }
        // Rejected before the fields are read; kept total for safety.
        MessageKind::Hello => Err(ProtocolError::UnexpectedHello),
    }
}
