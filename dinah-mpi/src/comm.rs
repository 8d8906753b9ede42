//! The MPI environment checks and the transport's private communicator.
//!
//! [`MpiTransport::connect`](crate::MpiTransport::connect) duplicates the
//! communicator the application passes in, so the transport's tags never
//! meet the application's messages or another transport's. Duplicating is
//! a collective every rank makes once, at bootstrap; it uses the
//! nonblocking `MPI_Comm_idup` polled until the bootstrap deadline, so a
//! rank that is late or never connects makes the others time out instead
//! of blocking them forever. A duplication given up on stays pending in
//! MPI (its request and its output slot are leaked, so MPI may complete it
//! whenever the missing rank joins).
//!
//! # Freeing
//!
//! `MPI_Comm_free` is a collective in the MPI standard's sense (every
//! member must eventually call it) but synchronises nothing in OpenMPI or
//! MPICH: it drops a reference, and pending operations on the communicator
//! still complete, and a message that arrives after its receiver freed the
//! communicator is handed to the next communicator that reuses the context.
//! The transport therefore frees its communicator only after a **clean**
//! close in which every peer drained: no request is outstanding and no
//! peer can still send on it. After any other close, or one where a peer
//! was declared down without draining (a silent peer may wake up and send
//! again), it is leaked on purpose. Nothing is freed once MPI is finalised.

use std::fmt;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::ffi::MPI_Comm;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::SimpleCommunicator;

use crate::error::MpiError;

/// Checks that MPI is usable from this thread: initialised and not
/// finalised, at least [`Threading::Funneled`], and, when exactly
/// `Funneled`, called from the thread that initialised MPI.
///
/// # Errors
///
/// [`MpiError::NotInitialized`], [`MpiError::Threading`] or
/// [`MpiError::NotMainThread`].
pub(crate) fn check_environment() -> Result<(), MpiError> {
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return Err(MpiError::NotInitialized);
    }
    let provided = mpi::environment::threading_support();
    if provided < Threading::Funneled {
        return Err(MpiError::Threading { provided });
    }
    if provided == Threading::Funneled && !is_thread_main() {
        return Err(MpiError::NotMainThread);
    }
    Ok(())
}

/// Is MPI usable at all right now (initialised and not finalised)?
pub(crate) fn is_live() -> bool {
    mpi::environment::is_initialized() && !mpi::environment::is_finalized()
}

/// Is the calling thread the one that initialised MPI?
fn is_thread_main() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI is initialised and not finalised (checked just before by
    // the only caller), which is all `MPI_Is_thread_main` requires; it
    // writes one `int` through the pointer, which is valid and exclusive
    // for the duration of the call.
    unsafe {
        mpi::ffi::MPI_Is_thread_main(&mut flag);
    }
    flag != 0
}

/// The transport's own duplicate of the application's communicator.
pub(crate) struct PrivateComm {
    comm: Option<SimpleCommunicator>,
}

impl PrivateComm {
    /// Duplicates `comm` (`MPI_Comm_idup`), polling until `deadline`.
    /// Collective: every rank of `comm` must call it. `None` if the other
    /// ranks did not all join in time (the duplication is then left to
    /// MPI, see the module documentation).
    pub(crate) fn duplicate(comm: &SimpleCommunicator, deadline: Instant) -> Option<Self> {
        // MPI writes the new handle here when the duplication completes,
        // possibly after this function gave up: the slot lives on the heap
        // and is only reclaimed once MPI reported completion.
        // SAFETY: reading an extern static of the MPI library, which is
        // initialised (checked by the caller) and never changes it.
        let null = unsafe { mpi::ffi::RSMPI_COMM_NULL };
        let slot: NonNull<MPI_Comm> = NonNull::from(Box::leak(Box::new(null)));
        // SAFETY: as above.
        let mut request = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `comm` is a live intra-communicator borrowed for the
        // call; `slot` points to a leaked heap slot that stays valid until
        // MPI completes the request (reclaimed below only after that, and
        // leaked otherwise); `request` is a valid place for MPI to write
        // the request handle.
        unsafe {
            mpi::ffi::MPI_Comm_idup(comm.as_raw(), slot.as_ptr(), &mut request);
        }
        let mut idle = 0u32;
        loop {
            let mut flag: c_int = 0;
            // SAFETY: `request` is the live request of the duplication
            // (`MPI_Test` frees it and sets it to the null request once it
            // completes, after which this loop returns); the status is
            // ignored through the library's own constant.
            unsafe {
                mpi::ffi::MPI_Test(&mut request, &mut flag, mpi::ffi::RSMPI_STATUS_IGNORE);
            }
            if flag != 0 {
                // SAFETY: the duplication completed, so MPI wrote the new
                // handle and no longer uses the slot, which came from
                // `Box::leak` above and is reclaimed exactly once, here.
                let raw = *unsafe { Box::from_raw(slot.as_ptr()) };
                // An error on the transport's communicator ends the job,
                // whatever handler the application set on its own: a receive
                // never completes with an error here, which receiving into
                // spare capacity relies on (`OwnedRequest::post_spare`).
                // SAFETY: `raw` is the live communicator just created, and
                // the handler is the library's own constant.
                unsafe {
                    mpi::ffi::MPI_Comm_set_errhandler(raw, mpi::ffi::RSMPI_ERRORS_ARE_FATAL);
                }
                // SAFETY: `raw` is the new communicator `MPI_Comm_idup`
                // created from an intra-communicator, so it is a live
                // intra-communicator (not world, self or an inter-comm)
                // owned by nobody else; it is used only through the
                // returned value.
                let comm = unsafe { SimpleCommunicator::from_raw(raw) };
                return Some(Self { comm: Some(comm) });
            }
            if Instant::now() >= deadline {
                // Leave the request and the slot to MPI (see above).
                return None;
            }
            idle = idle.saturating_add(1);
            if idle < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// The communicator.
    ///
    /// # Panics
    ///
    /// After [`release`](Self::release) (the driver never uses it then).
    pub(crate) fn get(&self) -> &SimpleCommunicator {
        self.comm
            .as_ref()
            .expect("the communicator is used only before it is released")
    }

    /// Frees the communicator if `free` and MPI is still live, else leaks
    /// it (see the module documentation for when each is right). Returns
    /// whether it was freed; releasing twice does nothing.
    pub(crate) fn release(&mut self, free: bool) -> bool {
        let Some(comm) = self.comm.take() else {
            return false;
        };
        if free && is_live() {
            drop(comm);
            true
        } else {
            std::mem::forget(comm);
            false
        }
    }
}

impl Drop for PrivateComm {
    fn drop(&mut self) {
        // Only a clean close frees; anything else leaks.
        let _ = self.release(false);
    }
}

impl fmt::Debug for PrivateComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateComm")
            .field("released", &self.comm.is_none())
            .finish()
    }
}

/// The rank `source` (as MPI reports a message's sender) of a communicator
/// of `world` ranks.
///
/// # Panics
///
/// If `source` is outside the communicator, which MPI never reports for a
/// received message.
pub(crate) fn rank_in(world: dinah_core::WorldSize, source: mpi::Rank) -> dinah_core::Rank {
    u32::try_from(source)
        .ok()
        .and_then(|rank| world.rank(rank).ok())
        .expect("MPI reports a source inside the communicator")
}
