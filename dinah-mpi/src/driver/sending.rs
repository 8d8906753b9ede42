//! The sending half of a poll: frames from the handle posted as immediate
//! sends (small ones batched per peer), goodbyes, heartbeats.

use std::time::Instant;

use dinah_core::Rank;
use dinah_core::wire::Channel;
use dinah_std::transport::{
    DownReason, Outgoing, PeerStatus, Tail, TransportError, TransportEvent,
};

use super::{ERR_COUNT, MpiDriver, Out, Phase};
use crate::coalesce::Batch;
use crate::comm::PrivateComm;
use crate::farewell;
use crate::large;
use crate::send::{SendKind, Sends};
use crate::tags::Stream;

/// Posts the frames of `batch` to `to` as one message on `stream`; a
/// message too large for a posted receive goes on the lane's large tag,
/// announced on `stream` (see `large.rs`).
fn post_batch(
    sends: &mut Sends,
    comm: &PrivateComm,
    to: Rank,
    stream: Stream,
    channel: Channel,
    batch: Batch,
) {
    let kind = SendKind::Frames {
        channel,
        frames: batch.frames,
        bytes: batch.frame_bytes,
    };
    if batch.is_split() {
        // A frame held in parts: announced with its head's length and its
        // parts' places, lengths and widths, then its head and each part
        // on the large tag, each from its own buffer. The last send
        // completes the frame on the handle.
        let Batch {
            bytes,
            middle,
            tail,
            ..
        } = batch;
        let has_tail = !tail.is_empty();
        let tail = has_tail.then_some((bytes.len(), tail));
        let parts: Vec<(usize, Tail)> = middle.into_iter().chain(tail).collect();
        let places = parts
            .iter()
            .map(|(at, part)| (*at, part.len(), part.width()));
        let announcement = large::parts_announcement(bytes.len(), places, has_tail);
        sends.post(comm.get(), to, stream, announcement, SendKind::Internal);
        let head = SendKind::Frames {
            channel,
            frames: 0,
            bytes: 0,
        };
        sends.post(comm.get(), to, stream.large(), bytes, head);
        let last = parts.len() - 1;
        for (i, (_, part)) in parts.into_iter().enumerate() {
            let part_kind = if i == last { kind } else { head };
            sends.post(comm.get(), to, stream.large(), part, part_kind);
        }
        return;
    }
    let stream = if large::is_large(&batch.bytes) {
        let announcement = large::announcement(batch.bytes.len());
        sends.post(comm.get(), to, stream, announcement, SendKind::Internal);
        stream.large()
    } else {
        stream
    };
    sends.post(comm.get(), to, stream, batch.bytes, kind);
}

impl MpiDriver {
    /// Takes `channel`'s frames from the handle and posts them, while the
    /// lane's in-flight bound and the event budget allow.
    fn post_lane(&mut self, channel: Channel, out: &mut Out<'_>) -> bool {
        let config = self.handle.config();
        let limit = match channel {
            Channel::Control => config.control_queue,
            Channel::Action => config.action_queue,
        };
        let mut progress = false;
        let stream = Stream::of(channel);
        while !out.full() && self.sends.frames(channel) + self.coalescer.frames() < limit {
            let Some(Outgoing { to, frame }) = self.handle.pop_outgoing(channel) else {
                break;
            };
            progress = true;
            let error = if self.handle.peer_status(to) == PeerStatus::Down || self.peers.is_down(to)
            {
                let reason = self
                    .handle
                    .down_reason(to)
                    .unwrap_or(DownReason::LocalClose);
                Some(TransportError::PeerDown { peer: to, reason })
            } else if i32::try_from(frame.len()).is_err() {
                Some(TransportError::Mpi { code: ERR_COUNT })
            } else {
                None
            };
            if let Some(error) = error {
                self.handle.complete_send(frame.len(), false);
                out.push(TransportEvent::SendFailed {
                    to,
                    channel,
                    frame,
                    error,
                });
                continue;
            }
            self.peers.on_sent(to, channel);
            let Self {
                coalescer,
                sends,
                comm,
                buffers,
                ..
            } = self;
            coalescer.push(to, frame, buffers, |to, batch| {
                post_batch(sends, comm, to, stream, channel, batch);
            });
        }
        let Self {
            coalescer,
            sends,
            comm,
            ..
        } = self;
        coalescer.flush(|to, batch| post_batch(sends, comm, to, stream, channel, batch));
        progress
    }

    /// Posts the queued frames of both lanes, control first.
    pub(super) fn post_lanes(&mut self, out: &mut Out<'_>) -> bool {
        let control = self.post_lane(Channel::Control, out);
        self.post_lane(Channel::Action, out) || control
    }

    /// Every peer not down.
    fn live_peers(&self) -> Vec<Rank> {
        self.peers
            .others()
            .filter(|&peer| !self.peers.is_down(peer))
            .collect()
    }

    /// Posts a goodbye on both lanes to every peer not down.
    pub(super) fn post_goodbyes(&mut self) {
        for peer in self.live_peers() {
            for channel in Channel::ALL {
                let bytes = farewell::goodbye(self.me, self.peers.sent(peer, channel));
                self.sends.post(
                    self.comm.get(),
                    peer,
                    Stream::of(channel),
                    bytes,
                    SendKind::Internal,
                );
            }
        }
        self.phase = Phase::GoodbyeSent;
    }

    /// When a liveness check is due: reports the peers heard from for none
    /// of the timeout down, and posts a heartbeat on the control tag to
    /// every other peer (non-blocking sends; none after the goodbyes).
    /// Returns whether it posted or changed anything.
    pub(super) fn keep_alive(&mut self, now: Instant) -> bool {
        let mut silent = std::mem::take(&mut self.silent);
        // `false` and nobody silent unless a check was due.
        let beat = self.liveness.check(now, &mut silent);
        for peer in silent.drain(..) {
            trace_event!(
                tracing::Level::WARN,
                rank = self.me.get(),
                peer = peer.get(),
                "dinah-mpi: liveness: nothing from the peer for the whole timeout"
            );
            self.peers.on_silence(peer);
        }
        self.silent = silent;
        if beat && self.phase != Phase::GoodbyeSent {
            for peer in self.live_peers() {
                // Counted like any frame: the goodbye announces them all.
                self.peers.on_sent(peer, Channel::Control);
                self.sends.post(
                    self.comm.get(),
                    peer,
                    Stream::of(Channel::Control),
                    farewell::heartbeat(self.me),
                    SendKind::Internal,
                );
            }
        }
        beat
    }
}
