//! Messages being received and handed out, per stream, in order.
//!
//! Messages come in three ways. On a lane's tag they arrive in the
//! receives the driver keeps posted (`posted.rs`); one that carries a lone
//! frame while nothing of its lane waits here is handed out by the driver
//! at once, any other is queued here already received
//! ([`Receives::push_received`]); a large frame announced
//! there is received from its sender on the lane's large tag
//! ([`Receives::start_large`], see `large.rs`; a frame held in parts as
//! a receive for its head and one for each part, each into its own
//! buffer). On the hello and close
//! tags, [`Receives::probe`] asks MPI for the next message from any source
//! (`MPI_Improbe`): a matched message is removed from MPI's matching
//! queue, so no other probe or receive can take it, and an immediate
//! matched receive (`MPI_Imrecv`) into a buffer sized exactly from the
//! probed count is started at once. Small messages have usually arrived
//! whole and complete on the first test; large ones (MPI's rendezvous
//! protocol) complete after later progress.
//!
//! Receives complete in any order, but messages of one stream from one
//! source are handed out in the order they were queued, which is the
//! order the source sent them: [`Receives::take_ready`] skips a source
//! whose earlier message is still incomplete. A slow large frame from one
//! source therefore never holds up other sources.
//!
//! The number of messages queued is bounded by the caller, per stream (so
//! large action messages being received never keep a cancellation from
//! being handed out); their buffers are what the driver reports as
//! retained receive bytes.

use std::collections::VecDeque;

use dinah_core::Rank;
use dinah_core::WorldSize;
use dinah_core::wire::TailWidth;
use dinah_std::transport::{Frame, Tail, frame_buffers};

use crate::large::AnnouncedPart;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, Source};

use crate::coalesce::{Unbatch, is_batch};
use crate::comm;
use crate::owned::{NumbersRequest, OwnedRequest, received_len};
use crate::pool::BufferPool;
use crate::tags::Stream;

/// One matched message being received (or a frame held in parts: its
/// head and its parts).
#[derive(Debug)]
struct Pending {
    from: Rank,
    request: OwnedRequest,
    /// The bytes, once the receive completed.
    done: Option<Vec<u8>>,
    /// A frame's parts, received apart, each with its place in the head.
    parts: Vec<(usize, TailReceive)>,
    /// Is the last part the frame's tail?
    tail: bool,
    /// How far its frames were handed out (a batch may be handed out
    /// over several polls).
    unbatch: Unbatch,
}

/// The receive of a part of a frame.
#[derive(Debug)]
struct TailReceive {
    request: TailRequest,
    done: Option<Tail>,
    /// The bytes its buffer counted for when it was queued (a tail that
    /// arrives shorter than announced may come back in a smaller one).
    capacity: usize,
}

/// A part's receive: into bytes, or into numbers of the part's width.
#[derive(Debug)]
enum TailRequest {
    Bytes(OwnedRequest),
    Numbers(NumbersRequest),
}

impl TailRequest {
    fn test(&mut self) -> Option<Tail> {
        match self {
            Self::Bytes(request) => request.test().map(Tail::from),
            Self::Numbers(request) => request.test(),
        }
    }

    fn is_pending(&self) -> bool {
        match self {
            Self::Bytes(request) => request.is_pending(),
            Self::Numbers(request) => request.is_pending(),
        }
    }

    fn capacity(&self) -> usize {
        match self {
            Self::Bytes(request) => request.capacity(),
            Self::Numbers(request) => request.capacity(),
        }
    }
}

impl Pending {
    /// Tests what is incomplete; returns whether anything completed.
    fn test(&mut self) -> bool {
        let mut any = false;
        if self.done.is_none() {
            self.done = self.request.test();
            any |= self.done.is_some();
        }
        for (_, part) in self
            .parts
            .iter_mut()
            .filter(|(_, part)| part.done.is_none())
        {
            part.done = part.request.test();
            any |= part.done.is_some();
        }
        any
    }

    /// Has everything arrived?
    fn is_complete(&self) -> bool {
        self.done.is_some() && self.parts.iter().all(|(_, part)| part.done.is_some())
    }

    /// The buffers' capacity.
    fn capacity(&self) -> usize {
        let head = self
            .done
            .as_ref()
            .map_or(self.request.capacity(), Vec::capacity);
        let parts: usize = self.parts.iter().map(|(_, part)| part.capacity).sum();
        head + parts
    }
}

/// The pending receives of every stream a driver polls.
#[derive(Debug)]
pub(crate) struct Receives {
    world: WorldSize,
    /// Per [`Stream::index`], in the order they were taken or matched.
    pending: [VecDeque<Pending>; Stream::COUNT],
    bytes: u64,
    /// Scratch: sources whose earliest pending message is incomplete.
    blocked: Vec<bool>,
}

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing is waiting on that stream.
    Empty,
    /// A message from `from` of `len` bytes is being received.
    Started {
        /// The sender.
        from: Rank,
        /// Its length in bytes.
        len: usize,
    },
}

