//! The receiving half of a poll: messages taken from the posted receives
//! and handed out in order, large frames received apart, close markers,
//! and the idle check's look for anything to do.

use std::time::Instant;

use dinah_core::wire::Channel;
use dinah_core::{ProtocolLimits, Rank, WorldSize};
use dinah_std::transport::{Frame, Liveness, TransportEvent};
use mpi::traits::{Communicator, Source};

use super::{CLOSE_PROBE_INTERVAL, MpiDriver, Out, Phase};
use crate::coalesce::is_batch;
use crate::farewell;
use crate::peers::Peers;
use crate::posted::Taken;
use crate::receive::Probe;
use crate::tags::Stream;

impl MpiDriver {
    /// Receives on both lanes (control first) and then the close markers;
    /// what arrives is heard at `now`.
    pub(super) fn receive(&mut self, now: Instant, out: &mut Out<'_>) -> bool {
        let mut progress = false;
        let mut exhausted = true;
        // Both lanes tested before either is taken from, the action lane
        // first: a control message its sender posted before the action
        // message found is then complete, and handed out before it. A poll
        // with no room for events takes nothing, and tests nothing either.
        if !out.full() {
            self.posted.look_for_poll();
        }
        for channel in Channel::ALL {
            let stream = Stream::of(channel);
            loop {
                progress |= self.take_frames(channel, now, out) > 0;
                if out.full() || self.receives.len_of(stream) >= self.config.max_pending_receives {
                    exhausted = false;
                    break;
                }
                if !self.take_posted(channel, now, out) {
                    break;
                }
                progress = true;
            }
        }
        self.polls = self.polls.wrapping_add(1);
        let close_due = self.phase != Phase::Running || self.polls % CLOSE_PROBE_INTERVAL == 0;
        if exhausted && close_due {
            progress |= self.receive_close_markers();
        }
        progress
    }

    /// Takes the earliest message that arrived in `channel`'s posted
    /// receives: a lone frame with nothing queued before it on the lane
    /// is handed out at once (an event, heard at `now`; the budget has
    /// room, the caller checked); anything else goes into the lane's
    /// queue, or starts receiving the large frame it announces. Returns
    /// whether there was one.
    ///
    /// An announced frame longer than the protocol allows (which no dinah
    /// sender makes) is not received: its sender is reported down for a
    /// protocol violation, and nothing is allocated for it. Its frame stays
    /// unreceived on the large tag, where it would be matched by the next
    /// large receive from that rank, so nothing more from that rank is
    /// taken: its messages are dropped as they arrive.
    fn take_posted(&mut self, channel: Channel, now: Instant, out: &mut Out<'_>) -> bool {
        let stream = Stream::of(channel);
        let Some((from, taken)) =
            self.posted
                .take(self.comm.get(), stream, self.world, &mut self.buffers)
        else {
            return false;
        };
        if self.peers.violated(from) {
            if let Taken::Message(bytes) = taken {
                self.buffers.give(bytes);
            }
            self.dropped_from_violators += 1;
            return true;
        }
        match taken {
            // Nothing of this lane waits before it (from any source): the
            // queue would hand it out next, whole.
            Taken::Message(bytes) if self.receives.len_of(stream) == 0 && !is_batch(&bytes) => {
                let _ = self
                    .inbox(channel, now)
                    .hand_out(from, Frame::whole(bytes), out);
            }
            Taken::Message(bytes) => self.receives.push_received(stream, from, bytes),
            Taken::Announced(announced) => {
                let max = u64::from(self.limits.max_frame_bytes);
                let head = announced
                    .checked_len(max)
                    .and_then(|_| usize::try_from(announced.head).ok());
                match head {
                    Some(head) => {
                        self.receives.start_large(
                            self.comm.get(),
                            stream,
                            from,
                            (head, &announced.parts, announced.tail),
                            &mut self.buffers,
                        );
                    }
                    None => self.peers.on_violation(from),
                }
            }
        }
        true
    }

