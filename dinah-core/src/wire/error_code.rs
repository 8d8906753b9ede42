//! The typed reason carried by an error message.

use core::fmt;

use crate::LimitField;

/// Why a request failed, as carried by an error message.
///
/// On the wire an error code is two little-endian `u16`s: the code and a
/// detail. Only [`ErrorCode::ResourceExhausted`] uses the detail (it names
/// the bound that was hit); every other code has detail 0, and any other
/// combination is rejected on decode.
///
/// | code | variant | detail |
/// | --- | --- | --- |
/// | 1 | `UnknownAction` | 0 |
/// | 2 | `UnknownDomain` | 0 |
/// | 3 | `UserFailure` | 0 |
/// | 4 | `HandlerPanicked` | 0 |
/// | 5 | `Cancelled` | 0 |
/// | 6 | `DeadlineExceeded` | 0 |
/// | 7 | `ResourceExhausted` | the [`LimitField`] (see [`limit_field_code`]) |
/// | 8 | `DuplicateResultUnavailable` | 0 |
/// | 9 | `ProtocolViolation` | 0 |
/// | 10 | `ShuttingDown` | 0 |
///
/// # Examples
///
/// ```
/// use dinah_core::LimitField;
/// use dinah_core::wire::ErrorCode;
///
/// let code = ErrorCode::ResourceExhausted { limit: LimitField::MaxDedupEntries };
/// assert_eq!(code.to_wire(), (7, 12));
/// assert_eq!(ErrorCode::from_wire(7, 12), Some(code));
/// assert_eq!(ErrorCode::from_wire(3, 1), None);
/// assert_eq!(code.to_string(), "resource exhausted: max_dedup_entries");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The receiver has no action registered under the requested ID.
    UnknownAction,
    /// The receiver has no worker domain with the requested ID.
    UnknownDomain,
    /// The action's handler returned an error.
    UserFailure,
    /// The action's handler panicked; the panic was caught.
    HandlerPanicked,
    /// The request was cancelled before its handler produced a result.
    Cancelled,
    /// The request's deadline passed before it could run or finish.
    DeadlineExceeded,
    /// A bounded resource was full, so the action was not executed.
    ResourceExhausted {
        /// The limit that bounds the full resource.
        limit: LimitField,
    },
    /// A duplicate of a completed request arrived, and its response was not
    /// retained (the result-byte budget was full); the action is never run
    /// a second time.
    DuplicateResultUnavailable,
    /// The receiver found the request malformed or inconsistent.
    ProtocolViolation,
    /// The receiver is shutting down and accepts no new work.
    ShuttingDown,
}

impl ErrorCode {
    /// The wire form: `(code, detail)`.
    pub const fn to_wire(self) -> (u16, u16) {
        match self {
            Self::UnknownAction => (1, 0),
            Self::UnknownDomain => (2, 0),
            Self::UserFailure => (3, 0),
            Self::HandlerPanicked => (4, 0),
            Self::Cancelled => (5, 0),
            Self::DeadlineExceeded => (6, 0),
            Self::ResourceExhausted { limit } => (7, limit_field_code(limit)),
            Self::DuplicateResultUnavailable => (8, 0),
            Self::ProtocolViolation => (9, 0),
            Self::ShuttingDown => (10, 0),
        }
    }

    /// The error code with wire form `(code, detail)`, or `None` if that
    /// pair names none (unknown code, unknown limit, or a non-zero detail
    /// where none is defined).
    pub const fn from_wire(code: u16, detail: u16) -> Option<Self> {
        let plain = match code {
            1 => Self::UnknownAction,
            2 => Self::UnknownDomain,
            3 => Self::UserFailure,
            4 => Self::HandlerPanicked,
            5 => Self::Cancelled,
            6 => Self::DeadlineExceeded,
            7 => {
                return match limit_field_from_code(detail) {
                    Some(limit) => Some(Self::ResourceExhausted { limit }),
                    None => None,
                };
            }
            8 => Self::DuplicateResultUnavailable,
            9 => Self::ProtocolViolation,
            10 => Self::ShuttingDown,
            _ => return None,
        };
        if detail == 0 { Some(plain) } else { None }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownAction => f.write_str("unknown action"),
            Self::UnknownDomain => f.write_str("unknown domain"),
            Self::UserFailure => f.write_str("action failed"),
            Self::HandlerPanicked => f.write_str("action handler panicked"),
            Self::Cancelled => f.write_str("cancelled"),
            Self::DeadlineExceeded => f.write_str("deadline exceeded"),
            Self::ResourceExhausted { limit } => write!(f, "resource exhausted: {limit}"),
            Self::DuplicateResultUnavailable => {
                f.write_str("duplicate request whose result was not retained")
            }
            Self::ProtocolViolation => f.write_str("protocol violation"),
            Self::ShuttingDown => f.write_str("shutting down"),
        }
    }
}

