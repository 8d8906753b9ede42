//! Respond: every answer to a peer goes out here, once, or waits in a
//! bounded outbox until the transport takes it; and finished requests'
//! responses are kept for their duplicates.
//!
//! # Why the outbox never overflows
//!
//! A response waits only while the transport's action lane is full. The
//! outbox holds `jobs + frames` responses, where `jobs` is the number of
//! action jobs all domains can hold at once and `frames` the most frames
//! one round of progress reads. Every running remote job will add one
//! response and every frame read adds at most one; so the owner reads new
//! frames only while the outbox has room for all of them
//! ([`Respond::room`] with the running jobs counted), and a push can never
//! find the outbox full. When it has no room, the owner stops reading and
//! the transport holds the peers back instead.
//!
//! A waiting response is only ever dropped when nobody can want it: its
//! peer went down, or its caller's deadline passed (the caller's deadline
//! is never later than the one this rank computed when the request
//! arrived, so the caller has already failed the call).

use std::collections::VecDeque;

use dinah_core::wire::Channel;
use dinah_core::{Instant, Rank};

use super::response_buffers::ResponseBuffers;
use crate::runtime::hub::Hub;
use crate::transport::{Frame, SendErrorKind};

/// A response waiting for room in the transport.
#[derive(Debug)]
struct Waiting {
    to: Rank,
    frame: Frame,
    /// When its caller stops waiting, on this rank's clock.
    until: Instant,
}

/// Counts of the responding side since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RespondCounts {
    /// Bytes of responses handed to the transport (not yet published to
    /// the metrics; see [`Respond::take_bytes_sent`]).
    bytes_sent: u64,
    /// Waiting responses dropped because their caller's deadline passed.
    pub(crate) expired: u64,
    /// The most responses that waited at once.
    pub(crate) outbox_peak: usize,
}

/// The responding side (see the module docs).
pub(crate) struct Respond {
    /// Retained responses, by dedup slot.
    cache: Box<[Option<Vec<u8>>]>,
    /// Buffers of dropped responses, reused for the next copies.
    buffers: ResponseBuffers,
    outbox: VecDeque<Waiting>,
    capacity: usize,
    counts: RespondCounts,
}

impl Respond {
    /// Keeps responses for `slots` dedup slots, and an outbox of
    /// `capacity` responses (allocated here, once).
    pub(crate) fn new(slots: usize, capacity: usize, spare_buffers: usize) -> Self {
        Self {
            cache: (0..slots).map(|_| None).collect(),
            buffers: ResponseBuffers::new(spare_buffers),
            outbox: VecDeque::with_capacity(capacity),
            capacity,
            counts: RespondCounts::default(),
        }
    }

    /// How many more responses the outbox can take, with one reserved for
    /// each of the `running` remote jobs.
    pub(crate) fn room(&self, running: usize) -> usize {
        self.capacity
            .saturating_sub(self.outbox.len())
            .saturating_sub(running)
    }

    /// Sends `frame` to `to` on the action lane, or keeps it in the outbox
    /// (behind those already waiting, so responses to one peer keep their
    /// order) until `until`.
    pub(crate) fn send(&mut self, hub: &Hub, to: Rank, frame: Frame, until: Instant) {
        if self.outbox.is_empty() {
            let len = frame.len() as u64;
            match hub.handle.try_send_quiet(to, Channel::Action, frame) {
                Ok(()) => self.counts.bytes_sent += len,
                Err(refused) if lane_full(refused.kind()) => {
                    self.wait(to, refused.into_inner(), until);
                }
                // The peer is gone or the transport closed: nobody to answer.
                Err(_) => {}
            }
        } else {
            self.wait(to, frame, until);
        }
    }

    fn wait(&mut self, to: Rank, frame: Frame, until: Instant) {
        debug_assert!(
            self.outbox.len() < self.capacity,
            "the owner reads frames only while the outbox has room"
        );
        self.outbox.push_back(Waiting { to, frame, until });
        self.counts.outbox_peak = self.counts.outbox_peak.max(self.outbox.len());
    }

