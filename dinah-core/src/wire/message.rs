//! What a frame says: the kind-specific content of a header.

use core::fmt;
use core::num::NonZeroU64;
use core::time::Duration;

use super::{ErrorCode, MessageKind};
use crate::{ActionId, DomainId, RequestId};

/// An optional tracing correlation ID (0 on the wire means "none").
///
/// dinah does not interpret it; it is carried from a request to its result
/// or error and cancellation so that external tracing can join them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TraceId(NonZeroU64);

impl TraceId {
    /// The trace ID `value`, or `None` for zero (which means "no trace").
    pub const fn new(value: u64) -> Option<Self> {
        match NonZeroU64::new(value) {
            Some(value) => Some(Self(value)),
            None => None,
        }
    }

    /// The numeric value (never zero).
    pub const fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace#{:016x}", self.0)
    }
}

/// A request's deadline relative to its arrival, in whole nanoseconds.
///
/// Every request has one (zero is rejected on the wire). It is relative
/// because ranks share no clock: the receiver turns it into an absolute
/// deadline on its own clock when the request arrives, so transit time is
/// not subtracted (the caller's own deadline still bounds the call).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use dinah_core::wire::RelativeDeadline;
///
/// let deadline = RelativeDeadline::from_duration(Duration::from_millis(250)).expect("in range");
/// assert_eq!(deadline.as_nanos(), 250_000_000);
/// assert_eq!(deadline.as_duration(), Duration::from_millis(250));
/// assert_eq!(RelativeDeadline::from_duration(Duration::ZERO), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativeDeadline(NonZeroU64);

impl RelativeDeadline {
    /// The longest deadline the wire can carry (about 584 years).
    pub const MAX: Self = Self(NonZeroU64::MAX);

    /// A deadline of `nanos` nanoseconds, or `None` for zero.
    pub const fn from_nanos(nanos: u64) -> Option<Self> {
        match NonZeroU64::new(nanos) {
            Some(nanos) => Some(Self(nanos)),
            None => None,
        }
    }

    /// A deadline of `duration`, or `None` if it is zero or does not fit
    /// in `u64` nanoseconds. Sub-nanosecond parts do not exist in
    /// [`Duration`], so nothing is rounded.
    pub const fn from_duration(duration: Duration) -> Option<Self> {
        match crate::duration_nanos(duration) {
            Some(nanos) => Self::from_nanos(nanos),
            None => None,
        }
    }

    /// The deadline in nanoseconds (never zero).
    pub const fn as_nanos(self) -> u64 {
        self.0.get()
    }

    /// The deadline as a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0.get())
    }
}

/// The identity of one remote call, shared by every message about it.
///
/// `request` is scoped to the rank that issued the call: in a request or a
/// cancel that is the sender (the header's origin), in a result or an error
/// it is the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call {
    /// The call's ID, unique per issuing rank within a run.
    pub request: RequestId,
    /// The action being called. Echoed in results and errors so the caller
    /// can check them against its pending call.
    pub action: ActionId,
    /// The worker domain the action runs in.
    pub domain: DomainId,
    /// Optional tracing correlation ID, echoed in results and errors.
    pub trace: Option<TraceId>,
}

