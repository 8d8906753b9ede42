//! Flow control of outgoing calls.
//!
//! Every rank advertises in its hello how many action jobs each of its
//! worker domains admits at once
//! ([`TransportHandle::peer_admission`]). A caller divides that capacity
//! by the world size: its **window**, the most calls it keeps in flight
//! at one (target, domain) pair, its **lane**. With every rank of the
//! world keeping to its window, the target's domain never holds more jobs
//! than it admits, so a call is never refused for a full queue; a call
//! beyond the window waits here, in its lane's queue, until a call of the
//! same lane ends.
//!
//! A call stays counted against its lane until the target is known to be
//! done with it: its response arrived, or (for a call that failed here
//! first: deadline, dropped future) its late response arrived or its
//! target has had as long again as the call's deadline. Counting it only
//! until the caller stopped waiting would let the next calls reach a
//! domain still busy with jobs nobody waits for.
//!
//! This file keeps the counts and the queues (links between the slots of
//! the calls table); the table (`calls.rs`) decides when to use them.

use std::num::NonZeroU32;

use dinah_core::{DomainId, Rank, WorldSize};

use crate::transport::TransportHandle;

/// No slot: the end of a lane's queue.
const NONE: u32 = u32::MAX;

/// A (target rank, domain) pair, as an index into the lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneId(u32);

/// One lane's count and queue.
#[derive(Debug, Clone, Copy)]
struct Lane {
    /// Calls sent and not known to be done at the target.
    in_flight: u32,
    /// The oldest waiting call's slot, or [`NONE`].
    head: u32,
    /// The newest waiting call's slot, or [`NONE`].
    tail: u32,
}

impl Lane {
    const EMPTY: Self = Self {
        in_flight: 0,
        head: NONE,
        tail: NONE,
    };
}

/// A waiting call's neighbours in its lane's queue.
#[derive(Debug, Clone, Copy)]
struct Links {
    prev: u32,
    next: u32,
}

/// The lanes of one rank's calls (see the module docs).
pub(crate) struct Flow {
    /// The domains calls are counted for, sorted.
    domains: Box<[DomainId]>,
    /// Per target rank, per domain.
    lanes: Box<[Lane]>,
    /// Per slot of the calls table.
    links: Box<[Links]>,
    world: WorldSize,
}

impl Flow {
    /// Lanes to every rank of `world` for each of `domains`, queues over
    /// `slots` table slots.
    pub(crate) fn new(mut domains: Vec<DomainId>, world: WorldSize, slots: usize) -> Self {
        domains.sort_unstable();
        domains.dedup();
        let lanes = vec![Lane::EMPTY; domains.len() * world.get() as usize];
        let unlinked = Links {
            prev: NONE,
            next: NONE,
        };
        Self {
            domains: domains.into_boxed_slice(),
            lanes: lanes.into_boxed_slice(),
            links: vec![unlinked; slots].into_boxed_slice(),
            world,
        }
    }

    /// The lane of calls to `peer` in `domain`, `None` if calls to that
    /// domain are not counted.
    pub(crate) fn lane(&self, peer: Rank, domain: DomainId) -> Option<LaneId> {
        let d = self.domains.binary_search(&domain).ok()?;
        let index = peer.index() * self.domains.len() + d;
        (index < self.lanes.len()).then_some(LaneId(index as u32))
    }

    /// The target rank of `lane`.
    pub(crate) fn peer(&self, lane: LaneId) -> Rank {
        let index = lane.0 as usize / self.domains.len().max(1);
        self.world
            .rank(index as u32)
            .expect("lanes are made for the ranks of the world")
    }

    /// The window of calls to `peer`: its advertised capacity (this rank's
    /// own while the peer's is not known yet) over the world size, at
    /// least one. Unlimited if neither is advertised.
    pub(crate) fn window(&self, handle: &TransportHandle, peer: Rank) -> u32 {
        let advertised = handle
            .peer_admission(peer)
            .or_else(|| handle.peer_admission(handle.rank()));
        share(advertised, self.world)
    }

    /// Can a new call of `lane` go now, with `window`? Only if the lane
    /// has room and no call waits ahead of it.
    pub(crate) fn has_room(&self, lane: LaneId, window: u32) -> bool {
        let lane = &self.lanes[lane.0 as usize];
        lane.head == NONE && lane.in_flight < window
    }

    /// Does a call of `lane` wait?
    #[inline]
    pub(crate) fn has_waiting(&self, lane: LaneId) -> bool {
        self.lanes[lane.0 as usize].head != NONE
    }

    /// Is there room for the next waiting call of `lane`, with `window`?
    pub(crate) fn below(&self, lane: LaneId, window: u32) -> bool {
        self.lanes[lane.0 as usize].in_flight < window
    }

    /// A call of `lane` was sent.
    pub(crate) fn take(&mut self, lane: LaneId) {
        self.lanes[lane.0 as usize].in_flight += 1;
    }

    /// The target is done with a call of `lane`.
    pub(crate) fn give(&mut self, lane: LaneId) {
        let lane = &mut self.lanes[lane.0 as usize];
        debug_assert!(lane.in_flight > 0, "a lane gave more than it took");
        lane.in_flight = lane.in_flight.saturating_sub(1);
    }

    /// Forgets every count of calls to `peer` (it went down: it runs
    /// nothing more of this rank's). Its queues are the table's to empty.
    pub(crate) fn reset_peer(&mut self, peer: Rank) {
        let per_peer = self.domains.len();
        let start = peer.index() * per_peer;
        if let Some(lanes) = self.lanes.get_mut(start..start + per_peer) {
            lanes.iter_mut().for_each(|lane| lane.in_flight = 0);
        }
    }