impl Receives {
    /// No pending receives, for a communicator of `world` ranks.
    pub(crate) fn new(world: WorldSize) -> Self {
        Self {
            world,
            pending: std::array::from_fn(|_| VecDeque::new()),
            bytes: 0,
            blocked: vec![false; world.get() as usize],
        }
    }

    /// Matches the next message of `stream` from any source and starts
    /// receiving it (into a buffer from `pool` if it is batch-sized).
    pub(crate) fn probe(
        &mut self,
        comm: &SimpleCommunicator,
        stream: Stream,
        pool: &mut BufferPool,
    ) -> Probe {
        let Some((message, status)) = comm
            .any_process()
            .immediate_matched_probe_with_tag(stream.tag())
        else {
            return Probe::Empty;
        };
        let len = received_len(&status);
        let from = comm::rank_in(self.world, status.source_rank());
        let request = OwnedRequest::receive(message, pool.take_len(len));
        self.queue(stream, from, request, None, (Vec::new(), false));
        Probe::Started { from, len }
    }

    /// Queues a message behind `stream`'s earlier ones: being received by
    /// `request`, or received already (`done`), and a frame's parts being
    /// received (each with its place in the head; the last the frame's
    /// tail if said). Its buffers count whole, whatever the lengths.
    fn queue(
        &mut self,
        stream: Stream,
        from: Rank,
        request: OwnedRequest,
        done: Option<Vec<u8>>,
        (parts, tail): (Vec<(usize, TailRequest)>, bool),
    ) {
        let parts = parts
            .into_iter()
            .map(|(at, request)| {
                let receive = TailReceive {
                    capacity: request.capacity(),
                    request,
                    done: None,
                };
                (at, receive)
            })
            .collect();
        let pending = Pending {
            from,
            request,
            done,
            parts,
            tail,
            unbatch: Unbatch::Start,
        };
        self.bytes += pending.capacity() as u64;
        self.pending[stream.index()].push_back(pending);
    }

    /// Queues `bytes`, a message from `from` on `stream` already received
    /// (taken from a posted receive), behind the stream's earlier ones.
    pub(crate) fn push_received(&mut self, stream: Stream, from: Rank, bytes: Vec<u8>) {
        self.queue(
            stream,
            from,
            OwnedRequest::done(),
            Some(bytes),
            (Vec::new(), false),
        );
    }

    /// Starts receiving the large frame that `from` announced on `stream`
    /// (a lane), from the lane's large tag: `len` bytes, or for a frame
    /// held in parts a head of `len` bytes and each of `parts`, each into
    /// its own buffer (MPI matches them in the order they were sent); a
    /// part that packs numbers into a buffer of such numbers. The last
    /// part is the frame's tail if `tail`. Queues it in the announcement's
    /// place: later messages from `from` on `stream` wait for it. The
    /// lengths were checked against the frame limit.
    pub(crate) fn start_large(
        &mut self,
        comm: &SimpleCommunicator,
        stream: Stream,
        from: Rank,
        (len, parts, tail): (usize, &[AnnouncedPart], bool),
        pool: &mut BufferPool,
    ) {
        let source = i32::try_from(from.get()).expect("ranks of an MPI communicator fit an i32");
        let process = comm.process_at_rank(source);
        let tag = stream.large().tag();
        let request = OwnedRequest::post_pieces(&process, tag, pool.take_len(len));
        // Each part becomes a decoded value: a spare large buffer of this
        // thread that holds it when there is one (a large frame this rank
        // sent earlier, whose pages are already mapped), else a new one of
        // exactly its length; past the batch sizes, so never a pooled batch
        // buffer. MPI writes it without its bytes being zeroed first. A
        // part of numbers goes into a buffer of their width (a spare one
        // of this thread, numbers it sent earlier, when there is one),
        // which the decoded vector takes over.
        let parts = parts
            .iter()
            .map(|part| {
                let (at, len) = (part.at as usize, part.len as usize);
                let request = match part.width.for_len(len) {
                    TailWidth::One => TailRequest::Bytes(OwnedRequest::post_spare(
                        &process,
                        tag,
                        frame_buffers::take(len),
                        len,
                    )),
                    width => TailRequest::Numbers(NumbersRequest::post(
                        &process,
                        tag,
                        frame_buffers::take_numbers(width, len),
                    )),
                };
                (at, request)
            })
            .collect();
        self.queue(stream, from, request, None, (parts, tail));
    }

    /// Tests the incomplete receives of every stream (without handing
    /// anything out). Returns whether any completed.
    pub(crate) fn poll_ready(&mut self) -> bool {
        let mut any = false;
        for pending in self.pending.iter_mut().flatten() {
            any |= pending.test();
        }
        any
    }

