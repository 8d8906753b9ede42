//! Beginning a call: taking its request ID and sending it in one critical
//! section, or holding it when its lane is full.

use dinah_core::Instant;
use dinah_core::wire::{Call, Channel, stamp_request_id};

use crate::transport::Frame;

use super::{CallInfo, Calls, Entry, LocalRelease, State, Ticket};
use crate::transport::TrySendError;

/// How a call beyond its lane's window is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pacing {
    /// Not paced (the runtime's own actions, run inline at the target).
    None,
    /// Waits for room.
    Wait,
    /// Refused at once.
    FailFast,
}

/// How [`Calls::begin`] recorded a call.
#[derive(Debug)]
pub(crate) enum Begun {
    /// Sent to a peer.
    Sent(Ticket),
    /// Waiting for room in its lane; sent (or submitted) later.
    Waiting(Ticket),
    /// A call to this rank, recorded: submit it now.
    Local(LocalRelease),
}

/// Why [`Calls::begin`] did not record a call.
#[derive(Debug)]
pub(crate) enum BeginError {
    /// Every slot of the table is taken.
    Full,
    /// This rank's request IDs to the target are used up.
    Exhausted,
    /// The lane is full and the call asked to fail fast.
    Busy,
    /// The frames of waiting calls would exceed their byte budget.
    WaitingBytes,
    /// The transport refused the call (the call is forgotten, its ID
    /// unused).
    Send(TrySendError),
}

impl Calls {
    /// Records a new call with `deadline` and `frame` (a request frame
    /// whose ID is stamped here).
    ///
    /// If its lane has room (or `pacing` is [`Pacing::None`]), the call
    /// takes the next request ID to `info.peer` and, to a peer, is handed
    /// to the transport while the table is still locked, so that the IDs
    /// to each target follow send order; a send the transport refuses
    /// records nothing and gives the ID to the next call. A call to this
    /// rank comes back as [`Begun::Local`], for the caller to submit.
    ///
    /// If the lane is full, the call waits ([`Pacing::Wait`]) or is
    /// refused ([`Pacing::FailFast`]).
    pub(crate) fn begin(
        &self,
        info: CallInfo,
        deadline: Instant,
        mut frame: Frame,
        pacing: Pacing,
    ) -> Result<Begun, BeginError> {
        let mut guard = self.lock_slots();
        let inner = &mut *guard;
        let lane = match pacing {
            Pacing::None => None,
            Pacing::Wait | Pacing::FailFast => inner.flow.lane(info.peer, info.call.domain),
        };
        if let Some(lane) = lane {
            let window = inner.flow.window(&self.handle, info.peer);
            if !inner.flow.has_room(lane, window) {
                if pacing == Pacing::FailFast {
                    inner.counts.refused_busy += 1;
                    return Err(BeginError::Busy);
                }
                let ticket = self.hold(inner, info, deadline, frame, lane)?;
                drop(guard);
                self.publish_new(deadline);
                return Ok(Begun::Waiting(ticket));
            }
        }
        let id = inner
            .ids
            .peek(info.peer)
            .map_err(|_| BeginError::Exhausted)?;
        let Some(slot) = inner.free.pop() else {
            return Err(BeginError::Full);
        };
        if inner
            .pending
            .insert(id, deadline, Entry::Call(slot))
            .is_err()
        {
            inner.free.push(slot);
            return Err(BeginError::Full);
        }
        stamp_request_id(frame.head_mut(), id).expect("a request frame was just encoded");
        let local = info.peer == self.handle.rank();
        let frame = if local {
            Some(frame)
        } else {
            match self
                .handle
                .try_send_quiet(info.peer, Channel::Action, frame)
            {
                Ok(()) => None,
                Err(refused) => {
                    inner.pending.remove(id);
                    inner.free.push(slot);
                    return Err(BeginError::Send(refused));
                }
            }
        };
        inner.ids.commit(info.peer);
        if let Some(lane) = lane {
            inner.flow.take(lane);
        }
        let entry = &mut inner.slots[slot as usize];
        // The ID is written into the slot's copy, after the copy: writing
        // it into `info` first would make the copy's wide loads wait for
        // that narrow store.
        entry.info.insert(info).call.request = id;
        entry.state = State::Waiting(None);
        entry.lane = lane;
        let ticket = Ticket {
            slot,
            generation: entry.generation,
        };
        drop(guard);
        self.publish_new(deadline);
        Ok(match frame {
            Some(frame) => Begun::Local(LocalRelease {
                ticket,
                info: CallInfo {
                    call: Call {
                        request: id,
                        ..info.call
                    },
                    ..info
                },
                deadline,
                frame,
            }),
            None => Begun::Sent(ticket),
        })
    }
}
