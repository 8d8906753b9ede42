//! MPI requests that own the buffers they use.
//!
//! Nonblocking MPI operations borrow their buffer until they complete, and
//! the `mpi` crate ties that borrow to a scope. A `LocalScope` cannot be
//! stored in a struct, so the transport uses [`StaticScope`], which needs a
//! `'static` buffer: each buffer is a `Vec<u8>` taken apart into its raw
//! parts ([`Lent`]), lent to MPI as a `'static` slice, and rebuilt into
//! its vector once MPI completed the request. Keeping the vector (rather
//! than a boxed slice) keeps its capacity, so a buffer can go back to the
//! driver's pool (`pool.rs`) and be lent again without an allocation.
//!
//! A request that never completes (its peer stopped receiving, the
//! transport closed first) is never waited for: dropping an
//! [`OwnedRequest`] forgets the MPI request and leaks its buffer, which
//! therefore stays valid for whatever MPI may still do with it. That is
//! memory-safe; the leak is reported by the driver's counts.

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use mpi::Tag;
use mpi::datatype::Equivalence;
use mpi::point_to_point::{Message, Source, Status};
use mpi::request::{Request, StaticScope};

/// A `Vec<u8>` lent to MPI, kept as its raw parts.
///
/// It has no `Drop`: dropping it leaks the buffer, which is what a
/// request that may still be in MPI's hands needs. [`Lent::into_vec`]
/// gives the vector back once MPI is done with it.
#[derive(Debug)]
pub(crate) struct Lent {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

impl Lent {
    /// Takes `buffer` apart; its bytes stay where they are.
    pub(crate) fn new(buffer: Vec<u8>) -> Self {
        let mut buffer = ManuallyDrop::new(buffer);
        Self {
            // A vector's pointer is never null (dangling when empty).
            ptr: NonNull::new(buffer.as_mut_ptr()).expect("a Vec's pointer is never null"),
            len: buffer.len(),
            capacity: buffer.capacity(),
        }
    }

    /// The buffer's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes, for MPI to read.
    ///
    /// # Safety
    ///
    /// The caller must not call [`Lent::into_vec`] while the returned
    /// slice (or what MPI does with it) is in use, and must not write the
    /// bytes meanwhile.
    pub(crate) unsafe fn as_static(&self) -> &'static [u8] {
        // SAFETY: `ptr`, `len` describe the initialised part of a vector
        // that is neither freed nor moved until `into_vec`, which the
        // caller promises not to call while this slice is used.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, for MPI to write.
    ///
    /// # Safety
    ///
    /// As for [`Lent::as_static`], and this must be the only reference to
    /// the bytes while it is in use.
    pub(crate) unsafe fn as_static_mut(&mut self) -> &'static mut [u8] {
        // SAFETY: as in `as_static`; the caller promises exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The vector back.
    ///
    /// # Safety
    ///
    /// MPI must be done with the buffer (its request completed), and no
    /// slice from [`Lent::as_static`] or [`Lent::as_static_mut`] may be
    /// used afterwards.
    pub(crate) unsafe fn into_vec(self) -> Vec<u8> {
        // SAFETY: the parts came from a vector in `new` that nothing freed
        // since (`Lent` has no `Drop` and this consumes it, so the vector
        // is rebuilt at most once); the caller promises MPI is done.
        unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.capacity) }
    }
}

/// An incomplete MPI receive plus the lent buffer it writes into.
///
/// Invariant: while `request` is `Some`, MPI may write the buffer, nothing
/// else references it, and it is not freed; once it is `None` the buffer
/// has been rebuilt into its vector and handed out (exactly once).
pub(crate) struct OwnedRequest {
    request: Option<(Request<'static, [u8], StaticScope>, Lent)>,
    /// The buffer's capacity: what it occupies, whatever the message's
    /// length.
    capacity: usize,
}

impl OwnedRequest {
    /// Starts the immediate receive of a probed `message` into `buffer`,
    /// whose length is the message's.
    pub(crate) fn receive(message: Message, buffer: Vec<u8>) -> Self {
        let capacity = buffer.capacity();
        let mut buffer = Lent::new(buffer);
        // SAFETY: the buffer is not rebuilt while the request lives (only
        // `test` does that, after completion; `Drop` leaks it), and this
        // exclusive borrow is the only reference to it until then.
        let data: &'static mut [u8] = unsafe { buffer.as_static_mut() };
        let request = message.immediate_matched_receive_into(StaticScope, data);
        Self {
            request: Some((request, buffer)),
            capacity,
        }
    }

