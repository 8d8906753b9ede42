//! [`CallSet`]: many calls awaited together, in the order they finish.
//!
//! Each slot of the set owns one waker for the life of the set. When the
//! owner thread completes a call, it wakes that call's slot waker, which
//! queues the slot's index (once, however often it is woken) and wakes
//! whoever waits on the set. Polling the set then polls only the queued
//! slots, so a set of `n` calls costs `O(1)` per finished call rather than
//! `O(n)` per poll, and polling allocates nothing: the slots, their wakers
//! and the ready queue are allocated once, when the set is made.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use crossbeam_queue::ArrayQueue;

use super::remote_future::RemoteFuture;
use crate::action::WireValue;
use crate::runtime::error::RuntimeError;

/// A bounded set of calls of one output type, awaited in the order they
/// finish ([`join_next`](Self::join_next)) or all together ([`join_all`](Self::join_all)).
///
/// It is what keeping many calls in flight takes without an extra thread:
/// push up to [`capacity`](Self::capacity) futures, then take results as
/// they come and push a new call for each, under
/// [`Runtime::block_on`](crate::Runtime::block_on) or any other executor.
/// The set allocates only when it is made; pushing and polling do not.
///
/// Dropping the set drops the calls still in it, which cancels them.
///
/// # Examples
///
/// ```
/// # use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
/// # use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
/// # use dinah_std::{Action, CallSet, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};
/// # struct Square(u64);
/// # impl WireValue for Square {
/// #     const SCHEMA_ID: u64 = schema_id("doc.Square/1");
/// #     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> { self.0.encode(out) }
/// #     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> { u64::decode(input).map(Square) }
/// # }
/// # impl Action for Square { const ID: u128 = 0x5e7; type Output = u64; }
/// # let network = SimNetwork::with_mode(WorldSize::new(1)?, 1, FaultPlan::new(), SimMode::Threaded)?;
/// # let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
/// # builder.register::<Square, _>(|Square(x)| Ok(x * x))?;
/// # let (handle, driver) = network.endpoint(Rank::ZERO, builder.hello()?.handle)?;
/// # let mut runtime = builder.start(handle, driver)?;
/// let client = runtime.client();
/// let mut calls = CallSet::with_capacity(16);
/// let mut next = 0;
/// let mut sum = 0;
/// while next < 16 {
///     calls.push(client.spawn_on(Rank::ZERO, Square(next))).map_err(|_| "full")?;
///     next += 1;
/// }
/// // Results in the order they finish; each slot can take a new call.
/// while let Some((_slot, result)) = runtime.block_on(calls.join_next()) {
///     sum += result?;
///     if next < 100 {
///         calls.push(client.spawn_on(Rank::ZERO, Square(next))).map_err(|_| "full")?;
///         next += 1;
///     }
/// }
/// assert_eq!(sum, (0..100).map(|x| x * x).sum::<u64>());
/// # runtime.shutdown(std::time::Duration::from_secs(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CallSet<T> {
    slots: Box<[Slot<T>]>,
    /// Indices of empty slots.
    free: Vec<usize>,
    shared: Arc<Shared>,
    len: usize,
}

struct Slot<T> {
    call: Option<RemoteFuture<T>>,
    wake: Arc<SlotWake>,
    /// `wake` as a [`Waker`], made once with the set.
    waker: Waker,
}

/// What the slot wakers share with the set.
struct Shared {
    /// Slots woken since the set last looked; each at most once (see
    /// [`SlotWake::queued`]), so it never overflows.
    ready: ArrayQueue<usize>,
    /// Whoever last polled the set.
    waiter: Mutex<Option<Waker>>,
}

/// The waker of one slot.
struct SlotWake {
    index: usize,
    /// Is the index in the ready queue? Set by the first wake, cleared when
    /// the set takes the index out.
    queued: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for SlotWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // `AcqRel`: the waking thread's completion of the call happens
        // before the set polls the slot again.
        if !self.queued.swap(true, Ordering::AcqRel) {
            // One entry per slot at most, and the queue has a place per
            // slot: the push cannot fail.
            let _ = self.shared.ready.push(self.index);
            let waiter = self
                .shared
                .waiter
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(waiter) = waiter.as_ref() {
                waiter.wake_by_ref();
            }
        }
    }
}

