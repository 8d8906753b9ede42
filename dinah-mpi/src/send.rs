//! Sends in flight: posted immediately, tracked until MPI completes them.
//!
//! The driver turns the frames it takes from the handle into immediate
//! sends (one per frame, or one per batch of small frames, see
//! `coalesce.rs`) and keeps each here until MPI reports it complete. Completion of a
//! standard-mode send means MPI no longer needs the buffer, not that the
//! peer received it: delivery is what the goodbye counts establish.
//!
//! # Buffers and requests
//!
//! Each buffer is a `Vec<u8>` taken apart for the duration of the send
//! ([`Lent`], lent to MPI as a `'static` slice under the `mpi` crate's
//! [`StaticScope`]) and rebuilt into its vector once MPI completed the
//! request; a batch's buffer then goes back to the driver's pool
//! (`pool.rs`). A frame's part of wider numbers (a `Vec<f64>` handed over
//! whole, see `dinah_std::transport::Tail`) is kept whole instead, its
//! allocation untouched until the send completes, and then goes to the
//! thread's spare buffers, where the receive of a part of its width takes
//! it (`frame_buffers::take_numbers`). The requests are kept as raw `MPI_Request` handles in one
//! array, so a single `MPI_Testsome` per call tests them all (one round
//! of MPI progress instead of one per incomplete request). A send still
//! incomplete when the transport closes is abandoned: its request is never
//! completed and its buffer is leaked, so it stays valid for whatever MPI
//! may still do with it.
//!
//! # Accounting
//!
//! A frame taken from the handle stays counted by the handle (a send
//! ticket and its bytes) until [`TransportHandle::complete_sends`] is
//! called for it (with the rest of its batch), exactly once: here when its request completes, or in
//! [`Sends::abandon`] when the transport closes first. The transport's own
//! messages (hello, goodbyes, close markers) are counted by the driver.

use std::fmt;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::raw::c_int;

use dinah_core::Rank;
use dinah_core::wire::Channel;
use dinah_std::transport::{Tail, TransportHandle, frame_buffers};
use mpi::ffi::{MPI_Request, MPI_Status};
use mpi::request::StaticScope;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, Destination};

use crate::owned::Lent;
use crate::pieces::pieces;
use crate::pool::BufferPool;
use crate::tags::Stream;

/// Who accounts for a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendKind {
    /// Frames taken from the handle on this lane, sent as one message
    /// (more than one when they were batched, see `coalesce.rs`).
    Frames {
        /// Their lane.
        channel: Channel,
        /// How many.
        frames: usize,
        /// Their own bytes, as the handle counts them (without a batch's
        /// framing).
        bytes: usize,
    },
    /// The transport's own message.
    Internal,
}

/// The buffer a send in flight lends MPI. Neither kind frees its buffer
/// when dropped: a send that never completes leaks it.
#[derive(Debug)]
enum Held {
    /// Bytes, taken apart; back to the pool once sent.
    Bytes(Lent),
    /// A tail of wider numbers, kept whole: nothing moves, writes or frees
    /// its allocation while MPI reads it; a spare buffer once sent.
    Numbers(ManuallyDrop<Tail>),
}

impl Held {
    fn new(bytes: Tail) -> Self {
        match bytes.into_bytes() {
            Ok(bytes) => Self::Bytes(Lent::new(bytes)),
            Err(numbers) => Self::Numbers(ManuallyDrop::new(numbers)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Bytes(lent) => lent.len(),
            Self::Numbers(tail) => tail.len(),
        }
    }

    /// The bytes, for MPI to read.
    ///
    /// # Safety
    ///
    /// The caller must not call [`Held::release`] while the returned slice
    /// (or what MPI does with it) is in use.
    unsafe fn as_static(&self) -> &'static [u8] {
        match self {
            // SAFETY: the caller's promise is `Lent::as_static`'s.
            Self::Bytes(lent) => unsafe { lent.as_static() },
            Self::Numbers(tail) => {
                let bytes = tail.as_bytes();
                // SAFETY: the bytes are the heap allocation of the tail's
                // vector, which stays where it is when the `Held` moves,
                // is never written (nothing hands out `&mut` to it) and is
                // freed only by `release`, which the caller promises not
                // to call while the slice is used; `ManuallyDrop` keeps a
                // drop from freeing it.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) }
            }
        }
    }

    /// Gives the buffer back to `pool` (bytes) or to this thread's spare
    /// buffers (numbers, see `frame_buffers::give_tail`).
    ///
    /// # Safety
    ///
    /// MPI must be done with the buffer (its request completed), and no
    /// slice from [`Held::as_static`] may be used afterwards.
    unsafe fn release(self, pool: &mut BufferPool) {
        match self {
            // SAFETY: the caller's promise is `Lent::into_vec`'s; the
            // buffer was lent initialised.
            Self::Bytes(lent) => pool.give(unsafe { lent.into_vec(0) }),
            Self::Numbers(tail) => frame_buffers::give_tail(ManuallyDrop::into_inner(tail)),
        }
    }
}

