//! The driver's work inside one poll: taking frames from the handle,
//! writing them, reading the sockets, keeping peers informed that this
//! rank is alive, and giving up on peers.

use std::net::Shutdown;
use std::time::Instant;

use dinah_core::wire::{Channel, Header, Message};
use dinah_std::transport::{
    DownReason, IoOp, Outgoing, PeerStatus, TransportError, TransportEvent,
};

use super::{PeerState, Stage, TcpDriver};
use crate::channel::down_reason;
use crate::inbound::{End, Inbound};

/// The events of one poll and the budget left.
pub(super) struct Out<'a> {
    pub(super) events: &'a mut Vec<TransportEvent>,
    pub(super) left: usize,
}

impl Out<'_> {
    fn full(&self) -> bool {
        self.left == 0
    }

    fn push(&mut self, event: TransportEvent) {
        self.events.push(event);
        self.left -= 1;
    }
}

impl TcpDriver {
    /// Takes the handle's frames (control lane first) and queues them on
    /// their connections, as far as there is room.
    pub(super) fn take_frames(&mut self) -> bool {
        if self.stash.iter().all(Option::is_none) && !self.handle.has_queued() {
            // Most polls: nothing to take.
            return false;
        }
        let mut progress = false;
        let queue = self.handle.config();
        for lane in Channel::ALL {
            let l = lane.index();
            let limit = match lane {
                Channel::Control => queue.control_queue,
                Channel::Action => queue.action_queue,
            };
            for _ in 0..=limit {
                let Some(outgoing) = self.stash[l]
                    .take()
                    .or_else(|| self.handle.pop_outgoing(lane))
                else {
                    break;
                };
                progress = true;
                if outgoing.to == self.me {
                    if self.loopback[l].len() >= self.config.inbox_frames {
                        self.stash[l] = Some(outgoing);
                        break;
                    }
                    self.handle.complete_send(outgoing.frame.len(), true);
                    self.loopback[l].push_back(outgoing.frame);
                    continue;
                }
                let Some(index) = self.peer_index(outgoing.to) else {
                    let error = TransportError::PeerDown {
                        peer: outgoing.to,
                        reason: DownReason::LocalClose,
                    };
                    self.fail_send(outgoing, lane, error);
                    continue;
                };
                let peer = &mut self.peers[index];
                if peer.state == PeerState::Down {
                    let reason = self
                        .handle
                        .down_reason(peer.rank)
                        .unwrap_or(DownReason::LocalClose);
                    let error = TransportError::PeerDown {
                        peer: peer.rank,
                        reason,
                    };
                    self.fail_send(outgoing, lane, error);
                    continue;
                }
                let conn = &mut peer.lanes[l];
                let (frames, bytes) = (
                    self.config.write_queue_frames,
                    self.config.write_queue_bytes,
                );
                if !conn.outbox.has_room(outgoing.frame.len(), frames, bytes) {
                    self.stash[l] = Some(outgoing);
                    break;
                }
                conn.outbox.push(outgoing.frame, true);
                conn.frames_queued += 1;
            }
        }
        progress
    }

    pub(super) fn fail_send(
        &mut self,
        outgoing: Outgoing,
        channel: Channel,
        error: TransportError,
    ) {
        self.handle.complete_send(outgoing.frame.len(), false);
        self.owed.push_back(TransportEvent::SendFailed {
            to: outgoing.to,
            channel,
            frame: outgoing.frame,
            error,
        });
    }

    /// During a shutdown, once the handle is empty, queues a goodbye on
    /// every connection of every live peer.
    pub(super) fn queue_goodbyes(&mut self) -> bool {
        if self.stage != Stage::Flushing {
            // The usual poll: not shutting down, nothing to count.
            return false;
        }
        let counts = self.handle.counts();
        if counts.queued_control + counts.queued_action > 0
            || self.stash.iter().any(Option::is_some)
        {
            return false;
        }
        self.stage = Stage::GoodbyeQueued;
        trace_event!(
            tracing::Level::INFO,
            rank = self.me.get(),
            peers = self
                .peers
                .iter()
                .filter(|p| p.state != PeerState::Down)
                .count(),
            "dinah-tcp: shutdown: goodbyes queued"
        );
        for peer in self
            .peers
            .iter_mut()
            .filter(|peer| peer.state != PeerState::Down)
        {
            for conn in &mut peer.lanes {
                let header = Header::without_payload(
                    self.me,
                    Message::Goodbye {
                        frames_sent: conn.frames_queued,
                    },
                )
                .expect("a goodbye has no payload");
                conn.outbox.push(header.encode().to_vec(), false);
                conn.goodbye_queued = true;
            }
        }
        true
    }

