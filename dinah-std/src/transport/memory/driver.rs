//! The owner-thread side of one simulated rank.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dinah_core::Rank;
use dinah_core::wire::{Channel, HEADER_LEN, Header, Message, encode_frame};

use super::link::{Packet, PacketKind};
use super::state::{NetState, Notice, Shutdown};
use crate::transport::{
    DownReason, DriverCounts, PeerStatus, TransportDriver, TransportError, TransportEvent,
    TransportHandle,
};

/// The driver of one rank of a [`SimNetwork`](super::SimNetwork),
/// polled by that rank's owner thread.
///
/// Every call locks the network briefly and never blocks otherwise. See
/// the [module documentation](super) for what each poll does and how
/// shutdown, drain and faults interact.
///
/// Dropping the driver closes its endpoint (as [`close`](TransportDriver::close)
/// does).
pub struct SimDriver {
    network: Arc<Mutex<NetState>>,
    rank: Rank,
    handle: TransportHandle,
    stepped: bool,
}

impl SimDriver {
    pub(super) fn new(
        network: Arc<Mutex<NetState>>,
        rank: Rank,
        handle: TransportHandle,
        stepped: bool,
    ) -> Self {
        Self {
            network,
            rank,
            handle,
            stepped,
        }
    }

    /// The rank this driver serves.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        // A test that panicked while polling leaves the state as it was at
        // the panic; later calls (or the drop) may still use it.
        self.network.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TransportDriver for SimDriver {
    /// One round, in this order: report queued notices (`PeerUp` on the
    /// first poll, `PeerDown`, `PeerDrained`); send the handle's control
    /// frames, then its action frames (a frame for a down peer becomes
    /// `SendFailed`); after a [`begin_shutdown`](Self::begin_shutdown),
    /// once the handle is empty, send the goodbyes; then hand over the
    /// frames due for this rank, all control frames before any action
    /// frame, taking one frame per source in turn (the first source
    /// rotates between polls). At most `budget` events are appended; what
    /// does not fit stays for the next poll.
    ///
    /// # Errors
    ///
    /// [`TransportError::Closed`] once the driver is closed.
    fn poll(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        let me = self.rank;
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.ranks[me.index()].closed {
            return Err(TransportError::Closed);
        }
        if state.mode.is_threaded() {
            state.tick += 1;
            state.apply_disconnects();
        }
        let mut out = Out {
            events,
            left: budget,
        };
        let mut progress = emit_notices(state, me, &self.handle, &mut out);
        for lane in Channel::ALL {
            progress |= send_lane(state, me, &self.handle, lane, &mut out);
        }
        progress |= send_goodbyes(state, me, &self.handle);
        for lane in Channel::ALL {
            progress |= receive_lane(state, me, &self.handle, lane, &mut out);
        }
        progress |= emit_notices(state, me, &self.handle, &mut out);
        Ok(progress)
    }

    /// Sends the handle's queued frames (control lane first), as the
    /// sending part of a poll does; receives nothing.
    fn flush(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        if !self.handle.has_queued() {
            return Ok(false);
        }
        let me = self.rank;
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.ranks[me.index()].closed {
            return Err(TransportError::Closed);
        }
        let mut out = Out {
            events,
            left: budget,
        };
        let mut progress = false;
        for lane in Channel::ALL {
            progress |= send_lane(state, me, &self.handle, lane, &mut out);
        }
        Ok(progress)
    }

    /// In stepped mode, returns at once (consuming any wake-up): nothing
    /// changes until the test steps or polls. In threaded mode, waits on
    /// the handle's wakeup, which every delivery to this rank triggers.
    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        if self.stepped {
            self.handle.wakeup().take();
        } else {
            self.handle.wakeup().wait(spin, timeout);
        }
    }

    fn handle(&self) -> &TransportHandle {
        &self.handle
    }

