//! `Runtime::progress`: the owner thread's bounded unit of work.

use dinah_core::wire::{Channel, DecodeContext, Message, decode_frame};
use dinah_core::{Instant, Rank};

use super::Runtime;
use super::calls::CallOutcome;
use super::error::RuntimeError;
use super::frames;
use super::inbound::route_completion;
use crate::transport::{SendErrorKind, TransportEvent};

/// What one [`Runtime::progress`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Transport events handled (frames, peer changes, send failures).
    pub events: usize,
    /// Worker completions handled.
    pub completions: usize,
    /// Calls failed by their deadline.
    pub expired: usize,
    /// Cancellations handed to the transport.
    pub cancels_sent: usize,
    /// Queued responses handed to the transport.
    pub responses_sent: usize,
    /// Dedup entries dropped after their TTL.
    pub dedup_expired: usize,
    /// Whether the driver reported activity.
    pub transport_active: bool,
}

impl Progress {
    /// Did anything happen?
    pub fn did_work(&self) -> bool {
        self.transport_active
            || self.events
                + self.completions
                + self.expired
                + self.cancels_sent
                + self.responses_sent
                + self.dedup_expired
                > 0
    }

    /// Could this round have queued frames on the handle? Frames from
    /// transport events (responses of inline handlers), worker
    /// completions, expiries and cancellations.
    fn may_have_queued(&self) -> bool {
        self.events + self.completions + self.expired + self.cancels_sent + self.responses_sent > 0
    }
}

impl Runtime {
    /// Does one bounded round of the owner thread's work, in this order:
    /// transport events (control lane before action lane), worker
    /// completions, expired deadlines, queued cancellations, queued
    /// responses, expired dedup entries; then, if any of these may have
    /// queued frames, it hands them to the transport at once (see
    /// [`TransportDriver::flush`](crate::transport::TransportDriver::flush)).
    /// Each category handles at most
    /// [`RuntimeLimits::max_progress_events`](dinah_core::RuntimeLimits::max_progress_events)
    /// items, so one call never runs long. Never blocks.
    ///
    /// A failure of the transport as a whole moves the runtime to
    /// `Failed` and fails every waiting call with
    /// [`RuntimeError::TransportFailed`].
    pub fn progress(&mut self) -> Progress {
        let budget = self.shared.limits.max_progress_events as usize;
        let mut progress = Progress::default();
        let now = self.shared.clock.now();
        self.events.clear();
        match self.driver.poll(budget, &mut self.events) {
            Ok(active) => progress.transport_active = active,
            Err(error) => self.fail_transport(error),
        }
        let mut events = std::mem::take(&mut self.events);
        progress.events = events.len();
        for event in events.drain(..) {
            self.on_event(event, now);
        }
        self.events = events;
        progress.completions = self.handle_completions(budget, now);
        progress.expired = self.expire_calls(budget, now);
        progress.cancels_sent = self.pump_cancels(budget);
        progress.responses_sent = self.receiver.flush(&self.shared, budget);
        progress.dedup_expired = self.receiver.expire(now, budget);
        if progress.may_have_queued() {
            let (sent, events) = self.flush(budget, now);
            progress.transport_active |= sent;
            progress.events += events;
        }
        self.receiver.counts.publish(&self.shared.metrics);
        progress
    }

    /// Sends what this round queued (see
    /// [`TransportDriver::flush`](crate::transport::TransportDriver::flush));
    /// a frame that could not be sent is handled like one a poll reports.
    /// Returns whether anything was sent, and how many events.
    fn flush(&mut self, budget: usize, now: Instant) -> (bool, usize) {
        self.events.clear();
        let sent = match self.driver.flush(budget, &mut self.events) {
            Ok(sent) => sent,
            Err(error) => {
                self.fail_transport(error);
                false
            }
        };
        let mut events = std::mem::take(&mut self.events);
        let count = events.len();
        for event in events.drain(..) {
            self.on_event(event, now);
        }
        self.events = events;
        (sent, count)
    }

    fn fail_transport(&mut self, error: crate::transport::TransportError) {
        let _ = self.shared.state.fail();
        let failure = RuntimeError::TransportFailed(error);
        let failed = self
            .shared
            .calls
            .fail_all(|_| failure.clone(), &mut Vec::new());
        self.receiver.counts.failed_calls(failed);
    }