    /// Writes what the sockets take, control connections first; after a
    /// written goodbye, shuts the write side down.
    pub(super) fn write(&mut self) -> bool {
        let mut progress = false;
        let max = self.config.write_batch_bytes.saturating_mul(4);
        for lane in Channel::ALL {
            for index in 0..self.peers.len() {
                let peer = &mut self.peers[index];
                if peer.state == PeerState::Down {
                    continue;
                }
                let conn = &mut peer.lanes[lane.index()];
                if !conn.outbox.is_empty() {
                    match conn
                        .outbox
                        .flush(conn.registration.stream(), &self.handle, max)
                    {
                        Ok(flushed) => {
                            progress |= flushed.bytes > 0;
                            if let Err(error) = conn.set_blocked(flushed.blocked) {
                                let reason = down_reason(&error);
                                let error =
                                    TransportError::io(Some(peer.rank), IoOp::Configure, error);
                                self.peer_down(index, reason, error);
                                progress = true;
                                continue;
                            }
                        }
                        Err(error) => {
                            let reason = down_reason(&error);
                            let error = TransportError::io(Some(peer.rank), IoOp::Write, error);
                            self.peer_down(index, reason, error);
                            progress = true;
                            continue;
                        }
                    }
                }
                if conn.goodbye_queued && conn.outbox.is_empty() && !conn.write_closed {
                    conn.write_closed = true;
                    // The peer reads to the end of the stream after the
                    // goodbye; a failure here means it is gone already.
                    let _ = conn.registration.stream().shutdown(Shutdown::Write);
                    progress = true;
                }
            }
        }
        progress
    }

    /// Reads the sockets and hands over what they complete, control lane
    /// first. Within a lane the peers take turns, starting from a peer
    /// that rotates every poll; each reads what its socket holds until the
    /// budget is spent (the rest stays buffered for the next poll).
    pub(super) fn receive(&mut self, out: &mut Out<'_>, now: Instant) -> bool {
        let mut progress = false;
        let n = self.peers.len();
        let mut items = std::mem::take(&mut self.items);
        for lane in Channel::ALL {
            let l = lane.index();
            while !out.full() {
                let Some(frame) = self.loopback[l].pop_front() else {
                    break;
                };
                self.record_frame(frame.len());
                out.push(TransportEvent::Frame {
                    from: self.me,
                    channel: lane,
                    frame,
                });
                progress = true;
            }
            if n == 0 {
                continue;
            }
            let start = self.cursor[l];
            self.cursor[l] = next_turn(start, n);
            for index in turn_order(start, n) {
                if out.full() {
                    break;
                }
                if self.peers[index].state == PeerState::Down {
                    continue;
                }
                if self.peers[index].lanes[l].read(out.left, &mut items) {
                    // Anything read is a sign of life.
                    self.liveness.heard(self.peers[index].rank, now);
                    progress = true;
                }
                for item in items.drain(..) {
                    self.accept(index, lane, item, out);
                }
            }
        }
        self.items = items;
        progress
    }

    pub(super) fn record_frame(&mut self, len: usize) {
        self.frames_received += 1;
        self.bytes_received += len as u64;
    }

    /// Acts on one item read off a connection.
    pub(super) fn accept(&mut self, index: usize, lane: Channel, item: Inbound, out: &mut Out<'_>) {
        let peer = &mut self.peers[index];
        let rank = peer.rank;
        match item {
            Inbound::Frame(frame) => {
                self.record_frame(frame.len());
                out.push(TransportEvent::Frame {
                    from: rank,
                    channel: lane,
                    frame,
                });
            }
            Inbound::Heartbeat => {}
            Inbound::Goodbye => {
                // Done sending: no longer watched for silence.
                self.liveness.forget(rank);
                peer.lanes[lane.index()].goodbye_received = true;
                if self.handle.peer_status(rank) == PeerStatus::Up {
                    self.handle.set_peer_status(rank, PeerStatus::Leaving);
                }
                if peer.state == PeerState::Up
                    && peer.lanes.iter().all(|conn| conn.goodbye_received)
                {
                    peer.state = PeerState::Drained;
                    trace_event!(
                        tracing::Level::DEBUG,
                        peer = rank.get(),
                        "dinah-tcp: peer drained"
                    );
                    self.owed
                        .push_back(TransportEvent::PeerDrained { peer: rank });
                }
            }
            Inbound::End(End::Clean) => peer.lanes[lane.index()].ended = true,
            Inbound::End(End::Down { reason, error }) => {
                peer.lanes[lane.index()].ended = true;
                self.peer_down(index, reason, error);
            }
        }
    }