/// What a send in flight owns besides its request.
#[derive(Debug)]
enum InFlight {
    /// A whole message.
    Whole {
        /// The lent buffer MPI reads from.
        buffer: Held,
        to: Rank,
        kind: SendKind,
    },
    /// A piece of a long message (see `pieces.rs`), whose buffer and
    /// accounting its [`Group`] holds.
    Piece {
        /// Its group's [`Group::id`].
        group: u64,
        to: Rank,
    },
}

impl InFlight {
    fn to(&self) -> Rank {
        match self {
            Self::Whole { to, .. } | Self::Piece { to, .. } => *to,
        }
    }
}

/// A long message sent in pieces: its buffer, released once every piece's
/// send completed.
#[derive(Debug)]
struct Group {
    id: u64,
    buffer: Held,
    kind: SendKind,
    /// Pieces whose sends have not completed.
    left: usize,
}

/// Every send this driver posted and MPI has not completed yet.
///
/// Invariant: `requests[i]` is the live request of the send
/// `entries[i]`, which reads its own buffer or a range of its group's;
/// MPI may read that buffer until the request (for a group, every one of
/// its requests) completes, and nothing frees it before.
pub(crate) struct Sends {
    requests: Vec<MPI_Request>,
    entries: Vec<InFlight>,
    /// The long messages in flight in pieces (few at a time).
    groups: Vec<Group>,
    /// The next group's ID.
    next_group: u64,
    /// Scratch for `MPI_Testsome`.
    indices: Vec<c_int>,
    statuses: Vec<MaybeUninit<MPI_Status>>,
    /// Handle frames in flight, per lane ([`Channel::index`]).
    frames: [usize; 2],
    /// Internal messages in flight and their bytes.
    internal: usize,
    internal_bytes: u64,
}

/// What [`Sends::abandon`] left to MPI: requests forgotten, buffers leaked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Abandoned {
    /// Requests forgotten.
    pub(crate) requests: u64,
    /// Bytes of their leaked buffers.
    pub(crate) bytes: u64,
}