    fn on_event(&mut self, event: TransportEvent, now: Instant) {
        match event {
            TransportEvent::Frame {
                from,
                channel,
                bytes,
            } => self.on_frame(from, channel, bytes, now),
            TransportEvent::PeerDown { peer, error } => {
                let failure = RuntimeError::Transport { peer, error };
                let failed = self.shared.calls.fail_peer(peer, &failure);
                self.receiver.counts.failed_calls(failed);
                self.receiver.on_peer_down(peer);
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
                let Ok(ctx) = DecodeContext::new(
                    channel,
                    self.shared.rank,
                    self.shared.world,
                    self.shared.protocol,
                ) else {
                    return;
                };
                if let Ok(decoded) = decode_frame(&frame, &ctx) {
                    if let Message::Request { call, .. } = *decoded.header().message() {
                        let failure = RuntimeError::Transport { peer: to, error };
                        let _ = self
                            .shared
                            .calls
                            .complete(call.request, |_| CallOutcome::Failed(failure));
                    }
                }
            }
            TransportEvent::PeerDrained { peer } => {
                if let Some(drained) = self.peers_drained.get_mut(peer.index()) {
                    *drained = true;
                }
            }
            _ => {}
        }
    }

    fn on_frame(&mut self, from: Rank, channel: Channel, bytes: Vec<u8>, now: Instant) {
        let Self {
            shared,
            receiver,
            contexts,
            ..
        } = self;
        receiver.counts.bytes_received(bytes.len() as u64);
        let Some(ctx) = contexts.get(from.index()) else {
            receiver.counts.protocol_rejection();
            return;
        };
        let ctx = ctx.with_channel(channel);
        let frame = match decode_frame(&bytes, &ctx) {
            Ok(frame) => frame,
            Err(_) => {
                receiver.counts.protocol_rejection();
                return;
            }
        };
        let header = *frame.header();
        match *header.message() {
            Message::Error { call, code } => {
                let text = frame.error_text().unwrap_or("");
                let counts = &mut receiver.counts;
                let late = shared.calls.complete(call.request, |info| {
                    counts.failed();
                    if info.peer != from || info.call.action != call.action {
                        return CallOutcome::Failed(mismatch(from));
                    }
                    CallOutcome::Failed(RuntimeError::from_wire(
                        code,
                        text,
                        call.action,
                        call.domain,
                        info.deadline_after,
                    ))
                });
                if late.is_err() {
                    receiver.counts.late_result_discarded();
                }
            }
            Message::Request { call, deadline } => {
                let until = now
                    .checked_add(deadline.as_duration())
                    .unwrap_or(Instant::MAX);
                receiver.on_request(shared, from, call, until, (header, bytes), now);
            }
            Message::Result { call } => {
                let counts = &mut receiver.counts;
                let late = shared.calls.complete(call.request, |info| {
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
                    receiver.counts.late_result_discarded();
                }
            }
            Message::Cancel { call } => {
                receiver.on_cancel(shared, from, call, now);
            }
            // Goodbyes are the transport's; anything else is ignored.
            _ => {}
        }
    }

    fn handle_completions(&mut self, budget: usize, now: Instant) -> usize {
        if self.shared.completions.is_empty() {
            // The common round (and every round with inline handlers only).
            return 0;
        }
        let mut handled = 0;
        while handled < budget {
            let Some(completion) = self.shared.completions.pop() else {
                break;
            };
            route_completion(&mut self.receiver, &self.shared, completion, now);
            handled += 1;
        }
        handled
    }

    fn expire_calls(&mut self, budget: usize, now: Instant) -> usize {
        let mut expired = std::mem::take(&mut self.expired);
        expired.clear();
        self.shared.calls.expire(now, budget, &mut expired);
        for info in &expired {
            self.receiver.counts.deadline_expiry();
            self.shared.queue_cancel(info.peer, info.call);
        }
        let count = expired.len();
        self.expired = expired;
        count
    }

    /// Hands queued cancellations to the control lane (at most `budget`).
    pub(crate) fn pump_cancels(&mut self, budget: usize) -> usize {
        if self.cancel_retry.is_none() && self.shared.cancels.is_empty() {
            // The common round: two loads instead of a failed pop.
            return 0;
        }
        let mut sent = 0;
        while sent < budget {
            let Some((peer, call)) = self
                .cancel_retry
                .take()
                .or_else(|| self.shared.cancels.pop())
            else {
                break;
            };
            let frame = frames::cancel(self.shared.rank, call);
            let len = frame.len() as u64;
            match self.shared.send_from_owner(peer, Channel::Control, frame) {
                Ok(()) => {
                    self.receiver.counts.bytes_sent(len);
                    sent += 1;
                }
                Err(refused) if matches!(refused.kind(), SendErrorKind::QueueFull { .. }) => {
                    self.cancel_retry = Some((peer, call));
                    break;
                }
                // Peer down or transport closed: nothing left to cancel.
                Err(_) => {}
            }
        }
        sent
    }
}

fn mismatch(from: Rank) -> RuntimeError {
    RuntimeError::MismatchedReply { peer: from }
}
