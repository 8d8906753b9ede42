//! Receives kept posted on each lane's tag, from any source.
//!
//! The driver keeps a ring of immediate receives (`MPI_Irecv` from
//! `MPI_ANY_SOURCE`) posted on each lane's tag, each into a buffer of
//! [`SLOT`] bytes, the most a message on a lane's tag carries (longer
//! frames are announced, see `large.rs`). A message that arrives is
//! received straight into the first free posted buffer, and finding it is
//! one `MPI_Test` of the ring's first request, where a matched probe
//! (`MPI_Improbe`, then `MPI_Imrecv`) would cost two calls and a round of
//! the library's progress before the message were even being received.
//!
//! MPI matches a tag's messages to the receives posted for it in the order
//! they were posted, and one source's messages in the order they were
//! sent. So the ring's first receive always holds the earliest message
//! matched, and taking messages from the front keeps each source's order.
//! It also means a first receive that is matched but incomplete holds up
//! every later one; every message on a lane's tag is therefore within the
//! common eager limits (see [`SLOT`]), so it is whole once matched.
//! A taken message is copied out of its slot (into a frame buffer, or a
//! batch buffer for a batch), and the slot's receive is posted again at
//! the back of the ring with the same buffer, so the ring never allocates
//! after it is built. The copy costs a message's own length, where handing
//! the buffer out would cost zeroing a fresh one.
//!
//! Two things keep MPI calls off the path from a message's arrival to the
//! answer the owner sends:
//!
//! - The first slot a poll takes from a ring is posted again only once
//!   the answer can have gone out: after the sends of the next flush or
//!   poll, and in any case before the owner waits ([`Posted::repost`]).
//!   Posting a receive is a library call, and the answer to the message
//!   just taken should not wait for it. Later slots taken in the same
//!   poll, and a ring's last posted slot, are posted again at once, so a
//!   burst keeps the ring receiving.
//! - The idle look ([`Posted::any_ready`]) tests both rings' first
//!   receives with one `MPI_Testsome`; the poll right after it does not
//!   test a ring again where the look has just tested it: its first
//!   receive if the look found it incomplete, and, once the message the
//!   look found is taken, the next one ([`Looked`]). Each test is a round
//!   of the library's progress. Leaving one out bets that nothing was
//!   matched in between; a message that was (by the progress of the
//!   look's or the poll's other calls) is taken by the next poll or look
//!   instead, and the runtime polls again at once after a poll that took
//!   something. One peer's messages are matched in the order it sent them,
//!   so when the look finds a request, a cancellation sent before it is
//!   complete too, and the poll hands it out first. A poll that follows no
//!   look tests both rings before it takes from either, the action ring
//!   first ([`Posted::look_for_poll`]), for the same reason.
//!
//! The rings are fixed when the driver starts ([`MpiConfig::posted_receives`]
//! slots per lane) and are not counted as retained bytes: like the pooled
//! buffers, they hold no frame until a message is taken out of them.
//! Messages beyond them wait inside MPI until a slot is posted again.
//! Closing cancels every posted receive (`MPI_Cancel`) and tests them to
//! completion; a receive that does not complete in time is leaked with its
//! buffer, as any request MPI may still hold.
//!
//! [`MpiConfig::posted_receives`]: crate::MpiConfig::posted_receives

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::time::Instant;

use dinah_core::{Rank, WorldSize};
use mpi::ffi::{MPI_Request, MPI_Status};
use mpi::point_to_point::Status;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

use crate::coalesce::is_batch;
use crate::large::{self, SLOT};
use crate::owned::{Arrival, OwnedRequest};
use crate::pool::BufferPool;
use crate::tags::Stream;

/// What the front of a ring held.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A message: one frame or a batch, copied out of its slot.
    Message(Vec<u8>),
    /// The announcement of a large frame, which follows on the lane's
    /// large tag (whole, or as a head and its parts).
    Announced(large::Announced),
}

/// What the last look (the owner's idle look, or a poll's own) found at a
/// ring's first receive, for the poll that follows: which test that poll
/// leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looked {
    /// No look since the last test: test as usual.
    Nothing,
    /// The look found the first receive incomplete: the next test is
    /// left out, the look having just made it.
    Empty,
    /// An idle look found a message: once it is taken, the test of the
    /// next receive is left out. (After a poll's own look the receives
    /// behind a message found are tested as usual, so a burst is taken in
    /// one poll.)
    Found,
}