    /// What hands `channel`'s received frames out, heard at `now`.
    fn inbox(&mut self, channel: Channel, now: Instant) -> Inbox<'_> {
        Inbox {
            channel,
            now,
            world: self.world,
            limits: self.limits,
            peers: &mut self.peers,
            liveness: &mut self.liveness,
            frames_received: &mut self.frames_received,
            bytes_received: &mut self.bytes_received,
        }
    }

    /// Hands out `channel`'s completed messages: goodbyes are absorbed,
    /// frames become events. Returns how many events, plus one if any
    /// message was absorbed.
    fn take_frames(&mut self, channel: Channel, now: Instant, out: &mut Out<'_>) -> usize {
        let stream = Stream::of(channel);
        if self.receives.len_of(stream) == 0 {
            return 0;
        }
        let mut absorbed = false;
        let left = out.left;
        // Split borrows: the queue hands frames to the inbox.
        let Self {
            receives,
            peers,
            world,
            limits,
            frames_received,
            bytes_received,
            buffers,
            liveness,
            ..
        } = self;
        let mut inbox = Inbox {
            channel,
            now,
            world: *world,
            limits: *limits,
            peers,
            liveness,
            frames_received,
            bytes_received,
        };
        let counted = receives.take_ready(stream, true, left, buffers, |from, frame| {
            let event = inbox.hand_out(from, frame, out);
            absorbed |= !event;
            event
        });
        counted + usize::from(absorbed)
    }

    /// Matches and applies the close markers waiting (at most one per peer
    /// and poll, so the work is bounded).
    fn receive_close_markers(&mut self) -> bool {
        let mut progress = false;
        for _ in 0..self.world.get() {
            match self
                .receives
                .probe(self.comm.get(), Stream::Close, &mut self.buffers)
            {
                Probe::Empty => break,
                Probe::Started { .. } => progress = true,
            }
        }
        let Self {
            receives,
            peers,
            sessions,
            buffers,
            ..
        } = self;
        receives.take_ready(Stream::Close, false, usize::MAX, buffers, |from, bytes| {
            // A marker from an earlier transport on a reused communicator
            // context carries another session number: ignored.
            // Probed messages: always whole.
            if let Some((session, lost)) = farewell::parse_close_marker(bytes.head()) {
                if sessions.get(from.index()) == Some(&session) {
                    peers.on_close(from, lost > 0);
                }
            }
            true
        });
        progress
    }

    /// Is there anything for a poll to do? Tests the first posted receive
    /// of each lane, probes the close tag as often as a poll does (see
    /// [`CLOSE_PROBE_INTERVAL`]), and tests the requests in flight
    /// (completing sends is itself progress).
    pub(super) fn mpi_ready(&mut self) -> bool {
        let comm = self.comm.get();
        self.idle_checks = self.idle_checks.wrapping_add(1);
        let close_due =
            self.phase != Phase::Running || self.idle_checks % CLOSE_PROBE_INTERVAL == 0;
        self.posted.any_ready()
            || (close_due
                && comm
                    .any_process()
                    .immediate_probe_with_tag(Stream::Close.tag())
                    .is_some())
            // Counting the queues is cheaper than walking them empty.
            || (self.receives.len() > 0 && self.receives.poll_ready())
            || self.sends.complete(&self.handle, &mut self.buffers) > 0
    }
}

/// Hands a lane's received frames out: heartbeats and goodbyes are
/// absorbed, every other frame becomes an event.
struct Inbox<'a> {
    channel: Channel,
    /// When what is handed out was heard.
    now: Instant,
    world: WorldSize,
    limits: ProtocolLimits,
    peers: &'a mut Peers,
    liveness: &'a mut Liveness,
    frames_received: &'a mut u64,
    bytes_received: &'a mut u64,
}

impl Inbox<'_> {
    /// Hands out `frame` from `from`; returns whether it became an event
    /// (`false`: absorbed).
    fn hand_out(&mut self, from: Rank, frame: Frame, out: &mut Out<'_>) -> bool {
        let (channel, world, limits) = (self.channel, self.world, self.limits);
        // Anything received is a sign of life.
        self.liveness.heard(from, self.now);
        // Heartbeats and goodbyes are whole frames without payload.
        let bytes = if frame.is_split() {
            &[][..]
        } else {
            frame.head()
        };
        if farewell::is_heartbeat(bytes, channel, from, world, limits) {
            self.peers.on_frame(from, channel);
            return false;
        }
        if let Some(frames_sent) = farewell::parse_goodbye(bytes, channel, from, world, limits) {
            self.peers.on_goodbye(from, channel, frames_sent);
            return false;
        }
        self.peers.on_frame(from, channel);
        *self.frames_received += 1;
        *self.bytes_received += frame.len() as u64;
        out.push(TransportEvent::Frame {
            from,
            channel,
            frame,
        });
        true
    }
}