    /// Closes the handle (later `try_send`s fail with
    /// [`SendErrorKind::Closed`](crate::transport::SendErrorKind::Closed));
    /// the frames already queued are still sent, then the next poll that
    /// finds the handle empty sends a goodbye on each lane to every peer
    /// not down. Receiving goes on as before.
    fn begin_shutdown(&mut self) {
        let mut state = self.lock();
        let rank = &mut state.ranks[self.rank.index()];
        if rank.shutdown == Shutdown::Running {
            rank.shutdown = Shutdown::Flushing;
        }
        self.handle.close();
    }

    /// True once the goodbyes are sent, every frame taken from the handle
    /// is completed, every peer drained or is down (and that was
    /// reported), and the network holds nothing from or for this rank
    /// (so a duplicate still in transit keeps it false until delivered).
    fn is_drained(&self) -> bool {
        let state = self.lock();
        let me = self.rank.index();
        let rank = &state.ranks[me];
        let handle = self.handle.counts();
        rank.shutdown == Shutdown::GoodbyeSent
            && rank.stash.iter().all(Option::is_none)
            && rank.notices.is_empty()
            && handle.queued_control == 0
            && handle.queued_action == 0
            && handle.in_flight == 0
            && rank
                .peers
                .iter()
                .enumerate()
                .all(|(peer, state)| peer == me || state.drained || state.down.is_some())
            && state.links.to(me).total_frames() == 0
            && state.links.from(me).total_frames() == 0
    }

    /// Counts beyond the handle's (a frame taken from the handle and not
    /// yet sent, at most one per lane, is counted by the handle alone):
    /// `in_flight_frames` are the frames from this rank still in the
    /// network; `retained_bytes` are their bytes plus those of the frames
    /// in the network addressed to this rank (arrived or not).
    fn counts(&self) -> DriverCounts {
        let state = self.lock();
        driver_counts(&state, self.rank)
    }

    /// Closes the endpoint without waiting (the deadline is not needed):
    /// the handle is closed and its queued frames discarded, frames
    /// addressed to this rank are discarded, and each connected peer gets
    /// an end marker after the frames already sent to it. A peer that had
    /// not drained this rank when the marker arrives reports it down
    /// ([`DownReason::EndOfStream`]). Later polls fail with
    /// [`TransportError::Closed`]. Returns what is left (frames from this
    /// rank still in transit).
    fn close(&mut self, _deadline: std::time::Instant) -> DriverCounts {
        let mut state = self.lock();
        state.close(self.rank);
        driver_counts(&state, self.rank)
    }
}

impl Drop for SimDriver {
    fn drop(&mut self) {
        self.lock().close(self.rank);
    }
}

impl fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        let rank = &state.ranks[self.rank.index()];
        f.debug_struct("SimDriver")
            .field("rank", &self.rank)
            .field("mode", &state.mode)
            .field("shutdown", &rank.shutdown)
            .field("closed", &rank.closed)
            .field("counts", &driver_counts(&state, self.rank))
            .finish()
    }
}

/// The events of one poll and the budget left.
struct Out<'a> {
    events: &'a mut Vec<TransportEvent>,
    left: usize,
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

/// What the network holds for and from `me`. Frames taken from the handle
/// and not yet sent (the stash) are left out: the handle still counts
/// them (in flight, their bytes retained), and the two counts are added.
fn driver_counts(state: &NetState, me: Rank) -> DriverCounts {
    let m = me.index();
    let rank = &state.ranks[m];
    let (from, to) = (state.links.from(m), state.links.to(m));
    let undrained = rank
        .peers
        .iter()
        .enumerate()
        .filter(|&(peer, state)| peer != m && !state.drained && state.down.is_none())
        .count();
    DriverCounts {
        in_flight_frames: from.total_frames(),
        retained_bytes: from.bytes + to.bytes - state.links.self_bytes(m),
        undrained_peers: u32::try_from(undrained).unwrap_or(u32::MAX),
        frames_received: rank.frames_received,
        bytes_received: rank.bytes_received,
        // Only the network's own endpoints exist.
        refusals: crate::transport::Refusals::default(),
    }
}

