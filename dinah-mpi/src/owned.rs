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
//! A large receive (a part of a frame, which becomes a decoded value)
//! is posted into a buffer's spare capacity instead of a zeroed one
//! ([`OwnedRequest::post_spare`]): MPI writes the bytes, and the vector is
//! rebuilt at the length MPI reports, so no byte is written twice and
//! none is read before MPI wrote it. A long message is received in pieces
//! (`pieces.rs`), one request per range of the buffer; the receive is
//! complete when all of them are.
//!
//! A request that never completes (its peer stopped receiving, the
//! transport closed first) is never waited for: dropping an
//! [`OwnedRequest`] forgets the MPI request and leaks its buffer, which
//! therefore stays valid for whatever MPI may still do with it. That is
//! memory-safe; the leak is reported by the driver's counts.

use std::fmt;
use std::mem::{ManuallyDrop, MaybeUninit};

use dinah_std::transport::Tail;
use std::ptr::NonNull;

use mpi::Tag;
use mpi::datatype::Equivalence;
use mpi::point_to_point::{Message, Source, Status};
use mpi::request::{Request, StaticScope};
use mpi::topology::Process;

use crate::pieces::{Received, Receiving};

/// An MPI request over a lent buffer: the buffer is typed as possibly
/// uninitialised bytes, which every lent buffer may be viewed as.
pub(crate) type Pending = Request<'static, [MaybeUninit<u8>], StaticScope>;

/// A `Vec<u8>` lent to MPI, kept as its raw parts.
///
/// It has no `Drop`: dropping it leaks the buffer, which is what a
/// request that may still be in MPI's hands needs. [`Lent::into_vec`]
/// gives the vector back once MPI is done with it.
#[derive(Debug)]
pub(crate) struct Lent {
    ptr: NonNull<u8>,
    /// The bytes lent to MPI.
    len: usize,
    capacity: usize,
    /// The first `init` bytes were initialised when lent (all of them,
    /// or none for spare capacity).
    init: usize,
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
            init: buffer.len(),
        }
    }

    /// Takes `buffer` apart to lend the first `len` bytes of its capacity,
    /// uninitialised, for MPI to write (what it held is dropped).
    ///
    /// # Panics
    ///
    /// If the capacity is under `len`.
    fn spare(mut buffer: Vec<u8>, len: usize) -> Self {
        assert!(buffer.capacity() >= len, "a spare buffer holds its length");
        buffer.clear();
        Self {
            len,
            init: 0,
            ..Self::new(buffer)
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
        assert_eq!(
            self.init, self.len,
            "only initialised bytes are viewed as u8"
        );
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
        assert_eq!(
            self.init, self.len,
            "only initialised bytes are viewed as u8"
        );
        // SAFETY: as in `as_static`, and all `len` bytes are initialised
        // (checked above); the caller promises exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, possibly uninitialised, for MPI to write.
    ///
    /// # Safety
    ///
    /// As for [`Lent::as_static_mut`].
    unsafe fn as_static_uninit(&mut self) -> &'static mut [MaybeUninit<u8>] {
        // SAFETY: as in `as_static`: the first `len` bytes of the capacity
        // (`len <= capacity`, see `new` and `spare`) stay allocated until
        // `into_vec`; `MaybeUninit<u8>` has the layout of `u8` and needs no
        // initialised bytes. The caller promises exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.len) }
    }

    /// The vector back, at its length when lent, or for spare capacity at
    /// the `written` bytes MPI wrote from its start (at most the length
    /// lent).
    ///
    /// # Safety
    ///
    /// MPI must be done with the buffer (its request completed), no slice
    /// from [`Lent::as_static`], [`Lent::as_static_mut`] or
    /// [`Lent::as_static_uninit`] may be used afterwards, and MPI must have
    /// written the first `written` bytes (for a buffer lent initialised,
    /// any `written` will do).
    pub(crate) unsafe fn into_vec(self, written: usize) -> Vec<u8> {
        let len = self.init.max(written.min(self.len));
        // SAFETY: the parts came from a vector in `new` that nothing freed
        // since (`Lent` has no `Drop` and this consumes it, so the vector
        // is rebuilt at most once); the caller promises MPI is done. The
        // first `len` bytes are initialised: `init` of them were when lent,
        // and MPI wrote `written` (the caller's promise), cut to the bytes
        // lent; `len <= capacity`.
        unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), len, self.capacity) }
    }
}

/// An incomplete MPI receive plus the lent buffer it writes into (one
/// request, or one per piece of a long message: see `pieces.rs`).
///
/// Invariant: while `request` is `Some`, MPI may write the buffer, nothing
/// else references it, and it is not freed; once it is `None` the buffer
/// has been rebuilt into its vector and handed out (exactly once).
pub(crate) struct OwnedRequest {
    request: Option<(Receiving, Lent)>,
    /// The buffer's capacity: what it occupies, whatever the message's
    /// length.
    capacity: usize,
    /// [`cancel`](Self::cancel) was called: a completion may have written
    /// nothing, whatever its status says.
    cancelled: bool,
}

