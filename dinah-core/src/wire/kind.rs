//! Message kinds and the channels that carry them.

use core::fmt;

/// The two channels (lanes) between a pair of ranks.
///
/// Transports keep them apart so that cancellations are never stuck behind
/// a saturated action lane: TCP opens one connection per channel, MPI uses
/// one tag per channel. Each [`MessageKind`] says which channels may carry
/// it ([`MessageKind::allowed_on`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Channel {
    /// Cancellations (and the transport's hello and goodbye).
    Control,
    /// Requests, results and errors (and the transport's hello and goodbye).
    Action,
}

impl Channel {
    /// Both channels, in index order.
    pub const ALL: [Self; 2] = [Self::Control, Self::Action];

    /// The channel's index: 0 for control, 1 for action. It is also the
    /// channel's byte in the hello record, and suits per-channel arrays.
    pub const fn index(self) -> usize {
        match self {
            Self::Control => 0,
            Self::Action => 1,
        }
    }

    /// The channel with index `index`, if there is one.
    pub const fn from_index(index: usize) -> Option<Self> {
        match index {
            0 => Some(Self::Control),
            1 => Some(Self::Action),
            _ => None,
        }
    }

    /// The lowercase name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Control => "control",
            Self::Action => "action",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a wire record is, from its kind byte (offset 6 of both the frame
/// header and the hello record).
///
/// | kind | code | channels | payload |
/// | --- | --- | --- | --- |
/// | `Request` | 1 | action | any segments (the action input) |
/// | `Result` | 2 | action | any segments (the action output) |
/// | `Error` | 3 | action | exactly one segment: the UTF-8 error text |
/// | `Cancel` | 4 | control | none |
/// | `Hello` | 5 | both, as the hello record only, never inside a frame | none |
/// | `Goodbye` | 6 | both | none |
/// | `Heartbeat` | 7 | control | none |
///
/// Code 0 and codes above 7 are rejected by every decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum MessageKind {
    /// Run an action: the caller's request, with its input segments.
    Request,
    /// An action's output, sent back to the caller.
    Result,
    /// An action failed, or could not run; carries an
    /// [`ErrorCode`](super::ErrorCode) and a text.
    Error,
    /// Best-effort cancellation of a request the sender issued earlier.
    Cancel,
    /// The transport's handshake record ([`Hello`](super::Hello)),
    /// exchanged once per channel before any frame.
    Hello,
    /// The transport's last frame on a channel: "I sent you this many
    /// frames here and will send no more".
    Goodbye,
    /// The transport's sign of life: "I am still here". Sent on the
    /// control channel when the sender has a peer to keep informed, it
    /// carries nothing, and transports count it in no frame total.
    Heartbeat,
}

impl MessageKind {
    /// Every kind, in code order.
    pub const ALL: [Self; 7] = [
        Self::Request,
        Self::Result,
        Self::Error,
        Self::Cancel,
        Self::Hello,
        Self::Goodbye,
        Self::Heartbeat,
    ];

    /// The kind's byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Request => 1,
            Self::Result => 2,
            Self::Error => 3,
            Self::Cancel => 4,
            Self::Hello => 5,
            Self::Goodbye => 6,
            Self::Heartbeat => 7,
        }
    }

    /// The kind with wire byte `code`, if there is one.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Request),
            2 => Some(Self::Result),
            3 => Some(Self::Error),
            4 => Some(Self::Cancel),
            5 => Some(Self::Hello),
            6 => Some(Self::Goodbye),
            7 => Some(Self::Heartbeat),
            _ => None,
        }
    }

    /// May a record of this kind arrive on `channel`?
    ///
    /// Request, result and error travel on the action channel, cancel and
    /// heartbeat on the control channel; hello and goodbye belong to the
    /// transport and are allowed on both.
    pub const fn allowed_on(self, channel: Channel) -> bool {
        match self {
            Self::Request | Self::Result | Self::Error => matches!(channel, Channel::Action),
            Self::Cancel | Self::Heartbeat => matches!(channel, Channel::Control),
            Self::Hello | Self::Goodbye => true,
        }
    }

    /// The channel a runtime sends this kind on, or `None` for the
    /// transport's kinds (hello and goodbye), which go on every channel.
    pub const fn channel(self) -> Option<Channel> {
        match self {
            Self::Request | Self::Result | Self::Error => Some(Channel::Action),
            Self::Cancel | Self::Heartbeat => Some(Channel::Control),
            Self::Hello | Self::Goodbye => None,
        }
    }

    /// May a frame of this kind carry payload segments? (Error frames
    /// carry exactly one: their text.)
    pub const fn has_payload(self) -> bool {
        matches!(self, Self::Request | Self::Result | Self::Error)
    }

    /// The lowercase name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Result => "result",
            Self::Error => "error",
            Self::Cancel => "cancel",
            Self::Hello => "hello",
            Self::Goodbye => "goodbye",
            Self::Heartbeat => "heartbeat",
        }
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn codes_round_trip_and_zero_and_high_codes_are_unknown() {
        for kind in MessageKind::ALL {
            assert_eq!(MessageKind::from_code(kind.code()), Some(kind));
        }
        for code in (0..=u8::MAX).filter(|code| !(1..=7).contains(code)) {
            assert_eq!(MessageKind::from_code(code), None, "{code}");
        }
        let codes: std::vec::Vec<u8> = MessageKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes, [1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn channel_table() {
        use Channel::{Action, Control};
        let table = [
            (MessageKind::Request, [false, true]),
            (MessageKind::Result, [false, true]),
            (MessageKind::Error, [false, true]),
            (MessageKind::Cancel, [true, false]),
            (MessageKind::Hello, [true, true]),
            (MessageKind::Goodbye, [true, true]),
            (MessageKind::Heartbeat, [true, false]),
        ];
        for (kind, [control, action]) in table {
            assert_eq!(kind.allowed_on(Control), control, "{kind}");
            assert_eq!(kind.allowed_on(Action), action, "{kind}");
            if let Some(channel) = kind.channel() {
                assert!(kind.allowed_on(channel));
            }
        }
        assert_eq!(MessageKind::Cancel.channel(), Some(Control));
        assert_eq!(MessageKind::Goodbye.channel(), None);
    }

    #[test]
    fn channel_indices_and_names() {
        for channel in Channel::ALL {
            assert_eq!(Channel::from_index(channel.index()), Some(channel));
        }
        assert_eq!(Channel::from_index(2), None);
        assert_eq!(Channel::Control.to_string(), "control");
        assert_eq!(Channel::Action.to_string(), "action");
        assert_eq!(MessageKind::Goodbye.to_string(), "goodbye");
        assert!(MessageKind::Error.has_payload());
        assert!(!MessageKind::Cancel.has_payload());
    }
}