impl Looked {
    /// What a look that found (or did not find) a message leaves for the
    /// poll.
    fn after_look(found: bool) -> Self {
        if found { Self::Found } else { Self::Empty }
    }

    /// What is left once the poll took the ring's earliest message.
    fn after_take(self) -> Self {
        match self {
            Self::Found => Self::Empty,
            Self::Nothing | Self::Empty => Self::Nothing,
        }
    }

    /// Whether the next test may be left out; consumes the memo if so.
    fn skip_test(&mut self) -> bool {
        if *self == Self::Empty {
            *self = Self::Nothing;
            return true;
        }
        false
    }
}

/// The receives posted on one lane's tag.
#[derive(Debug)]
struct Ring {
    stream: Stream,
    /// Posted receives, in the order they were posted: the order MPI
    /// matches the tag's messages to them.
    slots: VecDeque<OwnedRequest>,
    /// The first slot's completed receive, tested and not yet taken; its
    /// slot is out of `slots` until then.
    arrived: Option<Arrival>,
    /// The buffer of a slot taken and not posted again yet (see
    /// [`Posted::repost`]).
    unposted: Option<Vec<u8>>,
    /// What the last idle look found.
    looked: Looked,
}

impl Ring {
    fn new(comm: &SimpleCommunicator, stream: Stream, depth: usize) -> Self {
        let slots = (0..depth)
            .map(|_| OwnedRequest::post(&comm.any_process(), stream.tag(), vec![0; SLOT]))
            .collect();
        Self {
            stream,
            slots,
            arrived: None,
            unposted: None,
            looked: Looked::Nothing,
        }
    }

    /// Has the earliest posted receive completed? Tests it (one
    /// `MPI_Test`) unless it was found complete already.
    fn ready(&mut self) -> bool {
        if self.arrived.is_some() {
            return true;
        }
        if self.looked.skip_test() {
            return false;
        }
        let Some(front) = self.slots.front_mut() else {
            return false;
        };
        let Some(arrival) = front.test_arrival() else {
            return false;
        };
        let _ = self.slots.pop_front();
        self.arrived = Some(arrival);
        true
    }

    /// The earliest message, if it arrived, and its sender; its slot is
    /// posted again at the back, at once or (the first slot a poll takes)
    /// by [`repost`](Self::repost).
    fn take(
        &mut self,
        comm: &SimpleCommunicator,
        world: WorldSize,
        pool: &mut BufferPool,
    ) -> Option<(Rank, Taken)> {
        if !self.ready() {
            return None;
        }
        let arrival = self.arrived.take()?;
        self.looked = self.looked.after_take();
        let from = crate::comm::rank_in(world, arrival.source);
        let message = &arrival.buffer[..arrival.len.min(SLOT)];
        let taken = if let Some(announced) = large::announced(message) {
            Taken::Announced(announced)
        } else if is_batch(message) {
            let mut batch = pool.take_batch();
            batch.extend_from_slice(message);
            Taken::Message(batch)
        } else {
            Taken::Message(BufferPool::copy(message))
        };
        // Deferred only while another receive stays posted: a ring of one
        // (or a burst that took the rest) posts at once and keeps receiving.
        if self.unposted.is_none() && !self.slots.is_empty() {
            self.unposted = Some(arrival.buffer);
        } else {
            self.post(comm, arrival.buffer);
        }
        Some((from, taken))
    }

    /// Posts a receive into `buffer` at the back of the ring.
    fn post(&mut self, comm: &SimpleCommunicator, buffer: Vec<u8>) {
        self.slots.push_back(OwnedRequest::post(
            &comm.any_process(),
            self.stream.tag(),
            buffer,
        ));
    }

    /// Posts again the slot taken and not posted yet, if any.
    fn repost(&mut self, comm: &SimpleCommunicator) {
        if let Some(buffer) = self.unposted.take() {
            self.post(comm, buffer);
        }
    }

    /// The idle look at the action ring: tests the first receive (unless
    /// it was found complete already) and remembers what it found for the
    /// poll.
    fn look(&mut self) -> bool {
        self.looked = Looked::Nothing;
        let found = self.ready();
        self.looked = Looked::after_look(found);
        found
    }

    /// A poll's look at a ring that no idle look has just tested: tests the
    /// first receive (unless it was found complete already); if it is
    /// incomplete, the poll's own attempt to take from the ring leaves the
    /// test out. A message found is taken as any other, and the receives
    /// behind it are tested as usual.
    fn look_for_poll(&mut self) {
        if self.looked == Looked::Nothing && !self.ready() {
            self.looked = Looked::Empty;
        }
    }

