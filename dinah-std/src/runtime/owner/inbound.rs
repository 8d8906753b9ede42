//! What the transport reports to the owner: frames (decoded and checked
//! here, then handed to the caller's table or the serving side), peers
//! going down, sends that failed.

use dinah_core::wire::{Call, Channel, DecodeContext, ErrorCode, FrameRef, Message, decode_frame};
use dinah_core::{Instant, Rank};

use super::OwnerCounts;
use crate::runtime::Runtime;
use crate::runtime::caller::CallOutcome;
use crate::runtime::error::RuntimeError;
use crate::runtime::frames::decode_received;
use crate::runtime::hub::Hub;
use crate::transport::{Frame, TransportEvent};

impl Runtime {
    /// Handles the events in `self.events`; returns how many there were.
    pub(super) fn handle_events(&mut self, now: Instant) -> usize {
        let mut events = std::mem::take(&mut self.events);
        let count = events.len();
        for event in events.drain(..) {
            self.on_event(event, now);
        }
        self.events = events;
        count
    }

    fn on_event(&mut self, event: TransportEvent, now: Instant) {
        match event {
            TransportEvent::Frame {
                from,
                channel,
                frame,
            } => self.on_frame(from, channel, frame, now),
            TransportEvent::PeerDown { peer, error } => {
                let failure = RuntimeError::Transport { peer, error };
                let failed = self.hub.calls.fail_peer(peer, &failure);
                self.counts.failed_calls(failed);
                self.server.on_peer_down(&self.hub, peer);
                // A barrier waiting for that peer fails now, not at its
                // deadline.
                self.hub.barriers.wake();
                self.hub.collectives.wake();
                if let Some(drained) = self.peers_drained.get_mut(peer.index()) {
                    *drained = true;
                }
            }
            TransportEvent::SendFailed {
                to,
                channel,
                frame,
                error,
            } => {
                let Ok(ctx) =
                    DecodeContext::new(channel, self.hub.rank, self.hub.world, self.hub.protocol)
                else {
                    return;
                };
                if let Ok(decoded) = decode_received(&frame, &ctx) {
                    if let Message::Request { call, .. } = *decoded.header().message() {
                        let failure = RuntimeError::Transport { peer: to, error };
                        let counts = &mut self.counts;
                        let _ = self.hub.calls.complete(call.request, |_| {
                            counts.failed();
                            CallOutcome::Failed(failure)
                        });
                    }
                }
            }
            // Its hello arrived: its window may be larger than assumed.
            TransportEvent::PeerUp { peer } => self.hub.calls.pump_peer(peer),
            TransportEvent::PeerDrained { peer } => {
                if let Some(drained) = self.peers_drained.get_mut(peer.index()) {
                    *drained = true;
                }
            }
        }
    }

    fn on_frame(&mut self, from: Rank, channel: Channel, bytes: Frame, now: Instant) {
        let Self {
            hub,
            server,
            counts,
            contexts,
            ..
        } = self;
        counts.bytes_received(bytes.len() as u64);
        let Some(ctx) = contexts.get(from.index()) else {
            counts.protocol_rejection();
            return;
        };
        let ctx = ctx.with_channel(channel);
        // Matched by reference, so the decoded frame is read where the
        // decoder wrote it instead of being copied out first; a split
        // frame (a large payload) is decoded on a path of its own.
        let (whole, split);
        let header = if bytes.is_split() {
            split = decode_received(&bytes, &ctx);
            match &split {
                Ok(frame) => frame.header(),
                Err(_) => return counts.protocol_rejection(),
            }
        } else {
            whole = decode_frame(bytes.head(), &ctx);
            match &whole {
                Ok(frame) => frame.header(),
                Err(_) => return counts.protocol_rejection(),
            }
        };
        if let Message::Error { call, .. } | Message::Result { call } = header.message() {
            // An answer comes from the rank its request was sent to (the
            // ID names it): anything else would end another rank's call.
            if call.request.sequence(hub.world).0 != from {
                counts.protocol_rejection();
                return;
            }
        }
        match *header.message() {
            Message::Error { call, code } => {
                // Error frames are never split: checked whole above.
                let text = FrameRef::from_decoded(*header, bytes.head())
                    .and_then(|frame| frame.error_text())
                    .unwrap_or("");
                on_error_answer(hub, counts, from, (call, code), text);
            }
            Message::Request { call, deadline } => {
                let until = now
                    .checked_add(deadline.as_duration())
                    .unwrap_or(Instant::MAX);
                let header = *header;
                server.on_request(hub, from, call, until, (header, bytes), now);
            }
            Message::Result { call } => {
                let header = *header;
                let late = hub.calls.complete(call.request, |info| {
                    if info.peer != from || info.call.action != call.action {
                        counts.failed();
                        return CallOutcome::Failed(mismatch(from));
                    }
                    counts.completed();
                    CallOutcome::Frame {
                        header,
                        frame: bytes,
                    }
                });
                if late.is_err() {
                    counts.late_result_discarded();
                }
            }
            Message::Cancel { call } => server.on_cancel(hub, from, call, now),
            // Goodbyes are the transport's; anything else is ignored.
            _ => {}
        }
    }
}

/// Ends the call an error frame from `from` answers, with the error it
/// carries (`code` and `text`), or counts the frame as late if the call
/// ended already.
fn on_error_answer(
    hub: &Hub,
    counts: &mut OwnerCounts,
    from: Rank,
    (call, code): (Call, ErrorCode),
    text: &str,
) {
    let late = hub.calls.complete(call.request, |info| {
        if info.peer != from || info.call.action != call.action {
            counts.failed();
            return CallOutcome::Failed(mismatch(from));
        }
        // The target decided the deadline had passed.
        if code == ErrorCode::DeadlineExceeded {
            counts.deadline_expiry();
        } else {
            counts.failed();
        }
        CallOutcome::Failed(RuntimeError::from_wire(
            code,
            text,
            info.call,
            info.deadline_after,
        ))
    });
    if late.is_err() {
        counts.late_result_discarded();
    }
}

fn mismatch(from: Rank) -> RuntimeError {
    RuntimeError::MismatchedReply { peer: from }
}