    /// A request that already completed, its buffer handed out (for a
    /// message received some other way).
    pub(crate) fn done() -> Self {
        Self {
            request: None,
            capacity: 0,
        }
    }

    /// Starts an immediate receive of the next message with `tag` from
    /// `source` (a rank, or any) into `buffer`, whose length is the most
    /// it takes.
    pub(crate) fn post(source: &impl Source, tag: Tag, buffer: Vec<u8>) -> Self {
        let capacity = buffer.capacity();
        let mut buffer = Lent::new(buffer);
        // SAFETY: as in `receive`.
        let data: &'static mut [u8] = unsafe { buffer.as_static_mut() };
        let request = source.immediate_receive_into_with_tag(StaticScope, data, tag);
        Self {
            request: Some((request, buffer)),
            capacity,
        }
    }

    /// Tests the request without blocking. Returns its buffer, cut to the
    /// bytes received (a message shorter than the buffer leaves no
    /// padding), the first time it finds the request complete; `None`
    /// while it is incomplete and after the buffer was handed out.
    pub(crate) fn test(&mut self) -> Option<Vec<u8>> {
        self.test_arrival().map(|mut arrival| {
            arrival.buffer.truncate(arrival.len);
            arrival.buffer
        })
    }

    /// As [`test`](Self::test), with where the message came from and how
    /// long it is (the buffer keeps its whole length).
    pub(crate) fn test_arrival(&mut self) -> Option<Arrival> {
        let (request, buffer) = self.request.take()?;
        match request.test() {
            Ok(status) => Some(Arrival {
                // SAFETY: MPI completed the request and `test` consumed it,
                // together with its borrow of the buffer, so nothing refers
                // to the buffer any more; `into_vec` consumes the `Lent`,
                // so neither a later `test` nor `Drop` touches it.
                buffer: unsafe { buffer.into_vec() },
                source: status.source_rank(),
                len: received_len(&status),
            }),
            Err(request) => {
                self.request = Some((request, buffer));
                None
            }
        }
    }

    /// Asks MPI to cancel the incomplete request (`MPI_Cancel`); it still
    /// has to be tested to completion, after which its buffer holds
    /// nothing or, if the cancellation came too late, a message.
    pub(crate) fn cancel(&self) {
        if let Some((request, _)) = &self.request {
            request.cancel();
        }
    }

    /// Is the request still incomplete?
    pub(crate) fn is_pending(&self) -> bool {
        self.request.is_some()
    }

    /// The bytes the buffer occupies (its capacity).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A completed receive.
#[derive(Debug)]
pub(crate) struct Arrival {
    /// The buffer, at the length it was posted with.
    pub(crate) buffer: Vec<u8>,
    /// The sender's rank in the communicator (meaningless for a
    /// cancelled receive).
    pub(crate) source: mpi::Rank,
    /// How many bytes of the buffer the message filled (meaningless for a
    /// cancelled receive).
    pub(crate) len: usize,
}

/// The bytes a completed receive's status reports; a negative count
/// (`MPI_UNDEFINED`, which bytes never give) reads as zero.
pub(crate) fn received_len(status: &Status) -> usize {
    usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0)
}

impl Drop for OwnedRequest {
    fn drop(&mut self) {
        if let Some((request, _buffer)) = self.request.take() {
            // Still in MPI's hands: dropping a `Request` panics and waiting
            // could block forever, so the request is forgotten and its
            // buffer leaked (`Lent` has no `Drop`); it stays valid for as
            // long as MPI might use it.
            std::mem::forget(request);
        }
    }
}

impl fmt::Debug for OwnedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedRequest")
            .field("capacity", &self.capacity())
            .field("pending", &self.is_pending())
            .finish()
    }
}