    /// Tests every slot once; drops the completed ones.
    fn test_all(&mut self) {
        self.slots.retain_mut(|slot| slot.test_arrival().is_none());
    }
}

/// How many rounds of tests a close gives its cancelled receives whatever
/// its deadline (they cost no waiting): cancelling a receive that nothing
/// matched completes at the first.
const CANCEL_ROUNDS: u32 = 64;

/// The order a look tests the rings in (by index: the action ring, then
/// the control ring): see the module documentation.
const LOOK_ORDER: [usize; 2] = [1, 0];

/// The rings of posted receives of both lanes.
#[derive(Debug)]
pub(crate) struct Posted {
    /// By [`Stream::LANES`] order: control, then action.
    rings: [Ring; 2],
}

impl Posted {
    /// Posts `depth` receives (at least one) on each lane's tag of `comm`.
    pub(crate) fn new(comm: &SimpleCommunicator, depth: usize) -> Self {
        let depth = depth.max(1);
        Self {
            rings: Stream::LANES.map(|stream| Ring::new(comm, stream, depth)),
        }
    }

    fn ring(&mut self, stream: Stream) -> &mut Ring {
        let index = usize::from(stream != Stream::LANES[0]);
        debug_assert_eq!(self.rings[index].stream, stream, "a lane's stream");
        &mut self.rings[index]
    }

    /// The earliest message that arrived on `stream` (a lane), and its
    /// sender, if one did (see [`Taken`]).
    pub(crate) fn take(
        &mut self,
        comm: &SimpleCommunicator,
        stream: Stream,
        world: WorldSize,
        pool: &mut BufferPool,
    ) -> Option<(Rank, Taken)> {
        self.ring(stream).take(comm, world, pool)
    }

    /// Has a message arrived on either lane? Tests the first posted receive
    /// of both rings with one `MPI_Testsome` (one round of the library's
    /// progress for both, and one consistent look: a control message
    /// matched before the action message found is complete too). The poll
    /// that follows does not test either ring again where this just did
    /// (see [`Looked`]), and hands out the control lane first.
    pub(crate) fn any_ready(&mut self) -> bool {
        let mut found = false;
        // The rings whose first receive is tested, and those requests.
        let mut tested = [0; 2];
        let mut requests = [MaybeUninit::<MPI_Request>::uninit(); 2];
        let mut count = 0;
        for index in LOOK_ORDER {
            let ring = &mut self.rings[index];
            let request = if ring.arrived.is_some() {
                None
            } else {
                ring.slots.front().and_then(OwnedRequest::single_raw)
            };
            match request {
                Some(request) => {
                    requests[count].write(request);
                    tested[count] = index;
                    count += 1;
                }
                // Found already, or no receive posted: as a test tells.
                None => found |= ring.look(),
            }
        }
        if count == 0 {
            return found;
        }
        let mut done: c_int = 0;
        let mut indices: [c_int; 2] = [0; 2];
        let mut statuses = [MaybeUninit::<MPI_Status>::uninit(); 2];
        let n = c_int::try_from(count).expect("two rings");
        // SAFETY: the first `count` requests are live receives, each the
        // first posted one of its ring (none is the null request); the
        // arrays have room for as many indices and statuses; `done` is a
        // valid place for the count. MPI sets each completed request in
        // this copy of the handles to the null request (its ring still
        // holds the handle and lets it go in `arrived` below).
        unsafe {
            mpi::ffi::MPI_Testsome(
                n,
                requests.as_mut_ptr().cast::<MPI_Request>(),
                &mut done,
                indices.as_mut_ptr(),
                statuses.as_mut_ptr().cast::<MPI_Status>(),
            );
        }
        let done = usize::try_from(done).unwrap_or(0).min(count);
        let mut completed = [false; 2];
        for (&at, status) in indices.iter().zip(&statuses).take(done) {
            let at = usize::try_from(at).expect("MPI reports indices below the count");
            completed[at] = true;
            // SAFETY: MPI wrote a status for each completed request.
            let status = Status::from_raw(unsafe { status.assume_init() });
            let ring = &mut self.rings[tested[at]];
            let front = ring.slots.front_mut().expect("the receive tested");
            // SAFETY: MPI completed this very request (its handle was
            // copied from this slot above) and reported `status` for it.
            let arrival = unsafe { front.arrived(&status) };
            ring.arrived = Some(arrival.expect("a posted receive is one request"));
            let _ = ring.slots.pop_front();
        }
        for (&index, &completed) in tested.iter().zip(&completed).take(count) {
            self.rings[index].looked = Looked::after_look(completed);
            found |= completed;
        }
        found
    }

