//! Broadcast and reduce: one rank's value to every rank, and every rank's
//! value combined at one rank.
//!
//! Both run over binomial trees of the runtime's own action, [`Deliver`],
//! with ranks numbered relative to the root (`rel = (rank - root) mod n`):
//!
//! - **Broadcast.** Rank `rel > 0` receives the value in round `k` from
//!   `rel - 2^k`, where `2^k` is the lowest set bit of `rel`, then sends
//!   it on to `rel + 2^j` in round `j` for every `2^j < 2^k` (the root:
//!   every `2^j < n`), where that rank exists. Every rank has the value
//!   after `ceil(log2 n)` rounds.
//! - **Reduce.** The mirror image: in round `k`, a rank whose bit `k` is
//!   set sends its partial result to `rel - 2^k` and is done; the others
//!   receive from `rel + 2^k`, if it exists, and combine `op(own,
//!   received)`. A partial result of rank `rel` after round `k` covers
//!   ranks `rel` to `rel + 2^(k+1) - 1` in order, so the root ends with
//!   `op` folded over the ranks in relative order: `op` must be
//!   associative, not commutative.
//!
//! Each collective call takes its rank's next collective epoch (every rank
//! calls them in the same order). A delivery waits in a bounded mailbox,
//! keyed by epoch and round, until its receiver gets there, so a rank may
//! run ahead of a slower one by as many deliveries as the mailbox holds;
//! a sender that finds it full tries again until its deadline.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::{Instant, Rank, RuntimeState};

use super::caller::{RemoteFuture, SpawnOptions};
use super::client::RuntimeClient;
use super::error::{FailureKind, RuntimeError};
use super::hub::Hub;
use crate::action::{
    Action, ActionError, CodecError, SegmentReader, SegmentWriter, WireValue, action_id, schema_id,
};

/// The most deliveries a rank keeps for collectives it has not reached.
const MAILBOX: usize = 64;

/// The handler's answer when the mailbox is full (the sender retries).
const MAILBOX_FULL: &str = "collective mailbox full";

/// "Here is the value of round `round` of collective `epoch`": the
/// runtime's own action, registered on every rank and run on the owner
/// thread. The value travels as one group of its type's records, with the
/// type's schema ID.
pub(crate) struct Deliver {
    epoch: u64,
    round: u8,
    schema: u64,
    value: Vec<u8>,
}

impl Deliver {
    /// Keeps this delivery in `collectives` (the handler); the mailbox
    /// holds at most `budget` bytes.
    ///
    /// # Errors
    ///
    /// As [`Collectives::record`].
    pub(crate) fn record(self, collectives: &Collectives, budget: u64) -> Result<(), ActionError> {
        collectives.record(self, budget)
    }
}

impl WireValue for Deliver {
    const SCHEMA_ID: u64 = schema_id("dinah.collective.Deliver/1");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.epoch, self.round, self.schema).encode(out)?;
        out.push(&self.value);
        Ok(())
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (epoch, round, schema) = <(u64, u8, u64)>::decode(input)?;
        let value = input.next_segment()?.to_vec();
        Ok(Self {
            epoch,
            round,
            schema,
            value,
        })
    }
}

impl Action for Deliver {
    const ID: u128 = action_id("dinah.collective.Deliver/1");
    type Output = ();
}

/// This rank's side of the collectives: the deliveries kept and the
/// collective in progress, if any.
#[derive(Default)]
pub(crate) struct Collectives {
    state: Mutex<State>,
    /// The running collective's deadline in nanoseconds, or 0: read by the
    /// owner on every round without the lock.
    deadline: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Collectives this rank has left (successfully or not).
    left: u64,
    running: bool,
    mailbox: Vec<Deliver>,
    /// Bytes of the values in the mailbox.
    bytes: u64,
    waiter: Option<Waker>,
}

