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

mod mailbox;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use dinah_core::{Instant, Rank, RuntimeState};

use super::caller::{RemoteFuture, SpawnOptions};
use super::client::RuntimeClient;
use super::error::{FailureKind, RuntimeError};
use crate::action::{CodecError, SegmentReader, SegmentWriter, WireValue};

pub(crate) use mailbox::{Collectives, Deliver};
use mailbox::{EpochGuard, MAILBOX_FULL};

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