/// The stable wire number of a [`LimitField`], used as the detail of
/// [`ErrorCode::ResourceExhausted`]: 1 to 17 in the order the fields are
/// declared (`max_frame_bytes` = 1, ..., `shutdown_timeout` = 17).
///
/// A new limit gets the next number; renumbering is a protocol version
/// bump.
pub const fn limit_field_code(field: LimitField) -> u16 {
    match field {
        LimitField::MaxFrameBytes => 1,
        LimitField::MaxSegmentBytes => 2,
        LimitField::MaxSegments => 3,
        LimitField::MaxErrorTextBytes => 4,
        LimitField::MaxPendingCalls => 5,
        LimitField::MaxSendTickets => 6,
        LimitField::MaxRetainedBytes => 7,
        LimitField::MaxActionQueue => 8,
        LimitField::WorkersPerDomain => 9,
        LimitField::MaxDomains => 10,
        LimitField::MaxCancellations => 11,
        LimitField::MaxDedupEntries => 12,
        LimitField::MaxDedupBytes => 13,
        LimitField::MaxProgressEvents => 14,
        LimitField::DefaultDeadline => 15,
        LimitField::DedupTtl => 16,
        LimitField::ShutdownTimeout => 17,
    }
}

/// The [`LimitField`] with wire number `code` (see [`limit_field_code`]).
pub const fn limit_field_from_code(code: u16) -> Option<LimitField> {
    Some(match code {
        1 => LimitField::MaxFrameBytes,
        2 => LimitField::MaxSegmentBytes,
        3 => LimitField::MaxSegments,
        4 => LimitField::MaxErrorTextBytes,
        5 => LimitField::MaxPendingCalls,
        6 => LimitField::MaxSendTickets,
        7 => LimitField::MaxRetainedBytes,
        8 => LimitField::MaxActionQueue,
        9 => LimitField::WorkersPerDomain,
        10 => LimitField::MaxDomains,
        11 => LimitField::MaxCancellations,
        12 => LimitField::MaxDedupEntries,
        13 => LimitField::MaxDedupBytes,
        14 => LimitField::MaxProgressEvents,
        15 => LimitField::DefaultDeadline,
        16 => LimitField::DedupTtl,
        17 => LimitField::ShutdownTimeout,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;
    use std::vec::Vec;

    fn every_code() -> Vec<ErrorCode> {
        let mut codes = std::vec![
            ErrorCode::UnknownAction,
            ErrorCode::UnknownDomain,
            ErrorCode::UserFailure,
            ErrorCode::HandlerPanicked,
            ErrorCode::Cancelled,
            ErrorCode::DeadlineExceeded,
            ErrorCode::DuplicateResultUnavailable,
            ErrorCode::ProtocolViolation,
            ErrorCode::ShuttingDown,
        ];
        for detail in 1..=17 {
            let limit = limit_field_from_code(detail).unwrap();
            codes.push(ErrorCode::ResourceExhausted { limit });
        }
        codes
    }

    #[test]
    fn every_code_round_trips_and_is_distinct() {
        let codes = every_code();
        for (i, code) in codes.iter().enumerate() {
            let (c, d) = code.to_wire();
            assert_eq!(ErrorCode::from_wire(c, d), Some(*code));
            for other in &codes[i + 1..] {
                assert_ne!(code.to_wire(), other.to_wire());
            }
        }
    }

    #[test]
    fn exhaustive_wire_space_decodes_only_known_pairs() {
        let mut known = 0;
        for code in 0..=12u16 {
            for detail in (0..=20u16).chain([u16::MAX]) {
                if let Some(decoded) = ErrorCode::from_wire(code, detail) {
                    assert_eq!(decoded.to_wire(), (code, detail));
                    known += 1;
                }
            }
        }
        assert_eq!(known, every_code().len());
        assert_eq!(ErrorCode::from_wire(u16::MAX, 0), None);
        assert_eq!(ErrorCode::from_wire(7, 0), None);
        assert_eq!(ErrorCode::from_wire(7, 18), None);
    }

    #[test]
    fn limit_codes_follow_declaration_order() {
        assert_eq!(limit_field_code(LimitField::MaxFrameBytes), 1);
        assert_eq!(limit_field_code(LimitField::ShutdownTimeout), 17);
        for code in 1..=17 {
            assert_eq!(limit_field_code(limit_field_from_code(code).unwrap()), code);
        }
        assert_eq!(limit_field_from_code(0), None);
    }

    #[test]
    fn display_is_lowercase_without_period() {
        for code in every_code() {
            let text = code.to_string();
            assert!(!text.ends_with('.'), "{text}");
            assert_eq!(text, text.to_lowercase(), "{text}");
        }
        assert_eq!(ErrorCode::DeadlineExceeded.to_string(), "deadline exceeded");
    }
}
