//! `Runtime::progress`: the owner thread's bounded unit of work.

use dinah_core::Instant;
use dinah_core::wire::Channel;

use crate::runtime::Runtime;
use crate::runtime::caller::submit_local;
use crate::runtime::error::RuntimeError;
use crate::runtime::frames;
use crate::runtime::hub::Counters;
use crate::transport::SendErrorKind;

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
    /// Calls to this rank that waited for room, submitted to their domain.
    pub released: usize,
    /// Dedup entries dropped after their TTL.
    pub dedup_expired: usize,
    /// Whether the driver reported activity.
    pub transport_active: bool,
    /// Whether a step stopped before it finished what it found: it
    /// reached its budget (the driver's events, the room left to answer
    /// them, or any of the counts above), or the transport refused for now
    /// a call it retried. The next round may then have work at once; when
    /// this is false, what is left to do can only arrive anew, and
    /// [`Runtime::block_on`] waits for it (see there).
    pub unfinished: bool,
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
                + self.released
                + self.dedup_expired
                > 0
    }

    /// Did a step that counts its items stop at `budget`?
    fn reached(&self, budget: usize) -> bool {
        [
            self.completions,
            self.expired,
            self.cancels_sent,
            self.responses_sent,
            self.dedup_expired,
        ]
        .into_iter()
        .any(|count| count >= budget)
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
    /// Frames are read only while every one of them could be answered
    /// without waiting beyond the serving side's bounded outbox: when
    /// responses pile up because peers do not take them, the driver is
    /// polled with a smaller budget (down to zero: it sends, and reads
    /// nothing), and the transport holds new frames back instead.
    ///
    /// A failure of the transport as a whole moves the runtime to
    /// `Failed` and fails every waiting call with
    /// [`RuntimeError::TransportFailed`].
    pub fn progress(&mut self) -> Progress {
        let budget = self.hub.limits.max_progress_events as usize;
        let mut progress = Progress::default();
        let now = self.hub.clock.now();
        // With no room the driver still runs: a budget of zero sends and
        // completes sends (which is what makes room) and reads nothing.
        let room = self.server.room().min(budget);
        self.events.clear();
        match self.driver.poll(room, &mut self.events) {
            Ok(active) => progress.transport_active = active,
            Err(error) => self.fail_transport(error),
        }
        progress.events = self.handle_events(now);
        // As many events as the driver was allowed (none, without room to
        // answer them): it may hold more. Fewer: it handed out all it had.
        let events_left = progress.events >= room;
        progress.completions = self.handle_completions(budget, now);
        progress.expired = self.expire_calls(budget, now);
        // Calls whose release the transport refused for now, tried again.
        let retried = self.hub.calls.retry_stalled();
        progress.released = self.submit_released();
        progress.cancels_sent = self.pump_cancels(budget);
        progress.responses_sent = self.server.flush(&self.hub, budget, now);
        progress.dedup_expired = self.server.expire(now, budget);
        self.hub.barriers.expire(now);
        self.hub.collectives.expire(now);
        progress.unfinished = events_left || retried || progress.reached(budget);
        if retried || progress.may_have_queued() {
            let (sent, events) = self.flush(budget, now);
            progress.transport_active |= sent;
            progress.events += events;
        }
        self.publish_counts();
        progress
    }

    /// Sends what this round queued (see
    /// [`TransportDriver::flush`](crate::transport::TransportDriver::flush));
    /// a frame that could not be sent is handled like one a poll reports.
    /// Returns whether anything was sent, and how many events.
    pub(crate) fn flush(&mut self, budget: usize, now: Instant) -> (bool, usize) {
        self.events.clear();
        let sent = match self.driver.flush(budget, &mut self.events) {
            Ok(sent) => sent,
            Err(error) => {
                self.fail_transport(error);
                false
            }
        };
        (sent, self.handle_events(now))
    }

    /// Adds the round's counts (the owner's and the serving side's) to the
    /// shared metrics.
    pub(crate) fn publish_counts(&mut self) {
        let (bytes, failed) = self.hub.calls.take_release_counts();
        if bytes + failed > 0 {
            self.counts.bytes_sent(bytes);
            self.counts.failed_calls(failed as usize);
        }
        let served = self.server.take_metrics();
        self.counts.add_served(&served);
        self.counts.publish(&self.hub.metrics);
    }

    pub(super) fn fail_transport(&mut self, error: crate::transport::TransportError) {
        let _ = self.hub.state.fail();
        let failure = RuntimeError::TransportFailed(error);
        let failed = self
            .hub
            .calls
            .fail_all(|_| failure.clone(), &mut Vec::new());
        self.counts.failed_calls(failed);
    }

    /// Submits the calls to this rank that waited for room and were
    /// released since the last round; returns how many.
    fn submit_released(&mut self) -> usize {
        if !self.hub.calls.has_local_releases() {
            // The common round.
            return 0;
        }
        let mut released = std::mem::take(&mut self.released);
        let mut count = 0;
        // A call that cannot be submitted makes room for the next one,
        // which may be released in turn.
        loop {
            self.hub.calls.take_local_releases(&mut released);
            if released.is_empty() {
                break;
            }
            for release in released.drain(..) {
                let ticket = release.ticket;
                let request = release.info.call.request;
                if let Err(error) = submit_local(&self.hub, release) {
                    self.counts.failed();
                    self.hub.calls.unsubmitted(ticket, request, Some(error));
                }
                count += 1;
            }
        }
        self.released = released;
        count
    }

    fn expire_calls(&mut self, budget: usize, now: Instant) -> usize {
        let mut expired = std::mem::take(&mut self.expired);
        expired.clear();
        let unsent = self.hub.calls.expire(now, budget, &mut expired);
        (0..unsent).for_each(|_| self.counts.deadline_expiry());
        for info in &expired {
            self.counts.deadline_expiry();
            self.hub.queue_cancel(info.peer, info.call);
        }
        let count = expired.len() + unsent;
        self.expired = expired;
        count
    }

    /// Hands queued cancellations to the control lane (at most `budget`).
    pub(crate) fn pump_cancels(&mut self, budget: usize) -> usize {
        if self.cancel_retry.is_none() && self.hub.cancels.is_empty() {
            // The common round: two loads instead of a failed pop.
            return 0;
        }
        let mut sent = 0;
        while sent < budget {
            let Some((peer, call)) = self.cancel_retry.take().or_else(|| self.hub.cancels.pop())
            else {
                break;
            };
            let frame = frames::cancel(self.hub.rank, call);
            let len = frame.len() as u64;
            match self
                .hub
                .handle
                .try_send_quiet(peer, Channel::Control, frame)
            {
                Ok(()) => {
                    self.counts.bytes_sent(len);
                    sent += 1;
                }
                Err(refused) if matches!(refused.kind(), SendErrorKind::QueueFull { .. }) => {
                    self.cancel_retry = Some((peer, call));
                    break;
                }
                // Peer down or transport closed: nothing left to cancel.
                Err(_) => Counters::bump(&self.hub.counters.cancels_undeliverable),
            }
        }
        sent
    }
}