impl Collectives {
    /// Keeps a delivery from a peer and wakes the running collective.
    ///
    /// # Errors
    ///
    /// An [`ActionError`] if the delivery is for a collective this rank has
    /// left, was heard before (the ranks are out of step), or does not fit
    /// the mailbox (the sender tries again).
    fn record(&self, delivery: Deliver, budget: u64) -> Result<(), ActionError> {
        let mut state = self.lock();
        if delivery.epoch < state.left {
            return Err(ActionError::new("collective delivery out of step"));
        }
        if state
            .mailbox
            .iter()
            .any(|kept| kept.epoch == delivery.epoch && kept.round == delivery.round)
        {
            return Err(ActionError::new("collective delivery heard twice"));
        }
        let bytes = delivery.value.len() as u64;
        if state.mailbox.len() >= MAILBOX || state.bytes.saturating_add(bytes) > budget {
            return Err(ActionError::new(MAILBOX_FULL));
        }
        state.bytes += bytes;
        state.mailbox.push(delivery);
        if let Some(waiter) = state.waiter.take() {
            waiter.wake();
        }
        Ok(())
    }

    /// Starts a collective that must end by `deadline`; returns its epoch.
    fn begin(&self, deadline: Instant) -> Result<u64, RuntimeError> {
        let mut state = self.lock();
        if state.running {
            return Err(RuntimeError::CollectiveInProgress);
        }
        state.running = true;
        self.deadline
            .store(deadline.as_nanos().max(1), Ordering::Relaxed);
        Ok(state.left)
    }

    /// Ends the running collective of `epoch`, dropping whatever of it is
    /// still in the mailbox (it failed before taking it).
    fn end(&self, epoch: u64) {
        let mut state = self.lock();
        state.left = epoch + 1;
        state.running = false;
        state.waiter = None;
        let State { mailbox, bytes, .. } = &mut *state;
        mailbox.retain(|kept| {
            let stale = kept.epoch <= epoch;
            if stale {
                *bytes -= kept.value.len() as u64;
            }
            !stale
        });
        self.deadline.store(0, Ordering::Relaxed);
    }

    /// Takes the delivery of `(epoch, round)` if it arrived; otherwise
    /// remembers `cx`'s waker.
    fn take(&self, epoch: u64, round: u8, cx: &Context<'_>) -> Poll<Deliver> {
        let mut state = self.lock();
        let found = state
            .mailbox
            .iter()
            .position(|kept| kept.epoch == epoch && kept.round == round);
        if let Some(at) = found {
            let delivery = state.mailbox.swap_remove(at);
            state.bytes -= delivery.value.len() as u64;
            return Poll::Ready(delivery);
        }
        match &state.waiter {
            Some(waiter) if waiter.will_wake(cx.waker()) => {}
            _ => state.waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The running collective's deadline, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.deadline.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Instant::from_nanos(nanos)),
        }
    }

    /// Wakes the running collective if its deadline passed by `now` (the
    /// owner, every round).
    pub(crate) fn expire(&self, now: Instant) {
        if self.deadline().is_some_and(|deadline| now >= deadline) {
            self.wake();
        }
    }

    /// Wakes the running collective so it looks again (a peer went down).
    pub(crate) fn wake(&self) {
        if let Some(waiter) = self.lock().waiter.take() {
            waiter.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Ends the collective's epoch however it ends (success, error, or its
/// future dropped).
struct EpochGuard<'a> {
    hub: &'a Hub,
    epoch: u64,
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        self.hub.collectives.end(self.epoch);
    }
}

/// One collective in progress on this rank: its epoch, deadline and
/// place in the tree.
struct Tree<'a> {
    client: &'a RuntimeClient,
    epoch: u64,
    deadline: Instant,
    timeout: Duration,
    root: u32,
    size: u32,
    /// This rank, relative to the root.
    rel: u32,
}