    /// Forgets every count (every call has failed).
    pub(crate) fn reset(&mut self) {
        self.lanes.iter_mut().for_each(|lane| lane.in_flight = 0);
    }

    /// Queues the call in table slot `slot` at the back of `lane`.
    pub(crate) fn push(&mut self, lane: LaneId, slot: u32) {
        let tail = self.lanes[lane.0 as usize].tail;
        self.links[slot as usize] = Links {
            prev: tail,
            next: NONE,
        };
        match tail {
            NONE => self.lanes[lane.0 as usize].head = slot,
            tail => self.links[tail as usize].next = slot,
        }
        self.lanes[lane.0 as usize].tail = slot;
    }

    /// Puts the call in table slot `slot` back at the front of `lane` (its
    /// send was refused for now).
    pub(crate) fn push_front(&mut self, lane: LaneId, slot: u32) {
        let head = self.lanes[lane.0 as usize].head;
        self.links[slot as usize] = Links {
            prev: NONE,
            next: head,
        };
        match head {
            NONE => self.lanes[lane.0 as usize].tail = slot,
            head => self.links[head as usize].prev = slot,
        }
        self.lanes[lane.0 as usize].head = slot;
    }

    /// Every lane that has calls waiting.
    pub(crate) fn all_waiting(&self) -> impl Iterator<Item = LaneId> + '_ {
        (0..self.lanes.len())
            .filter(|&i| self.lanes[i].head != NONE)
            .map(|i| LaneId(i as u32))
    }

    /// The oldest waiting call of `lane`, taken out of its queue.
    pub(crate) fn pop(&mut self, lane: LaneId) -> Option<u32> {
        let head = self.lanes[lane.0 as usize].head;
        (head != NONE).then(|| {
            self.unlink(lane, head);
            head
        })
    }

    /// Takes the call in `slot` out of `lane`'s queue (it ended while
    /// waiting).
    pub(crate) fn unlink(&mut self, lane: LaneId, slot: u32) {
        let Links { prev, next } = self.links[slot as usize];
        let queue = &mut self.lanes[lane.0 as usize];
        match prev {
            NONE => queue.head = next,
            prev => self.links[prev as usize].next = next,
        }
        match next {
            NONE => queue.tail = prev,
            next => self.links[next as usize].prev = prev,
        }
        self.links[slot as usize] = Links {
            prev: NONE,
            next: NONE,
        };
    }

    /// The lanes of calls to `peer` that have calls waiting.
    pub(crate) fn waiting_lanes(&self, peer: Rank) -> impl Iterator<Item = LaneId> + '_ {
        let per_peer = self.domains.len();
        let start = peer.index() * per_peer;
        (start..start + per_peer)
            .filter(|&i| self.lanes.get(i).is_some_and(|lane| lane.head != NONE))
            .map(|i| LaneId(i as u32))
    }

    /// Calls sent over all lanes and not known to be done.
    #[cfg(test)]
    pub(crate) fn in_flight(&self, lane: LaneId) -> u32 {
        self.lanes[lane.0 as usize].in_flight
    }
}

/// One rank's share of an `advertised` capacity in `world`: at least one
/// call, unlimited if nothing is advertised.
fn share(advertised: Option<NonZeroU32>, world: WorldSize) -> u32 {
    advertised.map_or(u32::MAX, |capacity| (capacity.get() / world.get()).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(n: u32) -> WorldSize {
        WorldSize::new(n).unwrap()
    }

    fn domain(n: u64) -> DomainId {
        DomainId::new(n).unwrap()
    }

    #[test]
    fn each_rank_gets_its_share_and_at_least_one() {
        let capacity = NonZeroU32::new(256);
        assert_eq!(share(capacity, world(1)), 256);
        assert_eq!(share(capacity, world(2)), 128);
        assert_eq!(share(capacity, world(3)), 85);
        assert_eq!(share(capacity, world(1000)), 1);
        assert_eq!(share(None, world(2)), u32::MAX);
    }

    #[test]
    fn lanes_are_per_peer_and_domain() {
        let flow = Flow::new(vec![domain(7), domain(3), domain(7)], world(3), 4);
        let a = flow.lane(world(3).rank(2).unwrap(), domain(7)).unwrap();
        let b = flow.lane(world(3).rank(2).unwrap(), domain(3)).unwrap();
        assert_ne!(a, b);
        assert_eq!(flow.peer(a), world(3).rank(2).unwrap());
        assert_eq!(flow.lane(Rank::ZERO, domain(9)), None, "not counted");
    }

    #[test]
    fn queues_keep_their_order_through_unlinks() {
        let mut flow = Flow::new(vec![domain(1)], world(2), 8);
        let lane = flow.lane(Rank::ZERO, domain(1)).unwrap();
        for slot in [4, 2, 6, 1] {
            flow.push(lane, slot);
        }
        flow.unlink(lane, 6);
        flow.unlink(lane, 4);
        assert!(!flow.has_room(lane, 10), "calls wait ahead");
        assert_eq!(flow.waiting_lanes(Rank::ZERO).count(), 1);
        assert_eq!(flow.pop(lane), Some(2));
        flow.push(lane, 5);
        flow.push_front(lane, 7);
        assert_eq!(flow.all_waiting().count(), 1);
        assert_eq!(flow.pop(lane), Some(7));
        assert_eq!(flow.pop(lane), Some(1));
        assert_eq!(flow.pop(lane), Some(5));
        assert_eq!(flow.pop(lane), None);
        assert!(flow.has_room(lane, 1));
        flow.take(lane);
        assert!(!flow.has_room(lane, 1));
        flow.give(lane);
        assert_eq!(flow.in_flight(lane), 0);
    }
}