/// `request`, started by `mpi` over a buffer of bytes, as a request over
/// the same bytes viewed as possibly uninitialised ones.
fn erased(request: Request<'static, [u8], StaticScope>) -> Pending {
    // SAFETY: the request goes on unchanged (`from_raw` below takes it
    // back at once), over the very borrow `into_raw` returns.
    let (raw, data, scope) = unsafe { request.into_raw() };
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; initialised bytes
    // may be viewed as possibly uninitialised ones.
    let data = unsafe { &*(std::ptr::from_ref::<[u8]>(data) as *const [MaybeUninit<u8>]) };
    // SAFETY: `raw` is the live request over `data`, no longer owned by
    // the `Request` it came from.
    unsafe { Request::from_raw(raw, data, scope) }
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
        let request = erased(message.immediate_matched_receive_into(StaticScope, data));
        Self {
            request: Some((Receiving::One(request), buffer)),
            capacity,
            cancelled: false,
        }
    }

    /// A request that already completed, its buffer handed out (for a
    /// message received some other way).
    pub(crate) fn done() -> Self {
        Self {
            request: None,
            capacity: 0,
            cancelled: false,
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
        let request = erased(source.immediate_receive_into_with_tag(StaticScope, data, tag));
        Self {
            request: Some((Receiving::One(request), buffer)),
            capacity,
            cancelled: false,
        }
    }

    /// Starts receiving the next long message with `tag` from `process`
    /// into `buffer`, whose length is the message's, in pieces if it is
    /// that long (see `pieces.rs`).
    ///
    /// # Panics
    ///
    /// If a piece is past what an MPI count holds.
    pub(crate) fn post_pieces(process: &Process<'_>, tag: Tag, buffer: Vec<u8>) -> Self {
        let capacity = buffer.capacity();
        let mut buffer = Lent::new(buffer);
        // SAFETY: as in `receive`; MPI writes only received bytes, which
        // are initialised, into these initialised ones.
        let data: &'static mut [MaybeUninit<u8>] = unsafe { buffer.as_static_uninit() };
        Self {
            request: Some((Receiving::start(process, tag, data), buffer)),
            capacity,
            cancelled: false,
        }
    }

    /// Starts receiving the next long message with `tag` from `process`
    /// into the first `len` bytes of `buffer`'s capacity (in pieces if it
    /// is that long, see `pieces.rs`), without writing them first: MPI
    /// writes what it receives, and the buffer comes back at the length
    /// received.
    ///
    /// # Panics
    ///
    /// If `buffer`'s capacity is under `len`, or a piece is past what an
    /// MPI count holds.
    pub(crate) fn post_spare(process: &Process<'_>, tag: Tag, buffer: Vec<u8>, len: usize) -> Self {
        let capacity = buffer.capacity();
        let mut buffer = Lent::spare(buffer, len);
        // SAFETY: as in `receive`.
        let data: &'static mut [MaybeUninit<u8>] = unsafe { buffer.as_static_uninit() };
        Self {
            request: Some((Receiving::start(process, tag, data), buffer)),
            capacity,
            cancelled: false,
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
    /// long it is (the buffer keeps the length it was posted with, or for
    /// [`post_spare`](Self::post_spare) the length received).
    pub(crate) fn test_arrival(&mut self) -> Option<Arrival> {
        let (receiving, buffer) = self.request.take()?;
        match receiving.test() {
            // SAFETY: `test` found every request of the receive complete
            // and consumed them, together with their borrows of the buffer.
            Ok(received) => Some(unsafe { self.arrival(received, buffer) }),
            Err(receiving) => {
                self.request = Some((receiving, buffer));
                None
            }
        }
    }

    /// The MPI request of a receive in one piece still in flight, for a
    /// test of several receives at once (see `posted.rs`).
    pub(crate) fn single_raw(&self) -> Option<mpi::ffi::MPI_Request> {
        self.request
            .as_ref()
            .and_then(|(receiving, _)| receiving.single_raw())
    }

    /// As [`test_arrival`](Self::test_arrival) for a receive that a test of
    /// several found complete with `status`, without an MPI call; `None`
    /// for a receive in pieces or one handed out already.
    ///
    /// # Safety
    ///
    /// MPI must have completed the request
    /// [`single_raw`](Self::single_raw) gave and reported `status` for it.
    pub(crate) unsafe fn arrived(&mut self, status: &Status) -> Option<Arrival> {
        let (receiving, buffer) = self.request.take()?;
        // SAFETY: the caller's promise, passed on.
        match unsafe { receiving.completed(status) } {
            // SAFETY: `completed` let go of the completed request and its
            // borrow of the buffer.
            Ok(received) => Some(unsafe { self.arrival(received, buffer) }),
            Err(receiving) => {
                self.request = Some((receiving, buffer));
                None
            }
        }
    }

    /// The buffer of a completed receive back, with what it received.
    ///
    /// # Safety
    ///
    /// Every request of the receive must have completed and been let go,
    /// so that nothing refers to the buffer any more.
    unsafe fn arrival(&self, Received { source, len }: Received, buffer: Lent) -> Arrival {
        // A cancelled receive may have written nothing. A failed one never
        // completes: errors on the transport's communicator end the job
        // (see `comm.rs`).
        let written = if self.cancelled { 0 } else { len };
        Arrival {
            // SAFETY: nothing refers to the buffer (the caller's promise);
            // `into_vec` consumes the `Lent`, so neither a later test nor
            // `Drop` touches it. A receive that was not cancelled wrote the
            // first `len` bytes (`Received`).
            buffer: unsafe { buffer.into_vec(written) },
            source,
            len,
        }
    }

    /// Asks MPI to cancel the incomplete request (`MPI_Cancel`); it still
    /// has to be tested to completion, after which its buffer holds
    /// nothing or, if the cancellation came too late, a message.
    pub(crate) fn cancel(&mut self) {
        if let Some((receiving, _)) = &self.request {
            self.cancelled = true;
            receiving.cancel();
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
    /// The buffer, at the length it was posted with (for
    /// [`OwnedRequest::post_spare`], at the length received).
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
        if let Some((receiving, _buffer)) = self.request.take() {
            // Still in MPI's hands: dropping a `Request` panics and waiting
            // could block forever, so the requests are forgotten and the
            // buffer leaked (`Lent` has no `Drop`); it stays valid for as
            // long as MPI might use it.
            receiving.forget();
        }
    }
}

/// An incomplete MPI receive into a frame's tail of numbers (see
/// [`Tail`]): MPI writes the bytes of the tail's buffer.
///
/// Invariant: while `request` is `Some`, MPI may write the buffer, and
/// nothing else moves its allocation, references it or frees it
/// (`ManuallyDrop`: dropping the request leaks the buffer, which stays
/// valid for whatever MPI may still do with it).
pub(crate) struct NumbersRequest {
    request: Option<(Receiving, ManuallyDrop<Tail>)>,
    /// The buffer's capacity in bytes.
    capacity: usize,
}

impl NumbersRequest {
    /// Starts receiving the next message with `tag` from `process` into
    /// `tail`'s bytes (all of them: a tail sized for the message), in
    /// pieces if it is that long (see `pieces.rs`).
    pub(crate) fn post(process: &Process<'_>, tag: Tag, mut tail: Tail) -> Self {
        let capacity = tail.capacity();
        let bytes = tail.as_bytes_mut();
        // SAFETY: the bytes are the tail's heap allocation, which stays
        // where it is when the `Tail` moves into `request` below and is
        // neither referenced nor freed until `test` takes it back after
        // MPI completed the receive (see the type's invariant); this
        // exclusive slice is the only reference to the bytes meanwhile.
        // They are viewed as possibly uninitialised bytes, which `u8`s may
        // be; MPI writes only received bytes, which are initialised.
        let data: &'static mut [MaybeUninit<u8>] =
            unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), bytes.len()) };
        Self {
            request: Some((
                Receiving::start(process, tag, data),
                ManuallyDrop::new(tail),
            )),
            capacity,
        }
    }

    /// Tests the request without blocking; returns the tail the first time
    /// it finds the request complete. A message shorter than the tail
    /// comes back as the bytes received, so the frame's length checks see
    /// what arrived.
    pub(crate) fn test(&mut self) -> Option<Tail> {
        let (receiving, tail) = self.request.take()?;
        match receiving.test() {
            Ok(Received { len, .. }) => {
                // MPI completed the receive and `test` consumed its requests
                // with their borrows of the bytes: the tail is ours again.
                let tail = ManuallyDrop::into_inner(tail);
                if len == tail.len() {
                    Some(tail)
                } else {
                    Some(Tail::from(tail.as_bytes()[..len.min(tail.len())].to_vec()))
                }
            }
            Err(receiving) => {
                self.request = Some((receiving, tail));
                None
            }
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

impl Drop for NumbersRequest {
    fn drop(&mut self) {
        if let Some((receiving, _tail)) = self.request.take() {
            // As for `OwnedRequest`: forgotten, its buffer leaked
            // (`ManuallyDrop`).
            receiving.forget();
        }
    }
}

impl fmt::Debug for NumbersRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NumbersRequest")
            .field("pending", &self.is_pending())
            .field("capacity", &self.capacity)
            .finish()
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