    /// Hands out the frames of `stream`'s completed messages, each
    /// source's in matching order, to `deliver`, until `max` of them
    /// counted: `deliver` returns whether the frame counts (an event for
    /// the caller's budget) or was absorbed (a goodbye). Returns how many
    /// counted.
    ///
    /// On a stream that carries batches (`batched`, see `coalesce.rs`), a
    /// batch's frames are copied out one by one, and when the budget ends
    /// inside a batch the rest of it stays first in line for its source;
    /// any other message is handed out whole, without a copy unless it was
    /// received into a pooled buffer. Pooled buffers go back to `pool`
    /// once their frames are out.
    pub(crate) fn take_ready(
        &mut self,
        stream: Stream,
        batched: bool,
        max: usize,
        pool: &mut BufferPool,
        mut deliver: impl FnMut(Rank, Frame) -> bool,
    ) -> usize {
        self.blocked.iter_mut().for_each(|b| *b = false);
        let queue = &mut self.pending[stream.index()];
        let mut counted = 0;
        let mut index = 0;
        while index < queue.len() && counted < max {
            let from = queue[index].from;
            if self.blocked[from.index()] {
                index += 1;
                continue;
            }
            let entry = &mut queue[index];
            entry.test();
            if !entry.is_complete() {
                // Later messages from this source wait for this one.
                self.blocked[from.index()] = true;
                index += 1;
                continue;
            }
            let Some(bytes) = entry.done.take() else {
                // Complete means received: not reached.
                index += 1;
                continue;
            };
            let parted = !entry.parts.is_empty();
            if entry.unbatch == Unbatch::Start && (parted || !(batched && is_batch(&bytes))) {
                // One frame: handed out whole (or in its parts), without a
                // copy unless its buffer is the pool's.
                let Some(entry) = queue.remove(index) else {
                    continue;
                };
                let parts_capacity: usize = entry.parts.iter().map(|(_, p)| p.capacity).sum();
                self.bytes -= (bytes.capacity() + parts_capacity) as u64;
                let head = if BufferPool::is_batch(&bytes) {
                    let head = BufferPool::copy(&bytes);
                    pool.give(bytes);
                    head
                } else {
                    bytes
                };
                if deliver(from, assemble(head, entry.parts, entry.tail)) {
                    counted += 1;
                }
                continue;
            }
            // A batch: its frames, copied out, until the budget ends.
            while counted < max {
                let Some(range) = entry.unbatch.next(&bytes) else {
                    break;
                };
                if deliver(from, Frame::whole(BufferPool::copy(&bytes[range]))) {
                    counted += 1;
                }
            }
            if entry.unbatch.is_done() {
                let _ = queue.remove(index);
                self.bytes -= bytes.capacity() as u64;
                pool.give(bytes);
            } else {
                // The budget ended inside this batch: the rest waits, and
                // so does everything after it from this source.
                entry.done = Some(bytes);
                self.blocked[from.index()] = true;
                index += 1;
            }
        }
        counted
    }

    /// Pending receives of `stream` (complete or not).
    pub(crate) fn len_of(&self, stream: Stream) -> usize {
        self.pending[stream.index()].len()
    }

    /// Pending receives of all streams (complete or not).
    pub(crate) fn len(&self) -> usize {
        self.pending.iter().map(VecDeque::len).sum()
    }

    /// Bytes the pending receives' buffers occupy (their capacities: a
    /// pooled buffer counts whole).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives up on every pending receive: incomplete ones are forgotten
    /// and their buffers leaked (MPI may still write them); completed ones
    /// are freed. Returns the leaked (requests, bytes).
    pub(crate) fn abandon(&mut self) -> (u64, u64) {
        let mut leaked = (0, 0);
        for pending in self.pending.iter_mut().flat_map(std::mem::take) {
            if pending.request.is_pending() {
                leaked.0 += 1;
                leaked.1 += pending.request.capacity() as u64;
            }
            for (_, part) in pending.parts {
                if part.request.is_pending() {
                    leaked.0 += 1;
                    leaked.1 += part.request.capacity() as u64;
                }
            }
        }
        self.bytes = 0;
        leaked
    }
}

/// The frame of a received `head` and `parts` (each with its place in the
/// head; the last the frame's tail if `tail`).
///
/// The places were checked to be in order within the announced head; a
/// head that arrived shorter than announced moves the places past its end
/// to its end, so the frame still holds every byte received and the
/// runtime refuses it as it refuses any frame whose parts do not match
/// its length table.
fn assemble(head: Vec<u8>, mut parts: Vec<(usize, TailReceive)>, tail: bool) -> Frame {
    let last = if tail { parts.pop() } else { None };
    let tail = last.and_then(|(_, part)| part.done).unwrap_or_default();
    let end = head.len();
    let middle = parts
        .into_iter()
        .map(|(at, part)| (at.min(end), part.done.unwrap_or_default()))
        .collect();
    Frame::with_middle(head, middle, tail)
}
