//! What the driver knows of each peer: frames sent and received per lane,
//! goodbyes, and whether the peer drained, closed or went down.
//!
//! A peer has **drained** when its goodbye arrived on both lanes and the
//! frames received from it on each lane equal the count its goodbye
//! announced (MPI keeps one lane's messages in order, but a large message
//! may finish receiving after a later small one, so the counts, not the
//! arrival of the goodbye, decide). A peer **closed** when its close
//! marker arrived: it closed its transport without a clean drain and
//! receives nothing more. A closed peer is marked down quietly once it
//! drained (later sends to it fail at once); one that lost frames on the
//! way (it abandoned sends it could not finish) is reported down at once.
//!
//! Every change is queued as a [`Notice`] for the driver, which applies it
//! to the handle and reports it to the runtime in order.

use std::collections::VecDeque;

use dinah_core::wire::Channel;
use dinah_core::{Rank, WorldSize};
use dinah_std::transport::DownReason;

/// A change the driver must apply and, for some, report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The handshake succeeded: report `PeerUp`.
    Up(Rank),
    /// The first goodbye arrived: the peer sends nothing more (status
    /// `Leaving`, no event).
    Leaving(Rank),
    /// Every frame it announced arrived: report `PeerDrained`.
    Drained(Rank),
    /// It closed after draining: mark it down without an event.
    Closed(Rank),
    /// It is gone before draining: report `PeerDown`.
    Down(Rank, DownReason),
}

#[derive(Debug, Clone, Copy, Default)]
struct Peer {
    sent: [u64; 2],
    received: [u64; 2],
    goodbye: [Option<u64>; 2],
    drained: bool,
    closed: bool,
    down: bool,
    /// It broke the transport's protocol: nothing more from it is taken.
    violated: bool,
}

/// The peer table of one driver (its own rank has an entry, never used).
#[derive(Debug)]
pub(crate) struct Peers {
    me: Rank,
    peers: Vec<Peer>,
    notices: VecDeque<Notice>,
}

impl Peers {
    /// Every peer of `me` in `world` up and nothing exchanged; an `Up`
    /// notice is queued for each.
    pub(crate) fn new(me: Rank, world: WorldSize) -> Self {
        let peers = vec![Peer::default(); world.get() as usize];
        // At most a few notices per peer over the whole run.
        let mut notices = VecDeque::with_capacity(3 * peers.len());
        notices.extend(world.ranks().filter(|&peer| peer != me).map(Notice::Up));
        Self { me, peers, notices }
    }

