//! Long messages on a large tag travel in pieces.
//!
//! A message on a lane's large tag (`large.rs`) of [`SPLIT_FROM`] bytes or
//! more is sent as [`PIECES`] messages, each a contiguous range of its
//! bytes ([`pieces`]), posted one after the other on that tag; the
//! receiver, which knows the length from the announcement, posts one
//! receive per range into the same buffer, all at once. MPI matches one
//! source's messages on one tag in the order they were sent, so each range
//! lands in its place, and a frame's messages keep their order.
//!
//! Why: Open MPI's shared-memory path moves a long message a few
//! fragments at a time per request, copying each into shared memory and
//! out again; with two requests in flight the copies of one overlap those
//! of the other, which moves a message of a few hundred KiB to a few MiB
//! in much less time when the kernel's single copy is not in use, and
//! costs little when it is (docs/mpi.md, Receives and Measured).
//!
//! Both ranks derive the ranges from the length alone, so the split is
//! part of the framing (`hello.rs`, `FRAMING_VERSION`): the receiver from
//! the announced length, the sender from the length it sends, which a
//! correct sender announced. A message shorter than its announcement may
//! be split differently from the receives: the buffer then holds the
//! bytes up to the first piece that came short ([`Received::len`]), and
//! the runtime's length checks refuse the frame. A message longer than
//! the receive it meets is an MPI truncation error, which ends the job as
//! on any communicator.

use std::mem::{self, MaybeUninit};
use std::ops::Range;

use mpi::datatype::Equivalence;
use mpi::point_to_point::Status;
use mpi::raw::AsRaw;
use mpi::request::{Request, StaticScope};
use mpi::topology::{AsCommunicator, Process};
use mpi::{Count, Tag, ffi};

use crate::owned::{Pending, received_len};

/// The shortest message sent in pieces. Below it the gain without single
/// copy is small, and with single copy a second request can cost more
/// than it saves (docs/mpi.md).
pub(crate) const SPLIT_FROM: usize = 512 * 1024;

/// How many pieces a message of at least [`SPLIT_FROM`] bytes is sent in.
pub(crate) const PIECES: usize = 2;

/// The byte ranges a message of `len` bytes on a large tag travels in, in
/// order: the whole message below [`SPLIT_FROM`], else [`PIECES`] ranges
/// of nearly equal length that cover it.
pub(crate) fn pieces(len: usize) -> impl ExactSizeIterator<Item = Range<usize>> {
    let count = if len >= SPLIT_FROM { PIECES } else { 1 };
    let step = len / count;
    (0..count).map(move |i| {
        let end = if i + 1 == count { len } else { step * (i + 1) };
        step * i..end
    })
}

/// The MPI receives that write one buffer: one request, or one per piece
/// of a long message from a known rank.
pub(crate) enum Receiving {
    /// A single receive.
    One(Pending),
    /// A receive per piece, each into its own range of the buffer.
    Pieces {
        /// The rank the pieces come from.
        source: mpi::Rank,
        /// In the buffer's order.
        pieces: Vec<Piece>,
    },
}

/// The receive of one piece.
pub(crate) struct Piece {
    /// `None` once complete.
    request: Option<Pending>,
    /// The bytes of its range.
    len: usize,
    /// The bytes MPI reported received, once complete.
    got: usize,
}

/// What a completed [`Receiving`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// The sender's rank in the communicator (meaningless for a cancelled
    /// receive).
    pub(crate) source: mpi::Rank,
    /// The bytes written from the buffer's start without a gap: every
    /// piece's up to the first one that received less than its range.
    pub(crate) len: usize,
}

impl Receiving {
    /// Starts receiving the next message(s) with `tag` from `process` into
    /// `data`: one receive per piece of `data`'s length (see [`pieces`]),
    /// each into its range.
    ///
    /// MPI may write `data` until every request completes: the caller
    /// keeps it allocated and otherwise untouched until [`test`] has
    /// returned it complete, or forgets the requests with [`forget`] and
    /// leaks it.
    ///
    /// [`test`]: Self::test
    /// [`forget`]: Self::forget
    ///
    /// # Panics
    ///
    /// If a piece is longer than an MPI count holds.
    pub(crate) fn start(
        process: &Process<'_>,
        tag: Tag,
        data: &'static mut [MaybeUninit<u8>],
    ) -> Self {
        let ranges = pieces(data.len());
        if ranges.len() == 1 {
            return Self::One(irecv(process, tag, data));
        }
        let mut rest = data;
        let pieces = ranges
            .map(|range| {
                let (piece, after) = mem::take(&mut rest).split_at_mut(range.len());
                rest = after;
                Piece {
                    request: Some(irecv(process, tag, piece)),
                    len: range.len(),
                    got: 0,
                }
            })
            .collect();
        Self::Pieces {
            source: process.rank(),
            pieces,
        }
    }

    /// The MPI request of a receive in one piece, for a test of several
    /// receives at once (see `posted.rs`); `None` for one in pieces.
    pub(crate) fn single_raw(&self) -> Option<ffi::MPI_Request> {
        match self {
            Self::One(request) => Some(request.as_raw()),
            Self::Pieces { .. } => None,
        }
    }