    /// Hands waiting responses to the transport, oldest first, at most
    /// `max`; returns how many went out. While the lane stays full, drops
    /// those whose caller stopped waiting by `now`.
    pub(crate) fn flush(&mut self, hub: &Hub, max: usize, now: Instant) -> usize {
        let mut sent = 0;
        while sent < max {
            let Some(waiting) = self.outbox.pop_front() else {
                break;
            };
            let len = waiting.frame.len() as u64;
            match hub
                .handle
                .try_send_quiet(waiting.to, Channel::Action, waiting.frame)
            {
                Ok(()) => {
                    self.counts.bytes_sent += len;
                    sent += 1;
                }
                Err(refused) if lane_full(refused.kind()) => {
                    self.outbox.push_front(Waiting {
                        frame: refused.into_inner(),
                        ..waiting
                    });
                    self.drop_expired(now);
                    break;
                }
                Err(_) => {}
            }
        }
        sent
    }

    /// Drops waiting responses whose caller's deadline passed by `now`.
    fn drop_expired(&mut self, now: Instant) {
        let before = self.outbox.len();
        self.outbox.retain(|waiting| waiting.until >= now);
        self.counts.expired += (before - self.outbox.len()) as u64;
    }

    /// Drops the responses waiting for `peer`, which went down.
    pub(crate) fn forget_peer(&mut self, peer: Rank) {
        self.outbox.retain(|waiting| waiting.to != peer);
    }

    /// Keeps a copy of `frame` as the response of dedup slot `slot`, in
    /// one buffer.
    pub(crate) fn retain(&mut self, slot: usize, frame: &Frame) {
        let mut copy = self.buffers.empty();
        frame.append_to(&mut copy);
        self.cache[slot] = Some(copy);
    }

    /// A copy of the response kept for dedup slot `slot`, if any.
    pub(crate) fn cached(&mut self, slot: usize) -> Option<Frame> {
        let frame = self.cache.get(slot)?.as_ref()?;
        Some(Frame::whole(self.buffers.copy(frame)))
    }

    /// Drops the response kept for dedup slot `slot`, keeping its buffer
    /// for the next copy.
    pub(crate) fn forget(&mut self, slot: usize) {
        if let Some(buffer) = self.cache[slot].take() {
            self.buffers.recycle(buffer);
        }
    }

    /// Forgets every kept response (shutdown).
    pub(crate) fn clear(&mut self) {
        self.cache.iter_mut().for_each(|c| *c = None);
        self.buffers.clear();
    }

    /// Responses waiting for the transport.
    pub(crate) fn waiting(&self) -> usize {
        self.outbox.len()
    }

    /// Bytes of the responses waiting.
    pub(crate) fn waiting_bytes(&self) -> u64 {
        self.outbox.iter().map(|w| w.frame.len() as u64).sum()
    }

    /// The most responses that can wait at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes sent since the last call (for the owner's metrics).
    pub(crate) fn take_bytes_sent(&mut self) -> u64 {
        std::mem::take(&mut self.counts.bytes_sent)
    }

    /// The bytes sent and not yet taken.
    pub(crate) fn unpublished_bytes(&self) -> u64 {
        self.counts.bytes_sent
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> RespondCounts {
        self.counts
    }
}

/// Is this refusal the action lane being full for now (rather than the
/// peer or the transport being gone)?
fn lane_full(kind: SendErrorKind) -> bool {
    matches!(
        kind,
        SendErrorKind::QueueFull { .. } | SendErrorKind::RetainedBytes { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retained_response_is_the_frame_s_wire_bytes_whole_or_split() {
        let mut respond = Respond::new(2, 4, 4);
        let whole = Frame::whole(b"whole response".to_vec());
        let split = Frame::with_middle(
            b"headtail".to_vec(),
            vec![(4, vec![7u8; 5].into())],
            vec![9u8; 3],
        );
        respond.retain(0, &whole);
        respond.retain(1, &split);
        for (slot, frame) in [(0, &whole), (1, &split)] {
            let cached = respond.cached(slot).expect("retained");
            assert!(!cached.is_split(), "a copy is one buffer");
            assert_eq!(cached.to_vec(), frame.to_vec(), "slot {slot}");
        }
        assert_eq!(
            respond.cached(1).unwrap().head(),
            b"head\x07\x07\x07\x07\x07tail\x09\x09\x09"
        );
        respond.forget(0);
        assert!(respond.cached(0).is_none());
    }
}
