//! Closing without a clean drain, and giving up on what MPI still holds.

use std::time::Instant;

use dinah_core::Rank;

use super::{MpiDriver, Phase};
use crate::farewell;
use crate::send::SendKind;
use crate::tags::Stream;

impl MpiDriver {
    /// Gives up on everything MPI still holds (see
    /// [`TransportDriver::close`](dinah_std::transport::TransportDriver::close)):
    /// with MPI `live`, the posted receives are cancelled first and given a
    /// few rounds of tests, then until `deadline`, to complete.
    pub(super) fn abandon(&mut self, live: bool, deadline: Instant) {
        let sends = self.sends.abandon(&self.handle);
        let (_, receive_bytes) = self.receives.abandon();
        let (_, posted_bytes) = if live {
            self.posted.cancel(deadline)
        } else {
            self.posted.abandon()
        };
        self.leaked.sends += sends.requests;
        self.leaked.bytes += sends.bytes + receive_bytes + posted_bytes;
    }

    /// Closes without a clean drain: goodbyes (if not sent yet), sends given
    /// until `deadline`, then a close marker to every live peer that still
    /// expects something from this rank.
    pub(super) fn close_unclean(&mut self, deadline: Instant) {
        if self.phase != Phase::GoodbyeSent {
            self.post_goodbyes();
        }
        loop {
            let _ = self.sends.complete(&self.handle, &mut self.buffers);
            if self.sends.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
        let peers: Vec<Rank> = self
            .peers
            .others()
            .filter(|&peer| !self.peers.is_down(peer))
            .collect();
        for peer in peers {
            let lost = self.sends.pending_to(peer);
            if self.peers.is_drained(peer) && lost == 0 {
                // It said goodbye and will drain this rank from its goodbyes.
                continue;
            }
            let marker = farewell::close_marker(self.session, lost);
            self.sends.post(
                self.comm.get(),
                peer,
                Stream::Close,
                marker,
                SendKind::Internal,
            );
        }
        let _ = self.sends.complete(&self.handle, &mut self.buffers);
    }
}