/// Reports queued notices while the budget lasts.
fn emit_notices(
    state: &mut NetState,
    me: Rank,
    handle: &TransportHandle,
    out: &mut Out<'_>,
) -> bool {
    let notices = &mut state.ranks[me.index()].notices;
    let mut progress = false;
    while !out.full() {
        let Some(notice) = notices.pop_front() else {
            break;
        };
        progress = true;
        out.push(match notice {
            Notice::Up(peer) => {
                if handle.peer_status(peer) == PeerStatus::Connecting {
                    handle.set_peer_status(peer, PeerStatus::Up);
                }
                TransportEvent::PeerUp { peer }
            }
            Notice::Down(peer, reason) => {
                handle.set_peer_status(peer, PeerStatus::Down);
                TransportEvent::PeerDown {
                    peer,
                    error: TransportError::PeerDown { peer, reason },
                }
            }
            Notice::Drained(peer) => TransportEvent::PeerDrained { peer },
        });
    }
    progress
}

/// Moves `lane`'s queued frames from the handle into the network, at most
/// one queue's worth per poll.
fn send_lane(
    state: &mut NetState,
    me: Rank,
    handle: &TransportHandle,
    lane: Channel,
    out: &mut Out<'_>,
) -> bool {
    let (m, l) = (me.index(), lane.index());
    let config = handle.config();
    let limit = match lane {
        Channel::Control => config.control_queue,
        Channel::Action => config.action_queue,
    };
    let mut progress = false;
    for _ in 0..=limit {
        let Some(outgoing) = state.ranks[m].stash[l]
            .take()
            .or_else(|| handle.pop_outgoing(lane))
        else {
            break;
        };
        let dst = outgoing.to;
        if let Some(reason) = state.ranks[m].peers[dst.index()].down {
            if out.full() {
                state.ranks[m].stash[l] = Some(outgoing);
                break;
            }
            handle.complete_send(outgoing.frame.len(), false);
            let error = TransportError::PeerDown { peer: dst, reason };
            out.push(TransportEvent::SendFailed {
                to: dst,
                channel: lane,
                frame: outgoing.frame,
                error,
            });
            progress = true;
            continue;
        }
        if state.saturated(dst, lane) {
            state.ranks[m].stash[l] = Some(outgoing);
            break;
        }
        let len = outgoing.frame.len();
        state.ranks[m].peers[dst.index()].sent[l] += 1;
        state.send(me, dst, lane, outgoing.frame, None);
        handle.complete_send(len, true);
        progress = true;
    }
    progress
}

/// During a shutdown, once the handle is empty, sends a goodbye on each
/// lane to every peer not down, announcing the originals sent to it there.
fn send_goodbyes(state: &mut NetState, me: Rank, handle: &TransportHandle) -> bool {
    let m = me.index();
    let rank = &state.ranks[m];
    let queued = handle.counts();
    if rank.shutdown != Shutdown::Flushing
        || rank.stash.iter().any(Option::is_some)
        || queued.queued_control > 0
        || queued.queued_action > 0
    {
        return false;
    }
    state.ranks[m].shutdown = Shutdown::GoodbyeSent;
    for peer in state.world.ranks().filter(|&peer| peer != me) {
        let peer_state = state.ranks[m].peers[peer.index()];
        if peer_state.down.is_some() {
            continue;
        }
        for lane in Channel::ALL {
            let frames_sent = peer_state.sent[lane.index()];
            state.send(
                me,
                peer,
                lane,
                goodbye_frame(me, frames_sent).into(),
                Some(frames_sent),
            );
        }
    }
    true
}

/// The encoded goodbye frame from `me` announcing `frames_sent`.
fn goodbye_frame(me: Rank, frames_sent: u64) -> Vec<u8> {
    let header = Header::without_payload(me, Message::Goodbye { frames_sent })
        .expect("only error messages require a payload");
    let mut bytes = vec![0; HEADER_LEN];
    let no_segments: [&[u8]; 0] = [];
    let len = encode_frame(&header, &no_segments, &mut bytes)
        .expect("a goodbye is exactly one header long");
    bytes.truncate(len);
    bytes
}