/// A [`CallSet`] was full; the call comes back unchanged.
pub struct CallSetFull<T>(pub RemoteFuture<T>);

impl<T> fmt::Debug for CallSetFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallSetFull(..)")
    }
}

impl<T> fmt::Display for CallSetFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the call set is full")
    }
}

impl<T> std::error::Error for CallSetFull<T> {}

impl<T: WireValue> CallSet<T> {
    /// An empty set with room for `capacity` calls at once (at least one).
    /// Everything the set needs is allocated here.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let shared = Arc::new(Shared {
            ready: ArrayQueue::new(capacity),
            waiter: Mutex::new(None),
        });
        let slots = (0..capacity)
            .map(|index| {
                let wake = Arc::new(SlotWake {
                    index,
                    queued: AtomicBool::new(false),
                    shared: Arc::clone(&shared),
                });
                Slot {
                    call: None,
                    waker: Waker::from(Arc::clone(&wake)),
                    wake,
                }
            })
            .collect();
        Self {
            slots,
            free: (0..capacity).rev().collect(),
            shared,
            len: 0,
        }
    }

    /// Adds `call`; returns the slot it took, which [`join_next`](Self::join_next)
    /// reports with its result.
    ///
    /// # Errors
    ///
    /// [`CallSetFull`] with the call if the set holds
    /// [`capacity`](Self::capacity) calls.
    pub fn push(&mut self, call: RemoteFuture<T>) -> Result<usize, CallSetFull<T>> {
        let Some(index) = self.free.pop() else {
            return Err(CallSetFull(call));
        };
        self.slots[index].call = Some(call);
        self.len += 1;
        // Polled once soon, which registers the slot's waker with the call.
        self.slots[index].wake.wake_by_ref();
        Ok(index)
    }

    /// Calls in the set.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Is the set empty?
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most calls the set holds at once.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Polls for the next call to finish: `Ready(Some((slot, result)))`,
    /// `Ready(None)` if the set is empty, or `Pending` (the context's waker
    /// is woken when a call finishes).
    pub fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(usize, Result<T, RuntimeError>)>> {
        if self.len == 0 {
            return Poll::Ready(None);
        }
        self.register(cx.waker());
        while let Some(index) = self.shared.ready.pop() {
            let slot = &mut self.slots[index];
            // Cleared before the poll: a completion during the poll queues
            // the slot again rather than being missed.
            slot.wake.queued.store(false, Ordering::Release);
            let Some(call) = slot.call.as_mut() else {
                continue;
            };
            let mut slot_cx = Context::from_waker(&slot.waker);
            if let Poll::Ready(result) = Pin::new(call).poll(&mut slot_cx) {
                slot.call = None;
                self.free.push(index);
                self.len -= 1;
                return Poll::Ready(Some((index, result)));
            }
        }
        Poll::Pending
    }

    /// The next call to finish, with the slot it had; `None` once the set
    /// is empty.
    pub fn join_next(
        &mut self,
    ) -> impl Future<Output = Option<(usize, Result<T, RuntimeError>)>> + '_ {
        poll_fn(move |cx| self.poll_next(cx))
    }

    /// Every call's result, indexed by slot (`None` for an empty slot),
    /// once all have finished.
    pub async fn join_all(mut self) -> Vec<Option<Result<T, RuntimeError>>> {
        let mut results: Vec<_> = (0..self.capacity()).map(|_| None).collect();
        while let Some((index, result)) = self.join_next().await {
            results[index] = Some(result);
        }
        results
    }

    /// Remembers `waker` as the set's waiter, unless it already is.
    fn register(&self, waker: &Waker) {
        let mut waiter = self
            .shared
            .waiter
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match waiter.as_ref() {
            Some(current) if current.will_wake(waker) => {}
            _ => *waiter = Some(waker.clone()),
        }
    }
}

impl<T> fmt::Debug for CallSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallSet")
            .field("len", &self.len)
            .field("capacity", &self.slots.len())
            .finish_non_exhaustive()
    }
}
