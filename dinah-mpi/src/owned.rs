//! An MPI receive request that owns the buffer it writes into.
//!
//! Nonblocking MPI operations borrow their buffer until they complete, and
//! the `mpi` crate ties that borrow to a scope. A `LocalScope` cannot be
//! stored in a struct, so the transport uses [`StaticScope`], which needs a
//! `'static` buffer: each buffer is a `Box<[u8]>` turned into a raw pointer
//! with [`Box::into_raw`] (leaked), lent to MPI as a `'static` reference,
//! and rebuilt into its box when [`OwnedRequest::test`] sees the request
//! complete.
//!
//! A request that never completes (its peer stopped receiving, the
//! transport closed first) is never waited for: dropping an
//! [`OwnedRequest`] forgets the MPI request and leaks its buffer, which
//! therefore stays valid for whatever MPI may still do with it. That is
//! memory-safe; the leak is reported by the driver's counts.

use std::fmt;
use std::ptr::NonNull;

use mpi::point_to_point::Message;
use mpi::request::{Request, StaticScope};

/// An incomplete MPI request plus the leaked buffer it uses.
///
/// Invariant: while `request` is `Some`, MPI may access `buffer`, nothing
/// else references it, and it is not freed; once `request` is `None` the
/// buffer has been rebuilt into a box and handed out (exactly once).
pub(crate) struct OwnedRequest {
    request: Option<Request<'static, [u8], StaticScope>>,
    buffer: NonNull<[u8]>,
}

impl OwnedRequest {
    /// Starts the immediate receive of a probed `message` of `len` bytes.
    pub(crate) fn receive(message: Message, len: usize) -> Self {
        let mut buffer = NonNull::from(Box::leak(vec![0u8; len].into_boxed_slice()));
        // SAFETY: the buffer comes from a leaked box, so it is valid,
        // aligned and initialised, and it is not freed while the request
        // lives (only `test` frees it, after completion; `Drop` leaks it).
        // This exclusive borrow is the only reference to it until the
        // request completes; `test` rebuilds the box only after MPI
        // consumed the request.
        let data: &'static mut [u8] = unsafe { buffer.as_mut() };
        let request = message.immediate_matched_receive_into(StaticScope, data);
        Self {
            request: Some(request),
            buffer,
        }
    }

    /// Tests the request without blocking. Returns its buffer (the bytes
    /// sent, or the bytes received) the first time it finds the request
    /// complete; `None` while it is incomplete and after the buffer was
    /// handed out.
    pub(crate) fn test(&mut self) -> Option<Box<[u8]>> {
        let request = self.request.take()?;
        match request.test() {
            Ok(_status) => {
                // SAFETY: MPI completed the request and `test` consumed it,
                // together with its borrow of the buffer, so nothing refers
                // to the buffer any more. It came from `Box::leak` in
                // `receive` and is rebuilt exactly once: `request` is now
                // `None`, so neither a later `test` nor `Drop` touches it.
                Some(unsafe { Box::from_raw(self.buffer.as_ptr()) })
            }
            Err(request) => {
                self.request = Some(request);
                None
            }
        }
    }

    /// Is the request still incomplete?
    pub(crate) fn is_pending(&self) -> bool {
        self.request.is_some()
    }

    /// The buffer's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.buffer.len()
    }
}

impl Drop for OwnedRequest {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            // Still in MPI's hands: dropping a `Request` panics and waiting
            // could block forever, so the request is forgotten and its
            // buffer leaked; it stays valid for as long as MPI might use it.
            std::mem::forget(request);
        }
    }
}

impl fmt::Debug for OwnedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedRequest")
            .field("len", &self.len())
            .field("pending", &self.is_pending())
            .finish()
    }
}
