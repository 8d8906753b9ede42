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
    /// If `to` is not a rank of the world.
    #[doc(hidden)]
    pub fn send_announcement_for_tests(&self, to: Rank, channel: Channel, len: usize) {
        let message = large::announcement(len);
        let dest = i32::try_from(to.get()).expect("a rank of the world");
        self.comm
            .get()
            .process_at_rank(dest)
            .send_with_tag(&message[..], Stream::of(channel).tag());
    }

    /// Sends `to` on `channel`'s lane the announcement of a split frame of
    /// `head` and a tail of `announced` bytes of `width`, then `head` and
    /// `tail` on the lane's large tag, blocking: a sender whose tail is not
    /// what it announced.
    ///
    /// # Panics
    ///
    /// If `to` is not a rank of the world.
    #[doc(hidden)]
    pub fn send_split_for_tests(
        &self,
        to: Rank,
        channel: Channel,
        (head, tail): (&[u8], &[u8]),
        announced: usize,
        width: dinah_core::wire::TailWidth,
    ) {
        let place = (head.len(), announced, width);
        self.send_parts_for_tests(to, channel, (head.len(), head), &[place], &[tail]);
    }

    /// Sends `to` on `channel`'s lane the announcement of a frame of a
    /// head of `announced_head` bytes and parts at `places` (place, length
    /// and width each; the last the frame's tail), then `head` and `parts`
    /// on the lane's large tag, blocking: a sender whose messages need not
    /// be what it announced.
    ///
    /// # Panics
    ///
    /// If `to` is not a rank of the world, or `places` is empty or longer
    /// than an announcement lists.
    #[doc(hidden)]
    pub fn send_parts_for_tests(
        &self,
        to: Rank,
        channel: Channel,
        (announced_head, head): (usize, &[u8]),
        places: &[(usize, usize, dinah_core::wire::TailWidth)],
        parts: &[&[u8]],
    ) {
        assert!((1..=large::MAX_PARTS).contains(&places.len()));
        let announcement = large::parts_announcement(announced_head, places.iter().copied(), true);
        let dest = i32::try_from(to.get()).expect("a rank of the world");
        let process = self.comm.get().process_at_rank(dest);
        let stream = Stream::of(channel);
        process.send_with_tag(&announcement[..], stream.tag());
        // Each message in pieces by its own length, as a sender does.
        for message in std::iter::once(head).chain(parts.iter().copied()) {
            for range in crate::pieces::pieces(message.len()) {
                process.send_with_tag(&message[range], stream.large().tag());
            }
        }
    }

    /// How many receives are posted on the control and the action lane's
    /// tag right now (see `posted.rs`).
    #[doc(hidden)]
    pub fn posted_receives_for_tests(&self) -> [usize; 2] {
        self.posted.posted_counts()
    }

    /// How many messages this driver took from peers that broke the
    /// protocol and dropped unread.
    #[doc(hidden)]
    pub fn dropped_from_violators_for_tests(&self) -> u64 {
        self.dropped_from_violators
    }
}