impl Tree<'_> {
    /// The rank `rel` ranks after the root.
    fn rank(&self, rel: u32) -> Rank {
        let index = (self.root + rel) % self.size;
        Rank::new(index, self.client.hub.world).unwrap_or(self.client.hub.rank)
    }

    fn deadline_exceeded(&self) -> RuntimeError {
        RuntimeError::DeadlineExceeded {
            after: self.timeout,
        }
    }

    /// Sends `value` (of schema `schema`) to relative rank `rel` as round
    /// `round`, trying again while its mailbox is full.
    fn send(&self, rel: u32, round: u8, schema: u64, value: &[u8]) -> Sending {
        let to = self.rank(rel);
        let call = self.call(to, round, schema, value);
        Sending {
            to,
            round,
            call: call.unwrap_or_else(RemoteFuture::failed),
        }
    }

    fn call(
        &self,
        to: Rank,
        round: u8,
        schema: u64,
        value: &[u8],
    ) -> Result<RemoteFuture<()>, RuntimeError> {
        let hub = &self.client.hub;
        let left = self.deadline.saturating_duration_since(hub.clock.now());
        if left.is_zero() {
            return Err(self.deadline_exceeded());
        }
        let delivery = Deliver {
            epoch: self.epoch,
            round,
            schema,
            value: value.to_vec(),
        };
        Ok(self
            .client
            .spawn_on_with(to, delivery, SpawnOptions::deadline(left)))
    }

    /// Waits for every send, resending those that found a full mailbox.
    async fn finish(
        &self,
        sends: Vec<Sending>,
        schema: u64,
        value: &[u8],
    ) -> Result<(), RuntimeError> {
        for mut sending in sends {
            loop {
                match sending.call.await {
                    Err(RuntimeError::Remote {
                        kind: FailureKind::Returned,
                        text,
                        ..
                    }) if text == MAILBOX_FULL => {
                        yield_once().await;
                        let call = self.call(sending.to, sending.round, schema, value)?;
                        sending.call = call;
                    }
                    result => {
                        result?;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits for the delivery of round `round` (from the relative rank the
    /// caller knows); fails once any rank of the world is down.
    async fn receive(&self, round: u8) -> Result<Deliver, RuntimeError> {
        let hub = &*self.client.hub;
        poll_fn(|cx| {
            if let Poll::Ready(delivery) = hub.collectives.take(self.epoch, round, cx) {
                return Poll::Ready(Ok(delivery));
            }
            if hub.clock.now() >= self.deadline {
                return Poll::Ready(Err(self.deadline_exceeded()));
            }
            if let Some(gone) = super::caller::any_rank_down(hub) {
                return Poll::Ready(Err(gone));
            }
            Poll::Pending
        })
        .await
    }
}

/// A delivery on its way.
struct Sending {
    to: Rank,
    round: u8,
    call: RemoteFuture<()>,
}

/// Returns `Pending` once, waking itself: lets the runtime progress a
/// round before a retry.
async fn yield_once() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// `value` as one group of its records.
fn encode_group<T: WireValue>(value: &T) -> Result<Vec<u8>, RuntimeError> {
    let mut writer = SegmentWriter::new();
    writer
        .push_group(|group| value.encode(group))
        .map_err(RuntimeError::Codec)?;
    Ok(writer
        .segments()
        .next()
        .map(<[u8]>::to_vec)
        .unwrap_or_default())
}

/// The value of a delivery, checked to be a `T`.
fn decode_group<T: WireValue>(delivery: &Deliver) -> Result<T, RuntimeError> {
    if delivery.schema != T::SCHEMA_ID {
        return Err(RuntimeError::Codec(CodecError::SchemaMismatch {
            expected: T::SCHEMA_ID,
            found: delivery.schema,
        }));
    }
    let mut reader = SegmentReader::from_group(&delivery.value);
    let value = T::decode(&mut reader).map_err(RuntimeError::Codec)?;
    reader.finish().map_err(RuntimeError::Codec)?;
    Ok(value)
}

impl RuntimeClient {
    /// Starts a collective rooted at `root`, ending by `timeout`.
    fn begin_collective(&self, root: Rank, timeout: Duration) -> Result<Tree<'_>, RuntimeError> {
        let hub = &*self.hub;
        let state = hub.state.load();
        if state != RuntimeState::Running {
            return Err(RuntimeError::State { state });
        }
        if !hub.world.contains(root) {
            return Err(RuntimeError::NoSuchRank { rank: root });
        }
        if timeout.is_zero() {
            return Err(RuntimeError::InvalidDeadline);
        }
        let deadline = hub
            .clock
            .now()
            .checked_add(timeout)
            .ok_or(RuntimeError::InvalidDeadline)?;
        let epoch = hub.collectives.begin(deadline)?;
        let size = hub.world.get();
        Ok(Tree {
            client: self,
            epoch,
            deadline,
            timeout,
            root: root.get(),
            size,
            rel: (hub.rank.get() + size - root.get()) % size,
        })
    }

    /// Gives every rank the value of rank `root`: `root` passes
    /// `Some(value)`, every other rank `None`, and each gets the value
    /// back (the root its own). All ranks must call it, in the same order
    /// as their other collectives, while the runtime is progressed. It
    /// takes `ceil(log2 n)` rounds of one call per receiving rank.
    ///
    /// # Errors
    ///
    /// - [`RuntimeError::MissingRootValue`] if this rank is `root` and
    ///   passed `None`;
    /// - [`RuntimeError::DeadlineExceeded`] if the value did not arrive or
    ///   could not be passed on in time;
    /// - [`RuntimeError::Transport`] if a rank this one receives from or
    ///   sends to is gone;
    /// - [`RuntimeError::Codec`] if the value does not encode, or another
    ///   type arrived ([`CodecError::SchemaMismatch`]);
    /// - [`RuntimeError::CollectiveInProgress`], [`RuntimeError::State`],
    ///   [`RuntimeError::NoSuchRank`], [`RuntimeError::InvalidDeadline`],
    ///   and any error of the calls that carry the value.
    ///
    /// These last four, and `MissingRootValue`, are returned before the
    /// broadcast starts, and the ranks stay in step. After any other
    /// error they may be out of step, as after a failed barrier: later
    /// collectives then fail rather than mix up values.
    pub async fn broadcast<T: WireValue>(
        &self,
        root: Rank,
        value: Option<T>,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        // Refused before it takes a collective number, so the ranks stay
        // in step.
        let value = match value {
            None if root == self.hub.rank => return Err(RuntimeError::MissingRootValue),
            value => value,
        };
        let tree = self.begin_collective(root, timeout)?;
        let _guard = EpochGuard {
            hub: &self.hub,
            epoch: tree.epoch,
        };
        // The rounds this rank sends in: below its own receiving round.
        let (bytes, value, below) = if tree.rel == 0 {
            let value = value.ok_or(RuntimeError::MissingRootValue)?;
            let bytes = encode_group(&value)?;
            (bytes, value, tree.size.next_power_of_two())
        } else {
            let round = tree.rel.trailing_zeros();
            let delivery = tree.receive(round as u8).await?;
            let value = decode_group::<T>(&delivery)?;
            (delivery.value, value, 1 << round)
        };
        let sends = (0..u32::BITS)
            .take_while(|&round| 1_u32 << round < below)
            .filter(|&round| tree.rel + (1 << round) < tree.size)
            .map(|round| tree.send(tree.rel + (1 << round), round as u8, T::SCHEMA_ID, &bytes))
            .collect();
        tree.finish(sends, T::SCHEMA_ID, &bytes).await?;
        Ok(value)
    }

    /// Combines every rank's `value` at `root` with `op`, folded over the
    /// ranks in order starting from `root` (`op` must be associative; it
    /// need not be commutative). `root` gets `Some(result)`, every other
    /// rank `None` once its part is passed on. All ranks must call it, in
    /// the same order as their other collectives, while the runtime is
    /// progressed; it takes `ceil(log2 n)` rounds.
    ///
    /// # Errors
    ///
    /// As [`broadcast`](Self::broadcast), without `MissingRootValue`.
    pub async fn reduce<T: WireValue>(
        &self,
        root: Rank,
        value: T,
        op: impl Fn(T, T) -> T,
        timeout: Duration,
    ) -> Result<Option<T>, RuntimeError> {
        let tree = self.begin_collective(root, timeout)?;
        let _guard = EpochGuard {
            hub: &self.hub,
            epoch: tree.epoch,
        };
        let mut own = value;
        let mut round = 0_u32;
        while (1_u32 << round) < tree.size {
            let bit = 1_u32 << round;
            if tree.rel & bit != 0 {
                let bytes = encode_group(&own)?;
                let send = tree.send(tree.rel - bit, round as u8, T::SCHEMA_ID, &bytes);
                tree.finish(vec![send], T::SCHEMA_ID, &bytes).await?;
                return Ok(None);
            }
            if tree.rel + bit < tree.size {
                let delivery = tree.receive(round as u8).await?;
                own = op(own, decode_group(&delivery)?);
            }
            round += 1;
        }
        Ok(Some(own))
    }

    /// Combines every rank's `value` with `op` (as [`reduce`](Self::reduce)
    /// at rank 0) and gives every rank the result: a reduce and a
    /// broadcast, within one `timeout`.
    ///
    /// # Errors
    ///
    /// As [`reduce`](Self::reduce) and [`broadcast`](Self::broadcast).
    pub async fn all_reduce<T: WireValue>(
        &self,
        value: T,
        op: impl Fn(T, T) -> T,
        timeout: Duration,
    ) -> Result<T, RuntimeError> {
        let hub = &*self.hub;
        let start = hub.clock.now();
        let reduced = self.reduce(Rank::ZERO, value, op, timeout).await?;
        let spent = hub.clock.now().saturating_duration_since(start);
        let left = timeout.saturating_sub(spent);
        if left.is_zero() {
            return Err(RuntimeError::DeadlineExceeded { after: timeout });
        }
        self.broadcast(Rank::ZERO, reduced, left).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(epoch: u64, round: u8, bytes: usize) -> Deliver {
        Deliver {
            epoch,
            round,
            schema: 1,
            value: vec![0; bytes],
        }
    }

    #[test]
    fn the_mailbox_keeps_deliveries_by_epoch_and_round_within_its_bounds() {
        let collectives = Collectives::default();
        let waker = Waker::noop();
        let cx = Context::from_waker(waker);
        collectives.record(delivery(1, 0, 4), 100).unwrap();
        collectives.record(delivery(0, 2, 4), 100).unwrap();
        let twice = collectives.record(delivery(0, 2, 4), 100).unwrap_err();
        assert!(twice.text().contains("twice"));
        let full = collectives.record(delivery(2, 0, 93), 100).unwrap_err();
        assert_eq!(full.text(), MAILBOX_FULL);
        let epoch = collectives.begin(Instant::MAX).unwrap();
        assert_eq!(epoch, 0);
        assert!(matches!(
            collectives.begin(Instant::MAX),
            Err(RuntimeError::CollectiveInProgress)
        ));
        assert!(collectives.take(0, 1, &cx).is_pending());
        assert!(matches!(collectives.take(0, 2, &cx), Poll::Ready(d) if d.round == 2));
        collectives.end(0);
        // Epoch 0 is over: its deliveries are refused, epoch 1's was kept.
        assert!(collectives.record(delivery(0, 3, 1), 100).is_err());
        assert_eq!(collectives.begin(Instant::MAX).unwrap(), 1);
        assert!(matches!(collectives.take(1, 0, &cx), Poll::Ready(_)));
        collectives.end(1);
        for round in 0..MAILBOX as u8 {
            collectives.record(delivery(5, round, 0), 100).unwrap();
        }
        let full = collectives.record(delivery(6, 0, 0), 100).unwrap_err();
        assert_eq!(full.text(), MAILBOX_FULL);
    }

    #[test]
    fn a_value_travels_as_one_group_and_is_checked_for_its_type() {
        let bytes = encode_group(&(7_u32, String::from("seven"))).unwrap();
        let delivery = Deliver {
            epoch: 0,
            round: 0,
            schema: <(u32, String)>::SCHEMA_ID,
            value: bytes,
        };
        let back: (u32, String) = decode_group(&delivery).unwrap();
        assert_eq!(back, (7, String::from("seven")));
        assert!(matches!(
            decode_group::<u64>(&delivery),
            Err(RuntimeError::Codec(CodecError::SchemaMismatch { .. }))
        ));
    }
}