impl Sends {
    /// An empty set with room for `capacity` sends before it reallocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            requests: Vec::with_capacity(capacity),
            entries: Vec::with_capacity(capacity),
            groups: Vec::new(),
            next_group: 0,
            indices: Vec::with_capacity(capacity),
            statuses: Vec::with_capacity(capacity),
            frames: [0; 2],
            internal: 0,
            internal_bytes: 0,
        }
    }

    /// Posts an immediate (standard mode) send of `bytes` to `to` on
    /// `stream`; on a large tag, a long message as one send per piece
    /// (see `pieces.rs`), posted in order.
    pub(crate) fn post(
        &mut self,
        comm: &SimpleCommunicator,
        to: Rank,
        stream: Stream,
        bytes: impl Into<Tail>,
        kind: SendKind,
    ) {
        let buffer = Held::new(bytes.into());
        let len = buffer.len() as u64;
        let dest = i32::try_from(to.get()).expect("ranks of an MPI communicator fit an i32");
        let process = comm.process_at_rank(dest);
        // SAFETY: the buffer is rebuilt (and maybe freed) only by
        // `complete`, after MPI reported this send (every piece's) complete,
        // and leaked by `abandon` otherwise, so the `'static` borrow never
        // dangles. Nothing writes it while the send is in flight.
        let data: &'static [u8] = unsafe { buffer.as_static() };
        let send = |data: &'static [u8]| {
            let request = process.immediate_send_with_tag(StaticScope, data, stream.tag());
            // SAFETY: `into_raw` requires the request to be completed within
            // its scope's lifetime: the scope is `'static`, and the request
            // is completed by `MPI_Testsome` in `complete` or abandoned with
            // its buffer leaked, which keeps every buffer it reads valid
            // forever.
            let (raw, _, StaticScope) = unsafe { request.into_raw() };
            raw
        };
        // Only a large tag's long messages are split; others are not even
        // measured for it.
        let split = stream.is_large().then(|| pieces(data.len()));
        if let Some(ranges) = split.filter(|ranges| ranges.len() > 1) {
            let group = self.next_group;
            self.next_group += 1;
            let left = ranges.len();
            for range in ranges {
                self.requests.push(send(&data[range]));
                self.entries.push(InFlight::Piece { group, to });
            }
            self.groups.push(Group {
                id: group,
                buffer,
                kind,
                left,
            });
        } else {
            self.requests.push(send(data));
            self.entries.push(InFlight::Whole { buffer, to, kind });
        }
        match kind {
            SendKind::Frames {
                channel, frames, ..
            } => self.frames[channel.index()] += frames,
            SendKind::Internal => {
                self.internal += 1;
                self.internal_bytes += len;
            }
        }
    }

    /// Tests every send in flight with one `MPI_Testsome` and releases
    /// each one that completed (a frame's ticket on `handle`, counted as
    /// sent; a batch's buffer back to `pool`). Returns how many completed.
    pub(crate) fn complete(&mut self, handle: &TransportHandle, pool: &mut BufferPool) -> usize {
        let n = self.requests.len();
        if n == 0 {
            return 0;
        }
        self.indices.resize(n, 0);
        self.statuses.resize_with(n, MaybeUninit::uninit);
        let count = c_int::try_from(n).expect("sends in flight are bounded far below i32::MAX");
        let mut done: c_int = 0;
        // SAFETY: `requests` holds `n` live requests (completed ones are
        // removed below, so none is the null request); `indices` and
        // `statuses` have room for `n` entries each, as `MPI_Testsome`
        // may write that many; `done` is a valid place for the count. MPI
        // sets each completed request to the null request.
        unsafe {
            mpi::ffi::MPI_Testsome(
                count,
                self.requests.as_mut_ptr(),
                &mut done,
                self.indices.as_mut_ptr(),
                self.statuses.as_mut_ptr().cast::<MPI_Status>(),
            );
        }
        let done = usize::try_from(done).unwrap_or(0).min(n);
        // Remove from the highest index down, so `swap_remove` only ever
        // moves an entry that is still in flight (or already examined).
        self.indices[..done].sort_unstable_by(|a, b| b.cmp(a));
        for i in 0..done {
            let index =
                usize::try_from(self.indices[i]).expect("MPI reports indices below the count");
            let _ = self.requests.swap_remove(index);
            let (buffer, kind) = match self.entries.swap_remove(index) {
                InFlight::Whole { buffer, kind, .. } => (buffer, kind),
                InFlight::Piece { group, .. } => {
                    let at = self
                        .groups
                        .iter()
                        .position(|g| g.id == group)
                        .expect("a piece's group stays until its last piece completes");
                    self.groups[at].left -= 1;
                    if self.groups[at].left > 0 {
                        continue;
                    }
                    let Group { buffer, kind, .. } = self.groups.swap_remove(at);
                    (buffer, kind)
                }
            };
            self.release(kind, buffer.len(), handle, true);
            // SAFETY: MPI completed the request that read this buffer (for
            // a group, the last of its requests: every other one completed
            // earlier), each now the null request and removed, so nothing
            // refers to the buffer any more; its entry (or group) is
            // removed here, so it is released exactly once.
            unsafe { buffer.release(pool) };
        }
        done
    }

    fn release(&mut self, kind: SendKind, len: usize, handle: &TransportHandle, sent: bool) {
        match kind {
            SendKind::Frames {
                channel,
                frames,
                bytes,
            } => {
                self.frames[channel.index()] -= frames;
                handle.complete_sends(frames, bytes, sent);
            }
            SendKind::Internal => {
                self.internal -= 1;
                self.internal_bytes -= len as u64;
            }
        }
    }

    /// Handle frames of `channel` in flight.
    pub(crate) fn frames(&self, channel: Channel) -> usize {
        self.frames[channel.index()]
    }

    /// Internal messages in flight, and their bytes.
    pub(crate) fn internal(&self) -> (usize, u64) {
        (self.internal, self.internal_bytes)
    }

    /// Messages to `peer` still in flight.
    pub(crate) fn pending_to(&self, peer: Rank) -> u64 {
        self.entries
            .iter()
            .filter(|entry| entry.to() == peer)
            .count() as u64
    }

    /// Is nothing in flight?
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Gives up on every send still in flight: each request is forgotten
    /// and its buffer leaked (MPI may still read it), and each frame's
    /// ticket is released on `handle` as not sent. Returns what was left.
    pub(crate) fn abandon(&mut self, handle: &TransportHandle) -> Abandoned {
        let mut left = Abandoned::default();
        self.requests.clear();
        let groups = std::mem::take(&mut self.groups).into_iter();
        let groups = groups.map(|group| (group.buffer, group.kind));
        for entry in std::mem::take(&mut self.entries) {
            left.requests += 1;
            if let InFlight::Whole { buffer, kind, .. } = entry {
                left.bytes += buffer.len() as u64;
                self.release(kind, buffer.len(), handle, false);
            }
        }
        for (buffer, kind) in groups {
            left.bytes += buffer.len() as u64;
            self.release(kind, buffer.len(), handle, false);
        }
        // The buffers stay leaked (`Held` frees nothing when dropped): MPI
        // may still read them.
        left
    }
}

impl fmt::Debug for Sends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sends")
            .field("in_flight", &self.entries.len())
            .field("frames", &self.frames)
            .field("internal", &self.internal)
            .finish()
    }
}
