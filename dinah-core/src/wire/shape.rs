//! The payload-shape rules a header alone can check, shared by the encoder
//! ([`Header::new`](super::Header::new)) and both decoders, so a frame that
//! leaves a rank is checked exactly as its receiver will check it.

use super::{HEADER_LEN, LENGTH_ENTRY_LEN, MessageKind, ProtocolError};
use crate::ProtocolLimits;

/// `HEADER_LEN + 4 * count + payload`, which cannot overflow a `u64`.
pub(crate) const fn frame_len_u64(count: u16, payload: u64) -> u64 {
    HEADER_LEN as u64 + LENGTH_ENTRY_LEN as u64 * count as u64 + payload
}

/// The payload rules a header alone can check, in order: payload allowed
/// for the kind; one segment for an error; segment count; error text
/// length; frame length; segments with no bytes or bytes with no segments.
pub(crate) const fn check_shape(
    kind: MessageKind,
    count: u16,
    payload_len: u32,
    limits: &ProtocolLimits,
) -> Result<(), ProtocolError> {
    if !kind.has_payload() && (count != 0 || payload_len != 0) {
        return Err(ProtocolError::UnexpectedPayload {
            kind,
            segments: count,
            bytes: payload_len,
        });
    }
    if matches!(kind, MessageKind::Error) && count != 1 {
        return Err(ProtocolError::ErrorSegmentCount { count });
    }
    if count > limits.max_segments {
        return Err(ProtocolError::TooManySegments {
            count,
            max: limits.max_segments,
        });
    }
    if matches!(kind, MessageKind::Error) && payload_len > limits.max_error_text_bytes {
        return Err(ProtocolError::ErrorTextTooLong {
            len: payload_len,
            max: limits.max_error_text_bytes,
        });
    }
    let len = frame_len_u64(count, payload_len as u64);
    if len > limits.max_frame_bytes as u64 {
        return Err(ProtocolError::FrameTooLarge {
            len,
            max: limits.max_frame_bytes,
        });
    }
    if count == 0 && payload_len != 0 {
        return Err(ProtocolError::LengthMismatch {
            declared: payload_len,
            sum: 0,
        });
    }
    Ok(())
}

/// One entry of the segment length table against the segment limit.
pub(crate) const fn check_segment_len(
    index: u16,
    len: u32,
    limits: &ProtocolLimits,
) -> Result<(), ProtocolError> {
    if len > limits.max_segment_bytes {
        Err(ProtocolError::SegmentTooLarge {
            index,
            len,
            max: limits.max_segment_bytes,
        })
    } else {
        Ok(())
    }
}