    /// What a receive in one piece received, once a test of several
    /// receives found its request complete with `status`: the request is
    /// let go without another MPI call. A receive in pieces comes back.
    ///
    /// # Safety
    ///
    /// MPI must have completed the request [`single_raw`](Self::single_raw)
    /// gave (which frees it) and reported `status` for it.
    pub(crate) unsafe fn completed(self, status: &Status) -> Result<Received, Self> {
        match self {
            Self::One(request) => {
                // SAFETY: MPI completed and freed the request (the caller's
                // promise), as its own test would have: the handle is only
                // forgotten, and with it the borrow of the buffer.
                let _ = unsafe { request.into_raw() };
                Ok(Received {
                    source: status.source_rank(),
                    len: received_len(status),
                })
            }
            pieces @ Self::Pieces { .. } => Err(pieces),
        }
    }

    /// Tests every incomplete request without blocking: what was received
    /// once all completed, else the requests left.
    pub(crate) fn test(self) -> Result<Received, Self> {
        match self {
            Self::One(request) => request
                .test()
                .map(|status| Received {
                    source: status.source_rank(),
                    len: received_len(&status),
                })
                .map_err(Self::One),
            Self::Pieces { source, mut pieces } => {
                let mut complete = true;
                for piece in &mut pieces {
                    if let Some(request) = piece.request.take() {
                        match request.test() {
                            Ok(status) => piece.got = received_len(&status),
                            Err(request) => {
                                piece.request = Some(request);
                                complete = false;
                            }
                        }
                    }
                }
                if !complete {
                    return Err(Self::Pieces { source, pieces });
                }
                let mut len = 0;
                for piece in &pieces {
                    len += piece.got.min(piece.len);
                    if piece.got < piece.len {
                        break;
                    }
                }
                Ok(Received { source, len })
            }
        }
    }

    /// Asks MPI to cancel every incomplete request; each still has to be
    /// tested to completion.
    pub(crate) fn cancel(&self) {
        match self {
            Self::One(request) => request.cancel(),
            Self::Pieces { pieces, .. } => pieces
                .iter()
                .filter_map(|piece| piece.request.as_ref())
                .for_each(Request::cancel),
        }
    }

    /// Forgets every incomplete request: dropping a `Request` panics, and
    /// waiting could block forever. The caller leaks the buffer, which MPI
    /// may still write.
    pub(crate) fn forget(self) {
        match self {
            Self::One(request) => mem::forget(request),
            Self::Pieces { pieces, .. } => pieces
                .into_iter()
                .filter_map(|piece| piece.request)
                .for_each(mem::forget),
        }
    }
}

/// Starts an immediate receive of the next message with `tag` from
/// `process` into `data`, which MPI writes without its bytes being read
/// or zeroed first.
fn irecv(process: &Process<'_>, tag: Tag, data: &'static mut [MaybeUninit<u8>]) -> Pending {
    let count = Count::try_from(data.len()).expect("a frame's length fits an MPI count");
    // SAFETY: `MPI_REQUEST_NULL` is a constant MPI provides.
    let mut raw = unsafe { ffi::RSMPI_REQUEST_NULL };
    // SAFETY: MPI writes at most `count` bytes (`u8`s) into `data`, which
    // holds `count` of them and stays allocated and otherwise untouched
    // until the request completes or is forgotten with its buffer leaked
    // (the caller's promise, see `Receiving::start`); the communicator and
    // rank come from a live process.
    unsafe {
        ffi::MPI_Irecv(
            data.as_mut_ptr().cast(),
            count,
            u8::equivalent_datatype().as_raw(),
            process.rank(),
            tag,
            process.as_communicator().as_raw(),
            &raw mut raw,
        );
    }
    // SAFETY: `raw` is the request just started over `data`, owned by
    // nothing else.
    unsafe { Request::from_raw(raw, &*data, StaticScope) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_message_below_the_split_is_one_piece() {
        let one = |len: usize| pieces(len).map(|range| (range.start, range.end));
        assert!(one(0).eq([(0, 0)]));
        assert!(one(SPLIT_FROM - 1).eq([(0, SPLIT_FROM - 1)]));
        let half = SPLIT_FROM / 2;
        assert!(one(SPLIT_FROM).eq([(0, half), (half, SPLIT_FROM)]));
    }

    proptest! {
        #[test]
        fn the_pieces_cover_the_message_in_order(len in 0usize..=usize::MAX) {
            let ranges: Vec<_> = pieces(len).collect();
            let wanted = if len >= SPLIT_FROM { PIECES } else { 1 };
            prop_assert_eq!(ranges.len(), wanted);
            prop_assert_eq!(ranges[0].start, 0);
            prop_assert_eq!(ranges[ranges.len() - 1].end, len);
            for pair in ranges.windows(2) {
                prop_assert_eq!(pair[0].end, pair[1].start);
            }
            // Nearly equal: no piece is more than `PIECES` bytes longer
            // than another.
            let lens = ranges.iter().map(ExactSizeIterator::len);
            let (min, max) = (lens.clone().min().unwrap(), lens.max().unwrap());
            prop_assert!(max - min < PIECES);
        }
    }
}