    /// Gives up on a peer: marks it down on the handle, closes both its
    /// connections, hands its unwritten frames back as `SendFailed`, and
    /// reports `PeerDown` (unless it had drained: then it simply left).
    pub(super) fn peer_down(&mut self, index: usize, reason: DownReason, error: TransportError) {
        let peer = &mut self.peers[index];
        if peer.state == PeerState::Down {
            return;
        }
        let drained = peer.state == PeerState::Drained;
        peer.state = PeerState::Down;
        let rank = peer.rank;
        trace_event!(
            tracing::Level::WARN,
            rank = self.me.get(),
            peer = rank.get(),
            reason = %reason,
            drained,
            "dinah-tcp: peer down"
        );
        self.liveness.forget(rank);
        self.handle.mark_down(rank, reason);
        for conn in &mut peer.lanes {
            conn.abort();
            for pending in conn.outbox.take_all() {
                if pending.from_handle {
                    self.handle.complete_send(pending.frame.len(), false);
                    self.owed.push_back(TransportEvent::SendFailed {
                        to: rank,
                        channel: conn.channel,
                        frame: pending.frame,
                        error: TransportError::PeerDown { peer: rank, reason },
                    });
                }
            }
        }
        if !drained {
            self.owed
                .push_back(TransportEvent::PeerDown { peer: rank, error });
        }
    }

    /// When a liveness check is due: gives up on the peers heard from for
    /// none of the timeout (`PeerDown` with [`DownReason::Silent`]), and
    /// queues a heartbeat on the control connection of every other peer
    /// this rank still writes to. Returns whether it queued or changed
    /// anything.
    pub(super) fn keep_alive(&mut self, now: Instant) -> bool {
        let mut silent = std::mem::take(&mut self.silent);
        // `false` and nobody silent unless a check was due.
        let beat = self.liveness.check(now, &mut silent);
        for rank in silent.drain(..) {
            trace_event!(
                tracing::Level::WARN,
                rank = self.me.get(),
                peer = rank.get(),
                "dinah-tcp: liveness: nothing from the peer for the whole timeout"
            );
            if let Some(index) = self.peer_index(rank) {
                let reason = DownReason::Silent;
                self.peer_down(
                    index,
                    reason,
                    TransportError::PeerDown { peer: rank, reason },
                );
            }
        }
        self.silent = silent;
        if beat {
            let heartbeat = Header::without_payload(self.me, Message::Heartbeat)
                .expect("a heartbeat has no payload")
                .encode();
            for peer in self
                .peers
                .iter_mut()
                .filter(|peer| peer.state != PeerState::Down)
            {
                let conn = &mut peer.lanes[Channel::Control.index()];
                if conn.goodbye_queued {
                    // Nothing follows a goodbye.
                    continue;
                }
                conn.outbox.push(heartbeat.to_vec(), false);
                // Counted like any frame: the goodbye announces them all.
                conn.frames_queued += 1;
            }
        }
        beat
    }

    pub(super) fn emit_owed(&mut self, out: &mut Out<'_>) -> bool {
        let mut progress = false;
        while !out.full() {
            let Some(event) = self.owed.pop_front() else {
                break;
            };
            out.push(event);
            progress = true;
        }
        progress
    }
}

/// The peers' indices in the order a poll reads them when the turn is
/// `start`'s (below `n`): from `start` to the last, then from the first.
fn turn_order(start: usize, n: usize) -> impl Iterator<Item = usize> {
    (start..n).chain(0..start)
}

/// The turn after `start`'s among `n` peers. A comparison rather than a
/// remainder: that is a division, and every poll pays it.
fn next_turn(start: usize, n: usize) -> usize {
    if start + 1 < n { start + 1 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::{next_turn, turn_order};

    #[test]
    fn every_poll_reads_each_peer_once_and_the_first_turn_moves_round() {
        for n in 1..8 {
            let mut start = 0;
            let mut firsts = Vec::new();
            for _ in 0..n {
                let order: Vec<usize> = turn_order(start, n).collect();
                assert_eq!(order.first(), Some(&start));
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{order:?}");
                firsts.push(start);
                start = next_turn(start, n);
            }
            assert_eq!(firsts, (0..n).collect::<Vec<_>>());
            assert_eq!(start, 0, "back to the first peer after {n} polls");
        }
    }
}
