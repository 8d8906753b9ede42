//! The frames in the network: one queue per (source, destination, lane),
//! with running totals per rank.
//!
//! A link's queue order is its delivery order. A packet becomes visible to
//! its receiver when it reaches the head of its queue and its due tick has
//! come, so a lane is FIFO unless a packet was inserted ahead of others
//! (reordering); a late packet holds up those behind it, as a TCP stream
//! does.

use std::collections::VecDeque;
use std::fmt;

use dinah_core::wire::Channel;

use crate::transport::Frame;

/// What a packet is to the receiving driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PacketKind {
    /// A frame from the sender's handle, as sent.
    Original,
    /// A copy injected by the fault plan (not counted for drain).
    Duplicate,
    /// The sender's goodbye on this lane: it sent `frames_sent` originals
    /// before it. The bytes are the encoded goodbye frame.
    Goodbye {
        /// Frames the sender sent to this receiver on this lane.
        frames_sent: u64,
    },
    /// The sender closed: nothing follows on this lane. No bytes; not
    /// counted anywhere.
    End,
}

/// A frame in the network.
pub(super) struct Packet {
    /// The first tick it may be delivered at.
    pub(super) due: u64,
    /// The frame.
    pub(super) frame: Frame,
    /// What it is.
    pub(super) kind: PacketKind,
}

impl Packet {
    fn counted(&self) -> bool {
        self.kind != PacketKind::End
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("due", &self.due)
            .field("len", &self.frame.len())
            .field("kind", &self.kind)
            .finish()
    }
}

/// Frames and bytes held for or from one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Held {
    /// Frames, per lane.
    pub(super) frames: [u64; 2],
    /// Bytes, both lanes.
    pub(super) bytes: u64,
}

impl Held {
    pub(super) fn total_frames(&self) -> u64 {
        self.frames[0] + self.frames[1]
    }

    fn add(&mut self, lane: Channel, bytes: usize) {
        self.frames[lane.index()] += 1;
        self.bytes += bytes as u64;
    }

    fn remove(&mut self, lane: Channel, bytes: usize) {
        self.frames[lane.index()] -= 1;
        self.bytes -= bytes as u64;
    }
}

/// Every link of a world of `n` ranks.
#[derive(Debug)]
pub(super) struct Links {
    n: usize,
    queues: Vec<VecDeque<Packet>>,
    to: Vec<Held>,
    from: Vec<Held>,
}

impl Links {
    /// Empty links for `n` ranks.
    pub(super) fn new(n: usize) -> Self {
        Self {
            n,
            queues: (0..n * n * 2).map(|_| VecDeque::new()).collect(),
            to: vec![Held::default(); n],
            from: vec![Held::default(); n],
        }
    }

    fn index(&self, src: usize, dst: usize, lane: Channel) -> usize {
        (src * self.n + dst) * 2 + lane.index()
    }

    /// Queues `packet` on `src -> dst` on `lane`, ahead of up to
    /// `overtake` packets (fewer if fewer are queued; never ahead of an
    /// [`PacketKind::End`]). An overtaking packet's due tick is lowered to
    /// that of the first packet it overtakes, so the overtaken packets are
    /// not held up. Returns how many packets it overtook.
    pub(super) fn push(
        &mut self,
        src: usize,
        dst: usize,
        lane: Channel,
        mut packet: Packet,
        overtake: usize,
    ) -> usize {
        if packet.counted() {
            self.to[dst].add(lane, packet.frame.len());
            self.from[src].add(lane, packet.frame.len());
        }
        let index = self.index(src, dst, lane);
        let queue = &mut self.queues[index];
        let ends = queue
            .iter()
            .rev()
            .take_while(|p| p.kind == PacketKind::End)
            .count();
        let overtaken = overtake.min(queue.len() - ends);
        let at = queue.len() - ends - overtaken;
        if overtaken > 0 {
            packet.due = packet.due.min(queue[at].due);
        }
        queue.insert(at, packet);
        overtaken
    }

    /// The head of `src -> dst` on `lane` if it is due at `now`.
    pub(super) fn pop_due(
        &mut self,
        src: usize,
        dst: usize,
        lane: Channel,
        now: u64,
    ) -> Option<Packet> {
        let index = self.index(src, dst, lane);
        let queue = &mut self.queues[index];
        if queue.front()?.due > now {
            return None;
        }
        let packet = queue.pop_front()?;
        if packet.counted() {
            self.to[dst].remove(lane, packet.frame.len());
            self.from[src].remove(lane, packet.frame.len());
        }
        Some(packet)
    }

    /// Is any packet for `dst` at the head of its link and due at `now`?
    pub(super) fn has_due_for(&self, dst: usize, now: u64) -> bool {
        (0..self.n).any(|src| {
            Channel::ALL.into_iter().any(|lane| {
                self.queues[self.index(src, dst, lane)]
                    .front()
                    .is_some_and(|p| p.due <= now)
            })
        })
    }

