//! The messages that end a transport: goodbyes and close markers; and
//! the heartbeats that say it has not ended (see `Liveness` in
//! `dinah-std`).
//!
//! A **goodbye** is a dinah frame ([`Message::Goodbye`]), one per lane and
//! peer, sent after every frame the driver posted to that peer on that
//! lane, announcing how many there were. MPI keeps one lane's messages in
//! order, so the goodbye is matched after them; the count lets the
//! receiver wait for large messages that finish receiving later.
//!
//! A **close marker** is the transport's own 16-byte message on its own
//! tag, sent by a driver that closes without a clean drain (dropped, or
//! its shutdown deadline passed): the sender's session number (so a marker
//! left over from an earlier transport is ignored), then how many of its
//! sends to this peer it abandoned incomplete (frames or goodbyes that
//! will never arrive). A receiver that gets a marker with nothing lost
//! waits for the announced frames and then marks the peer down quietly;
//! one with frames lost reports the peer down at once.

use dinah_core::wire::{
    Channel, DecodeContext, HEADER_LEN, Header, Message, MessageKind, decode_frame, encode_frame,
};
use dinah_core::{ProtocolLimits, Rank, WorldSize};

/// The length of a close marker.
pub(crate) const CLOSE_MARKER_LEN: usize = 16;

/// The encoded goodbye from `me` announcing `frames_sent`.
pub(crate) fn goodbye(me: Rank, frames_sent: u64) -> Vec<u8> {
    let header = Header::without_payload(me, Message::Goodbye { frames_sent })
        .expect("only error messages require a payload");
    let mut bytes = vec![0; HEADER_LEN];
    let no_segments: [&[u8]; 0] = [];
    let len = encode_frame(&header, &no_segments, &mut bytes)
        .expect("a goodbye is exactly one header long");
    bytes.truncate(len);
    bytes
}

/// The announced count if `bytes`, received from `from` on `channel`, is a
/// valid goodbye; `None` for anything else (which the runtime judges).
pub(crate) fn parse_goodbye(
    bytes: &[u8],
    channel: Channel,
    from: Rank,
    world: WorldSize,
    limits: ProtocolLimits,
) -> Option<u64> {
    // Cheap pre-check on the kind byte (offset 6) before a full decode.
    if bytes.len() != HEADER_LEN || bytes[6] != MessageKind::Goodbye.code() {
        return None;
    }
    let ctx = DecodeContext::new(channel, from, world, limits).ok()?;
    match *decode_frame(bytes, &ctx).ok()?.header().message() {
        Message::Goodbye { frames_sent } => Some(frames_sent),
        _ => None,
    }
}

/// The encoded heartbeat from `me`.
pub(crate) fn heartbeat(me: Rank) -> Vec<u8> {
    let header =
        Header::without_payload(me, Message::Heartbeat).expect("a heartbeat has no payload");
    header.encode().to_vec()
}

/// Whether `bytes`, received from `from` on `channel`, is a valid
/// heartbeat (anything else is for the runtime to judge).
pub(crate) fn is_heartbeat(
    bytes: &[u8],
    channel: Channel,
    from: Rank,
    world: WorldSize,
    limits: ProtocolLimits,
) -> bool {
    // Cheap pre-check on the kind byte (offset 6) before a full decode.
    if bytes.len() != HEADER_LEN || bytes[6] != MessageKind::Heartbeat.code() {
        return false;
    }
    DecodeContext::new(channel, from, world, limits)
        .ok()
        .and_then(|ctx| decode_frame(bytes, &ctx).ok())
        .is_some_and(|frame| *frame.header().message() == Message::Heartbeat)
}

/// A close marker for a peer: this transport's `session`, then the number
/// of sends to that peer abandoned incomplete.
pub(crate) fn close_marker(session: u64, lost: u64) -> Vec<u8> {
    let mut bytes = [0u8; CLOSE_MARKER_LEN];
    bytes[..8].copy_from_slice(&session.to_le_bytes());
    bytes[8..].copy_from_slice(&lost.to_le_bytes());
    bytes.to_vec()
}

/// Decodes a close marker: (session, sends lost). `None` if malformed.
pub(crate) fn parse_close_marker(bytes: &[u8]) -> Option<(u64, u64)> {
    let bytes: &[u8; CLOSE_MARKER_LEN] = bytes.try_into().ok()?;
    let (session, lost) = bytes.split_at(8);
    Some((
        u64::from_le_bytes(session.try_into().ok()?),
        u64::from_le_bytes(lost.try_into().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodbyes_round_trip_on_both_lanes() {
        let world = WorldSize::new(2).unwrap();
        let one = world.rank(1).unwrap();
        let bytes = goodbye(one, 42);
        for channel in Channel::ALL {
            assert_eq!(
                parse_goodbye(&bytes, channel, one, world, ProtocolLimits::DEFAULT),
                Some(42)
            );
        }
        // Claimed by another source: not a goodbye (the runtime rejects it).
        assert_eq!(
            parse_goodbye(
                &bytes,
                Channel::Control,
                Rank::ZERO,
                world,
                ProtocolLimits::DEFAULT
            ),
            None
        );
    }

    #[test]
    fn other_frames_and_garbage_are_not_goodbyes() {
        let world = WorldSize::new(2).unwrap();
        let limits = ProtocolLimits::DEFAULT;
        let mut bytes = goodbye(Rank::ZERO, 1);
        assert_eq!(
            parse_goodbye(
                &bytes[..HEADER_LEN - 1],
                Channel::Control,
                Rank::ZERO,
                world,
                limits
            ),
            None
        );
        bytes[6] = MessageKind::Cancel.code();
        assert_eq!(
            parse_goodbye(&bytes, Channel::Control, Rank::ZERO, world, limits),
            None
        );
        let mut corrupt = goodbye(Rank::ZERO, 1);
        corrupt[0] ^= 0xff;
        assert_eq!(
            parse_goodbye(&corrupt, Channel::Control, Rank::ZERO, world, limits),
            None
        );
    }

    #[test]
    fn close_markers_round_trip_and_wrong_lengths_are_refused() {
        let marker = close_marker(7, 3);
        assert_eq!(marker.len(), CLOSE_MARKER_LEN);
        assert_eq!(parse_close_marker(&marker), Some((7, 3)));
        assert_eq!(parse_close_marker(&marker[..15]), None);
        assert_eq!(parse_close_marker(&[]), None);
    }
}