/// The kind-specific content of a frame header.
///
/// Each variant holds exactly the fields its kind carries, so a value can
/// never hold a zero ID where one is required or a field the kind does not
/// use. The hello record is not a frame and has its own type,
/// [`Hello`](super::Hello).
///
/// | kind | call (request, action, domain) | deadline | trace | error code | frames sent |
/// | --- | --- | --- | --- | --- | --- |
/// | request | required | required | optional | 0 | 0 |
/// | result | required | 0 | optional | 0 | 0 |
/// | error | required | 0 | optional | required | 0 |
/// | cancel | required | 0 | optional | 0 | 0 |
/// | goodbye | 0 | 0 | 0 | 0 | any |
/// | heartbeat | 0 | 0 | 0 | 0 | 0 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Message {
    /// Run `call.action` in `call.domain`; the frame's segments are its
    /// input.
    Request {
        /// The call.
        call: Call,
        /// How long the receiver may work on it.
        deadline: RelativeDeadline,
    },
    /// The call's output; the frame's segments are its encoded value.
    Result {
        /// The call being answered.
        call: Call,
    },
    /// The call failed; the frame's single segment is the error text.
    Error {
        /// The call being answered.
        call: Call,
        /// Why it failed.
        code: ErrorCode,
    },
    /// Best-effort cancellation of a call the sender issued.
    Cancel {
        /// The call to cancel.
        call: Call,
    },
    /// The sender's last frame on this channel.
    Goodbye {
        /// How many frames the sender sent on this channel before this
        /// goodbye (not counting the goodbye itself or the hello record).
        /// The receiver compares it with what it received to know it has
        /// drained the channel.
        frames_sent: u64,
    },
    /// The sender is alive (see [`MessageKind::Heartbeat`]).
    Heartbeat,
}

impl Message {
    /// The message's kind.
    pub const fn kind(&self) -> MessageKind {
        match self {
            Self::Request { .. } => MessageKind::Request,
            Self::Result { .. } => MessageKind::Result,
            Self::Error { .. } => MessageKind::Error,
            Self::Cancel { .. } => MessageKind::Cancel,
            Self::Goodbye { .. } => MessageKind::Goodbye,
            Self::Heartbeat => MessageKind::Heartbeat,
        }
    }

    /// The call this message is about, if it is a runtime message.
    pub const fn call(&self) -> Option<&Call> {
        match self {
            Self::Request { call, .. }
            | Self::Result { call }
            | Self::Error { call, .. }
            | Self::Cancel { call } => Some(call),
            Self::Goodbye { .. } | Self::Heartbeat => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    fn call() -> Call {
        Call {
            request: RequestId::new(1).unwrap(),
            action: ActionId::new(2).unwrap(),
            domain: DomainId::new(3).unwrap(),
            trace: TraceId::new(4),
        }
    }

    #[test]
    fn trace_ids_treat_zero_as_none() {
        assert_eq!(TraceId::new(0), None);
        assert_eq!(TraceId::new(u64::MAX).unwrap().get(), u64::MAX);
        assert_eq!(
            TraceId::new(0xab).unwrap().to_string(),
            "trace#00000000000000ab"
        );
    }

    #[test]
    fn deadlines_reject_zero_and_overflow() {
        assert_eq!(RelativeDeadline::from_nanos(0), None);
        assert_eq!(RelativeDeadline::from_duration(Duration::MAX), None);
        let max = Duration::from_nanos(u64::MAX);
        assert_eq!(
            RelativeDeadline::from_duration(max),
            Some(RelativeDeadline::MAX)
        );
        assert_eq!(RelativeDeadline::MAX.as_duration(), max);
        assert_eq!(RelativeDeadline::from_nanos(1).unwrap().as_nanos(), 1);
    }

    #[test]
    fn kinds_and_calls() {
        let deadline = RelativeDeadline::from_nanos(9).unwrap();
        let cases = [
            (
                Message::Request {
                    call: call(),
                    deadline,
                },
                MessageKind::Request,
            ),
            (Message::Result { call: call() }, MessageKind::Result),
            (
                Message::Error {
                    call: call(),
                    code: ErrorCode::Cancelled,
                },
                MessageKind::Error,
            ),
            (Message::Cancel { call: call() }, MessageKind::Cancel),
        ];
        for (message, kind) in cases {
            assert_eq!(message.kind(), kind);
            assert_eq!(message.call(), Some(&call()));
        }
        let goodbye = Message::Goodbye { frames_sent: 3 };
        assert_eq!(goodbye.kind(), MessageKind::Goodbye);
        assert_eq!(goodbye.call(), None);
    }
}