    /// Removes everything on `src -> dst` (both lanes); returns the
    /// counted frames removed.
    pub(super) fn purge(&mut self, src: usize, dst: usize) -> u64 {
        let mut removed = 0;
        for lane in Channel::ALL {
            let index = self.index(src, dst, lane);
            for packet in std::mem::take(&mut self.queues[index]) {
                if packet.counted() {
                    self.to[dst].remove(lane, packet.frame.len());
                    self.from[src].remove(lane, packet.frame.len());
                    removed += 1;
                }
            }
        }
        removed
    }

    /// What the network holds for `dst`.
    pub(super) fn to(&self, dst: usize) -> Held {
        self.to[dst]
    }

    /// What the network holds from `src`.
    pub(super) fn from(&self, src: usize) -> Held {
        self.from[src]
    }

    /// Bytes held on `rank -> rank` (counted in both `to` and `from`).
    pub(super) fn self_bytes(&self, rank: usize) -> u64 {
        Channel::ALL
            .into_iter()
            .flat_map(|lane| &self.queues[self.index(rank, rank, lane)])
            .map(|p| p.frame.len() as u64)
            .sum()
    }

    /// Frames and bytes held in the whole network.
    pub(super) fn total(&self) -> (u64, u64) {
        self.to.iter().fold((0, 0), |(frames, bytes), held| {
            (frames + held.total_frames(), bytes + held.bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(due: u64, tag: u8) -> Packet {
        Packet {
            due,
            frame: Frame::whole(vec![tag; 3]),
            kind: PacketKind::Original,
        }
    }

    fn drain(links: &mut Links, src: usize, dst: usize, now: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(p) = links.pop_due(src, dst, Channel::Action, now) {
            out.push(p.frame.head()[0]);
        }
        out
    }

    #[test]
    fn a_link_is_fifo_and_a_late_head_holds_the_rest() {
        let mut links = Links::new(2);
        links.push(0, 1, Channel::Action, packet(5, 1), 0);
        links.push(0, 1, Channel::Action, packet(2, 2), 0);
        assert!(!links.has_due_for(1, 4));
        assert_eq!(drain(&mut links, 0, 1, 4), Vec::<u8>::new());
        assert!(links.has_due_for(1, 5));
        assert_eq!(drain(&mut links, 0, 1, 5), [1, 2]);
        assert_eq!(links.total(), (0, 0));
    }

    #[test]
    fn overtaking_is_bounded_and_never_delays_the_overtaken() {
        let mut links = Links::new(2);
        links.push(0, 1, Channel::Action, packet(1, 1), 0);
        links.push(0, 1, Channel::Action, packet(1, 2), 0);
        assert_eq!(links.push(0, 1, Channel::Action, packet(9, 3), 1), 1);
        assert_eq!(links.push(0, 1, Channel::Action, packet(1, 4), 10), 3);
        assert_eq!(drain(&mut links, 0, 1, 1), [4, 1, 3, 2]);
    }

    #[test]
    fn nothing_overtakes_an_end_and_ends_are_not_counted() {
        let mut links = Links::new(2);
        links.push(0, 1, Channel::Action, packet(0, 1), 0);
        links.push(
            0,
            1,
            Channel::Action,
            Packet {
                due: 0,
                frame: Frame::default(),
                kind: PacketKind::End,
            },
            0,
        );
        assert_eq!(links.to(1).total_frames(), 1);
        assert_eq!(links.push(0, 1, Channel::Action, packet(0, 2), 5), 1);
        let kinds: Vec<PacketKind> = std::iter::from_fn(|| links.pop_due(0, 1, Channel::Action, 0))
            .map(|p| p.kind)
            .collect();
        assert_eq!(
            kinds,
            [PacketKind::Original, PacketKind::Original, PacketKind::End]
        );
    }

    #[test]
    fn totals_follow_pushes_pops_and_purges() {
        let mut links = Links::new(3);
        links.push(0, 1, Channel::Action, packet(0, 1), 0);
        links.push(0, 1, Channel::Control, packet(0, 2), 0);
        links.push(2, 1, Channel::Action, packet(0, 3), 0);
        links.push(1, 1, Channel::Action, packet(0, 4), 0);
        assert_eq!(
            links.to(1),
            Held {
                frames: [1, 3],
                bytes: 12
            }
        );
        assert_eq!(
            links.from(0),
            Held {
                frames: [1, 1],
                bytes: 6
            }
        );
        assert_eq!(links.self_bytes(1), 3);
        assert_eq!(links.purge(0, 1), 2);
        assert_eq!(
            links.to(1),
            Held {
                frames: [0, 2],
                bytes: 6
            }
        );
        assert_eq!(links.from(0), Held::default());
        assert_eq!(links.total(), (2, 6));
    }
}
