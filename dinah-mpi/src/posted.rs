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
use std::time::Instant;

use dinah_core::{Rank, WorldSize};
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
    /// large tag (whole, or as a head and a tail).
    Announced(large::Announced),
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
        }
    }

    /// Has the earliest posted receive completed? Tests it (one
    /// `MPI_Test`) unless it was found complete already.
    fn ready(&mut self) -> bool {
        if self.arrived.is_some() {
            return true;
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
    /// posted again at the back.
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
        self.slots.push_back(OwnedRequest::post(
            &comm.any_process(),
            self.stream.tag(),
            arrival.buffer,
        ));
        Some((from, taken))
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

    /// Has a message arrived on either lane? One `MPI_Test` per lane at
    /// most.
    pub(crate) fn any_ready(&mut self) -> bool {
        // Both lanes are tested: each test is also a round of MPI progress.
        let control = self.rings[0].ready();
        self.rings[1].ready() || control
    }

    /// Cancels every posted receive of both lanes and tests them until
    /// they completed, for [`CANCEL_ROUNDS`] rounds and then until
    /// `deadline` (a message that arrived before the cancellation is
    /// dropped: the transport is closing). Returns the receives that did
    /// not complete, and their bytes, which are leaked.
    pub(crate) fn cancel(&mut self, deadline: Instant) -> (u64, u64) {
        for ring in &mut self.rings {
            ring.arrived = None;
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
            let slots = ring.slots.len() as u64;
            leaked.0 += slots;
            leaked.1 += slots * SLOT as u64;
            ring.slots.clear();
        }
        leaked
    }
}