    /// The peers other than this rank.
    pub(crate) fn others(&self) -> impl Iterator<Item = Rank> + '_ {
        let world = WorldSize::new(self.peers.len() as u32).expect("a world has a rank");
        world.ranks().filter(move |&peer| peer != self.me)
    }

    /// A frame was posted to `peer` on `channel`.
    pub(crate) fn on_sent(&mut self, peer: Rank, channel: Channel) {
        self.peers[peer.index()].sent[channel.index()] += 1;
    }

    /// Frames posted to `peer` on `channel` so far (what a goodbye
    /// announces).
    pub(crate) fn sent(&self, peer: Rank, channel: Channel) -> u64 {
        self.peers[peer.index()].sent[channel.index()]
    }

    /// A frame from `peer` on `channel` was received.
    pub(crate) fn on_frame(&mut self, peer: Rank, channel: Channel) {
        self.peers[peer.index()].received[channel.index()] += 1;
        self.check(peer);
    }

    /// `peer`'s goodbye on `channel` announced `frames_sent` frames. A
    /// repeated goodbye on the same lane is ignored.
    pub(crate) fn on_goodbye(&mut self, peer: Rank, channel: Channel, frames_sent: u64) {
        let state = &mut self.peers[peer.index()];
        if state.goodbye[channel.index()].is_some() {
            return;
        }
        let first = state.goodbye.iter().all(Option::is_none);
        state.goodbye[channel.index()] = Some(frames_sent);
        if first && !state.down {
            self.notices.push_back(Notice::Leaving(peer));
        }
        self.check(peer);
    }

    /// `peer` closed its transport; `lost` says whether it abandoned sends
    /// to this rank that will never arrive. Without losses the peer is
    /// marked down (quietly) once everything it announced arrived; with
    /// losses it is reported down at once.
    pub(crate) fn on_close(&mut self, peer: Rank, lost: bool) {
        let state = &mut self.peers[peer.index()];
        if state.closed || state.down {
            return;
        }
        state.closed = true;
        if lost {
            state.down = true;
            self.notices
                .push_back(Notice::Down(peer, DownReason::EndOfStream));
        } else {
            self.check(peer);
        }
    }

    /// Nothing arrived from `peer` for the liveness timeout: it is
    /// reported down, unless it drained or is down already.
    pub(crate) fn on_silence(&mut self, peer: Rank) {
        self.fail(peer, DownReason::Silent);
    }

    /// `peer` sent what no dinah transport sends (a large frame past the
    /// protocol's bound): it is reported down, unless it drained or is
    /// down already, and is marked so that nothing more from it is taken.
    pub(crate) fn on_violation(&mut self, peer: Rank) {
        self.peers[peer.index()].violated = true;
        self.fail(peer, DownReason::ProtocolViolation);
    }

    /// Did `peer` break the transport's protocol?
    pub(crate) fn violated(&self, peer: Rank) -> bool {
        self.peers[peer.index()].violated
    }

    fn fail(&mut self, peer: Rank, reason: DownReason) {
        let state = &mut self.peers[peer.index()];
        if state.down || state.drained {
            return;
        }
        state.down = true;
        self.notices.push_back(Notice::Down(peer, reason));
    }

    fn check(&mut self, peer: Rank) {
        let state = &mut self.peers[peer.index()];
        if state.down {
            return;
        }
        if !state.drained {
            let [Some(control), Some(action)] = state.goodbye else {
                return;
            };
            if state.received != [control, action] {
                return;
            }
            state.drained = true;
            self.notices.push_back(Notice::Drained(peer));
        }
        if state.closed {
            state.down = true;
            self.notices.push_back(Notice::Closed(peer));
        }
    }

    /// Has `peer` drained?
    pub(crate) fn is_drained(&self, peer: Rank) -> bool {
        self.peers[peer.index()].drained
    }

    /// Has every peer other than this rank drained? A peer that went down
    /// without draining (silent, or closed with frames lost) may still
    /// send on the communicator later.
    pub(crate) fn all_drained(&self) -> bool {
        self.others().all(|peer| self.is_drained(peer))
    }

    /// Is `peer` down (closed)?
    pub(crate) fn is_down(&self, peer: Rank) -> bool {
        self.peers[peer.index()].down
    }

    /// Peers other than this rank neither drained nor down.
    pub(crate) fn undrained(&self) -> u32 {
        let count = self
            .others()
            .filter(|&peer| !self.is_drained(peer) && !self.is_down(peer))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The oldest notice not yet applied.
    pub(crate) fn next_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// Puts back a notice the driver could not report yet (no budget).
    pub(crate) fn defer_notice(&mut self, notice: Notice) {
        self.notices.push_front(notice);
    }

    /// Are notices waiting?
    pub(crate) fn has_notices(&self) -> bool {
        !self.notices.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(world: u32) -> (Peers, WorldSize) {
        let world = WorldSize::new(world).unwrap();
        (Peers::new(Rank::ZERO, world), world)
    }

    fn drain(peers: &mut Peers) -> Vec<Notice> {
        std::iter::from_fn(|| peers.next_notice()).collect()
    }

    #[test]
    fn every_peer_but_me_starts_up() {
        let (mut peers, world) = table(3);
        let others: Vec<_> = peers.others().collect();
        assert_eq!(others, vec![world.rank(1).unwrap(), world.rank(2).unwrap()]);
        assert_eq!(
            drain(&mut peers),
            others.iter().map(|&p| Notice::Up(p)).collect::<Vec<_>>()
        );
        assert_eq!(peers.undrained(), 2);
        assert!(!peers.has_notices());
    }

    #[test]
    fn a_peer_drains_when_both_goodbyes_and_all_frames_arrived_in_any_order() {
        let (mut peers, world) = table(2);
        let one = world.rank(1).unwrap();
        drain(&mut peers);
        // The action goodbye overtakes two action frames still receiving.
        peers.on_goodbye(one, Channel::Action, 2);
        assert_eq!(drain(&mut peers), vec![Notice::Leaving(one)]);
        peers.on_frame(one, Channel::Control);
        peers.on_goodbye(one, Channel::Control, 1);
        peers.on_frame(one, Channel::Action);
        assert!(!peers.is_drained(one));
        assert_eq!(peers.undrained(), 1);
        peers.on_frame(one, Channel::Action);
        assert!(peers.is_drained(one));
        assert_eq!(drain(&mut peers), vec![Notice::Drained(one)]);
        assert_eq!(peers.undrained(), 0);
        // A repeated goodbye changes nothing.
        peers.on_goodbye(one, Channel::Action, 9);
        assert!(drain(&mut peers).is_empty());
    }

    #[test]
    fn a_close_after_draining_is_quiet_and_one_with_losses_is_loud() {
        let (mut peers, world) = table(3);
        let (one, two) = (world.rank(1).unwrap(), world.rank(2).unwrap());
        drain(&mut peers);
        peers.on_goodbye(one, Channel::Control, 0);
        peers.on_goodbye(one, Channel::Action, 0);
        peers.on_close(one, false);
        assert_eq!(
            drain(&mut peers),
            vec![
                Notice::Leaving(one),
                Notice::Drained(one),
                Notice::Closed(one)
            ]
        );
        assert!(peers.is_down(one));
        peers.on_close(two, true);
        assert_eq!(
            drain(&mut peers),
            vec![Notice::Down(two, DownReason::EndOfStream)]
        );
        assert!(peers.is_down(two));
        assert_eq!(peers.undrained(), 0);
        // Nothing more happens to a peer that is down.
        peers.on_goodbye(two, Channel::Control, 0);
        peers.on_close(two, false);
        assert!(drain(&mut peers).is_empty());
    }

    #[test]
    fn a_close_marker_that_overtakes_the_goodbyes_waits_for_them() {
        let (mut peers, world) = table(2);
        let one = world.rank(1).unwrap();
        drain(&mut peers);
        peers.on_close(one, false);
        assert!(drain(&mut peers).is_empty());
        assert!(!peers.is_down(one));
        peers.on_goodbye(one, Channel::Action, 0);
        peers.on_goodbye(one, Channel::Control, 0);
        assert_eq!(
            drain(&mut peers),
            vec![
                Notice::Leaving(one),
                Notice::Drained(one),
                Notice::Closed(one)
            ]
        );
    }

    #[test]
    fn a_closed_peer_with_frames_in_transit_goes_down_once_they_arrive() {
        let (mut peers, world) = table(2);
        let one = world.rank(1).unwrap();
        drain(&mut peers);
        peers.on_goodbye(one, Channel::Control, 0);
        peers.on_goodbye(one, Channel::Action, 1);
        peers.on_close(one, false);
        assert_eq!(drain(&mut peers), vec![Notice::Leaving(one)]);
        assert!(!peers.is_down(one));
        peers.on_frame(one, Channel::Action);
        assert_eq!(
            drain(&mut peers),
            vec![Notice::Drained(one), Notice::Closed(one)]
        );
    }

    #[test]
    fn only_drained_peers_count_as_done_with_the_communicator() {
        let (mut peers, world) = table(3);
        let (one, two) = (world.rank(1).unwrap(), world.rank(2).unwrap());
        assert!(!peers.all_drained());
        for channel in Channel::ALL {
            peers.on_goodbye(one, channel, 0);
        }
        // Silent: down, so nothing waits for it, but it may send again.
        peers.on_silence(two);
        assert_eq!(peers.undrained(), 0);
        assert!(!peers.all_drained());
        // One that drained and then closed is done.
        let (mut peers, _) = table(2);
        for channel in Channel::ALL {
            peers.on_goodbye(one, channel, 0);
        }
        peers.on_close(one, false);
        assert!(peers.is_down(one));
        assert!(peers.all_drained());
    }

    #[test]
    fn sent_counts_are_per_peer_and_lane() {
        let (mut peers, world) = table(2);
        let one = world.rank(1).unwrap();
        peers.on_sent(one, Channel::Action);
        peers.on_sent(one, Channel::Action);
        peers.on_sent(one, Channel::Control);
        assert_eq!(peers.sent(one, Channel::Action), 2);
        assert_eq!(peers.sent(one, Channel::Control), 1);
        assert_eq!(peers.sent(Rank::ZERO, Channel::Action), 0);
    }

    #[test]
    fn deferred_notices_come_back_first() {
        let (mut peers, world) = table(3);
        let first = peers.next_notice().unwrap();
        peers.defer_notice(first);
        assert_eq!(
            peers.next_notice(),
            Some(Notice::Up(world.rank(1).unwrap()))
        );
    }
}
