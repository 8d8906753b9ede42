//! What no dinah sender sends, for the transport's own tests (feature
//! `testing`; not part of the crate's API): a test rank uses it to break
//! the protocol on purpose, so that a peer's refusal can be checked.

use dinah_core::Rank;
use dinah_core::wire::Channel;
use mpi::point_to_point::Destination;
use mpi::traits::Communicator;

use super::MpiDriver;
use crate::large;
use crate::tags::Stream;

impl MpiDriver {
    /// Sends `to`, on `channel`'s lane of this driver's communicator, the
    /// announcement of a large frame of `len` bytes, and never the frame.
    /// A receiver refuses an announcement past its `max_frame_bytes` as a
    /// protocol violation; one within the bound waits for a frame that
    /// never comes. Returns once MPI holds the 16 bytes (a standard-mode
    /// send of a message within every eager limit).
    ///
    /// # Panics
    ///
    /// If `len` does not fit a `usize` or `to` is not a rank of the world.
    pub fn send_announcement_for_tests(&self, to: Rank, channel: Channel, len: u64) {
        let len = usize::try_from(len).expect("a length this machine can name");
        let message = large::announcement(len);
        let dest = i32::try_from(to.get()).expect("a rank of the world");
        self.comm
            .get()
            .process_at_rank(dest)
            .send_with_tag(&message[..], Stream::of(channel).tag());
    }
}