/// Hands over the due frames of `lane` for `me`, one per source in turn.
fn receive_lane(
    state: &mut NetState,
    me: Rank,
    handle: &TransportHandle,
    lane: Channel,
    out: &mut Out<'_>,
) -> bool {
    let (m, l) = (me.index(), lane.index());
    let n = state.ranks.len();
    let start = state.ranks[m].cursor[l];
    state.ranks[m].cursor[l] = (start + 1) % n;
    let mut progress = false;
    'passes: loop {
        let mut took = false;
        for offset in 0..n {
            if out.full() {
                break 'passes;
            }
            let src = (start + offset) % n;
            let Some(packet) = state.links.pop_due(src, m, lane, state.tick) else {
                continue;
            };
            took = true;
            progress = true;
            let from = Rank::new(src as u32, state.world).expect("sources are ranks of the world");
            accept(state, me, from, lane, packet, handle, out);
        }
        if !took {
            break;
        }
    }
    if progress {
        wake_waiting_senders(state, me, lane);
    }
    progress
}

/// After `me` took frames of `lane`: wakes the ranks that may now move on
/// (a sender whose next frame for `me` waits for inbox room, and ranks
/// past their goodbyes, whose drain waits for their frames to be taken).
fn wake_waiting_senders(state: &NetState, me: Rank, lane: Channel) {
    for (index, rank) in state.ranks.iter().enumerate() {
        let waiting_for_room = rank.stash[lane.index()]
            .as_ref()
            .is_some_and(|outgoing| outgoing.to == me);
        if index != me.index() && (waiting_for_room || rank.shutdown == Shutdown::GoodbyeSent) {
            if let Some(handle) = &rank.handle {
                handle.wakeup().wake();
            }
        }
    }
}

/// Acts on one packet taken from the network for `me`.
fn accept(
    state: &mut NetState,
    me: Rank,
    from: Rank,
    lane: Channel,
    packet: Packet,
    handle: &TransportHandle,
    out: &mut Out<'_>,
) {
    let l = lane.index();
    let rank = &mut state.ranks[me.index()];
    match packet.kind {
        PacketKind::Original | PacketKind::Duplicate => {
            if packet.kind == PacketKind::Original {
                rank.peers[from.index()].received[l] += 1;
            }
            rank.frames_received += 1;
            rank.bytes_received += packet.frame.len() as u64;
            state.counts.delivered += 1;
            out.push(TransportEvent::Frame {
                from,
                channel: lane,
                frame: packet.frame,
            });
        }
        PacketKind::Goodbye { frames_sent } => {
            rank.peers[from.index()].goodbye[l] = Some(frames_sent);
            let status = handle.peer_status(from);
            if status == PeerStatus::Up || status == PeerStatus::Connecting {
                handle.set_peer_status(from, PeerStatus::Leaving);
            }
        }
        PacketKind::End => {
            let peer = &mut rank.peers[from.index()];
            peer.ended[l] = true;
            if peer.ended == [true, true] && peer.down.is_none() {
                peer.down = Some(DownReason::EndOfStream);
                if peer.drained {
                    // A clean close after the goodbyes: no event, but later
                    // sends to it fail at once.
                    handle.set_peer_status(from, PeerStatus::Down);
                } else {
                    rank.notices
                        .push_back(Notice::Down(from, DownReason::EndOfStream));
                }
            }
            return;
        }
    }
    let peer = &mut rank.peers[from.index()];
    if peer.drained || peer.down.is_some() {
        return;
    }
    if let [Some(control), Some(action)] = peer.goodbye {
        if peer.received == [control, action] {
            peer.drained = true;
            rank.notices.push_back(Notice::Drained(from));
        }
    }
}