    /// Before a poll takes from the rings: tests each ring that the last
    /// idle look did not just test, the action ring first, as
    /// [`any_ready`](Self::any_ready) does, so that the poll hands out a
    /// control message sent before the action message it finds first. The
    /// poll's takes leave out the tests made here (see [`Looked`]).
    pub(crate) fn look_for_poll(&mut self) {
        for index in LOOK_ORDER {
            self.rings[index].look_for_poll();
        }
    }

    /// How many receives are posted on the control and the action lane's
    /// tag (a slot found complete or taken and not posted again is not).
    #[cfg(feature = "testing")]
    pub(crate) fn posted_counts(&self) -> [usize; 2] {
        self.rings.each_ref().map(|ring| ring.slots.len())
    }

    /// Forgets what the last look found: the owner is about to park, and
    /// the look will be stale by the time it polls again.
    pub(crate) fn forget_looks(&mut self) {
        for ring in &mut self.rings {
            ring.looked = Looked::Nothing;
        }
    }

    /// Posts again the slots taken and not posted yet: once the sends of
    /// the poll that took them are posted, and before the owner waits.
    pub(crate) fn repost(&mut self, comm: &SimpleCommunicator) {
        for ring in &mut self.rings {
            ring.repost(comm);
        }
    }

    /// Cancels every posted receive of both lanes and tests them until
    /// they completed, for [`CANCEL_ROUNDS`] rounds and then until
    /// `deadline` (a message that arrived before the cancellation is
    /// dropped: the transport is closing). Returns the receives that did
    /// not complete, and their bytes, which are leaked.
    pub(crate) fn cancel(&mut self, deadline: Instant) -> (u64, u64) {
        for ring in &mut self.rings {
            ring.arrived = None;
            // Never posted again: not MPI's, nothing to cancel.
            ring.unposted = None;
            ring.slots.iter_mut().for_each(OwnedRequest::cancel);
        }
        let mut rounds = 0;
        loop {
            self.rings.iter_mut().for_each(Ring::test_all);
            rounds += 1;
            if self.rings.iter().all(|ring| ring.slots.is_empty()) {
                break;
            }
            if rounds >= CANCEL_ROUNDS {
                if Instant::now() >= deadline {
                    break;
                }
                std::thread::yield_now();
            }
        }
        // Dropping an incomplete request forgets it and leaks its buffer.
        self.abandon()
    }

    /// Forgets every posted receive without an MPI call (MPI is finalised
    /// or the communicator unusable), leaking their buffers. Returns the
    /// receives and bytes leaked.
    pub(crate) fn abandon(&mut self) -> (u64, u64) {
        let mut leaked = (0, 0);
        for ring in &mut self.rings {
            ring.arrived = None;
            ring.unposted = None;
            let slots = ring.slots.len() as u64;
            leaked.0 += slots;
            leaked.1 += slots * SLOT as u64;
            ring.slots.clear();
        }
        leaked
    }
}

#[cfg(test)]
mod tests {
    use super::Looked;

    #[test]
    fn a_look_that_found_nothing_spares_the_next_test_only() {
        let mut looked = Looked::after_look(false);
        assert!(looked.skip_test(), "the poll right after the look");
        assert!(!looked.skip_test(), "tests again after that");
        assert_eq!(looked, Looked::Nothing);
    }

    #[test]
    fn a_look_that_found_a_message_spares_the_test_after_its_take() {
        let mut looked = Looked::after_look(true);
        assert!(!looked.skip_test(), "the message itself is taken");
        looked = looked.after_take();
        assert!(looked.skip_test(), "the next receive is not tested");
        assert!(!looked.skip_test());
    }

    #[test]
    fn without_a_look_every_test_happens() {
        let mut looked = Looked::Nothing;
        assert!(!looked.skip_test());
        looked = looked.after_take();
        assert!(!looked.skip_test(), "a take outside a look spares nothing");
        // A memo the poll did not consume is dropped by the next take.
        assert_eq!(Looked::Empty.after_take(), Looked::Nothing);
    }
}
