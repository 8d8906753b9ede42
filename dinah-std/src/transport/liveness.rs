//! Noticing a peer that went silent: the bookkeeping a transport's driver
//! keeps for its heartbeats.
//!
//! A peer can stop without closing anything: a process stopped by
//! `SIGSTOP`, a host that froze, a network that drops everything. Its
//! connections stay open, so nothing fails until the deadlines of the
//! calls waiting on it pass. With liveness on, every rank sends each peer
//! a heartbeat ([`MessageKind::Heartbeat`]) every quarter of the timeout
//! and counts anything that arrives from a peer as a sign of life; a peer
//! heard from for none of the timeout is declared down
//! ([`DownReason::Silent`]), and its waiters fail with that error instead
//! of waiting for their deadlines.
//!
//! Everything happens on the owner thread, inside the driver's `poll`: a
//! rank whose runtime is not progressed sends no heartbeats, so to its
//! peers a rank that computes for longer than the timeout without
//! progressing its runtime looks the same as a frozen one. Such programs
//! run the runtime on a thread of its own (`RuntimeThread`), or raise or
//! turn off the timeout. The other way round, a rank whose own owner
//! stalled declares nobody silent for it: when a check finds that the last
//! one ran more than half a timeout ago, it counts every peer as just
//! heard, since it was not listening.
//!
//! A peer that said goodbye is done sending and is no longer watched.
//!
//! [`MessageKind::Heartbeat`]: dinah_core::wire::MessageKind::Heartbeat

use std::time::{Duration, Instant};

use dinah_core::{Rank, WorldSize};

#[cfg(doc)]
use super::DownReason;

/// A transport's liveness bookkeeping: when each peer was last heard
/// from, and when the next heartbeats are due.
#[derive(Debug)]
pub struct Liveness {
    /// `None`: liveness is off.
    timeout: Option<Duration>,
    /// Per rank: when something last arrived from it; `None` for a rank
    /// not watched (this rank, a peer that said goodbye or is down).
    heard: Box<[Option<Instant>]>,
    world: WorldSize,
    /// When the last check ran.
    checked: Instant,
    /// When the next check is due (`checked` plus the interval), kept so
    /// that every poll's question is one comparison; `None` when off.
    due: Option<Instant>,
}

impl Liveness {
    /// Liveness for rank `me` of `world` with `timeout` (`None`: off), at
    /// `now`: every other rank is watched, as if just heard from.
    pub fn new(timeout: Option<Duration>, world: WorldSize, me: Rank, now: Instant) -> Self {
        let heard = world
            .ranks()
            .map(|rank| (rank != me && timeout.is_some()).then_some(now))
            .collect();
        let mut liveness = Self {
            timeout,
            heard,
            world,
            checked: now,
            due: None,
        };
        liveness.due = liveness.interval().map(|interval| now + interval);
        liveness
    }

    /// The time between two heartbeats: a quarter of the timeout (at
    /// least a millisecond); `None` when liveness is off.
    pub fn interval(&self) -> Option<Duration> {
        self.timeout
            .map(|timeout| (timeout / 4).max(Duration::from_millis(1)))
    }

    /// Something arrived from `peer` at `now`.
    #[inline]
    pub fn heard(&mut self, peer: Rank, now: Instant) {
        if let Some(Some(at)) = self.heard.get_mut(peer.index()) {
            *at = now;
        }
    }

    /// Stops watching `peer`: it said goodbye, or it is down.
    pub fn forget(&mut self, peer: Rank) {
        if let Some(at) = self.heard.get_mut(peer.index()) {
            *at = None;
        }
    }

    /// Whether `peer` is watched.
    pub fn watches(&self, peer: Rank) -> bool {
        self.heard.get(peer.index()).is_some_and(Option::is_some)
    }

    /// When the next check is due ([`check`](Self::check)); `None` when
    /// liveness is off.
    #[inline]
    pub fn next_check(&self) -> Option<Instant> {
        self.due
    }

    /// The check of `now`, if one is due: appends every watched peer heard
    /// from for none of the timeout to `silent` (and stops watching it),
    /// and returns `true`: heartbeats are due to every peer still watched
    /// (and any other the transport still sends to). Returns `false`
    /// without doing anything when no check is due.
    pub fn check(&mut self, now: Instant, silent: &mut Vec<Rank>) -> bool {
        let (Some(timeout), Some(next)) = (self.timeout, self.due) else {
            return false;
        };
        if now < next {
            return false;
        }
        let stalled = now.saturating_duration_since(self.checked) > timeout / 2;
        self.checked = now;
        self.due = self.interval().map(|interval| now + interval);
        for (rank, heard) in self.world.ranks().zip(self.heard.iter_mut()) {
            let Some(at) = heard else { continue };
            if stalled {
                // This rank was not listening: nobody is judged on it.
                *at = now;
            } else if now.saturating_duration_since(*at) > timeout {
                *heard = None;
                silent.push(rank);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> WorldSize {
        WorldSize::new(3).unwrap()
    }

    fn rank(n: u32) -> Rank {
        world().rank(n).unwrap()
    }

    const TIMEOUT: Duration = Duration::from_millis(400);

    #[test]
    fn a_peer_heard_from_stays_and_a_silent_one_is_declared_once() {
        let start = Instant::now();
        let mut liveness = Liveness::new(Some(TIMEOUT), world(), rank(0), start);
        assert!(!liveness.watches(rank(0)));
        assert!(liveness.watches(rank(1)) && liveness.watches(rank(2)));
        let mut silent = Vec::new();
        let step = liveness.interval().unwrap();
        assert_eq!(step, TIMEOUT / 4);
        assert_eq!(liveness.next_check(), Some(start + step));
        assert!(
            !liveness.check(start + step / 2, &mut silent),
            "not due yet"
        );
        // Checks every interval; rank 1 speaks each time, rank 2 never.
        let mut now = start;
        for _ in 0..4 {
            now += step;
            liveness.heard(rank(1), now);
            assert!(liveness.check(now, &mut silent));
            assert!(silent.is_empty(), "{silent:?} at {:?}", now - start);
            assert_eq!(liveness.next_check(), Some(now + step), "due again");
        }
        now += step;
        liveness.heard(rank(1), now);
        assert!(liveness.check(now, &mut silent));
        assert_eq!(silent, [rank(2)]);
        assert!(!liveness.watches(rank(2)));
        // Declared once only.
        now += step;
        liveness.heard(rank(1), now);
        silent.clear();
        assert!(liveness.check(now, &mut silent));
        assert!(silent.is_empty());
    }

    #[test]
    fn a_stall_of_this_rank_declares_nobody() {
        let start = Instant::now();
        let mut liveness = Liveness::new(Some(TIMEOUT), world(), rank(0), start);
        let mut silent = Vec::new();
        // The owner comes back after three timeouts.
        let late = start + 3 * TIMEOUT;
        assert!(liveness.check(late, &mut silent));
        assert!(silent.is_empty());
        // Then checks on time: the silent peers go after one more timeout.
        let mut now = late;
        while silent.is_empty() {
            now += liveness.interval().unwrap();
            liveness.check(now, &mut silent);
        }
        assert!(now - late > TIMEOUT);
        assert_eq!(silent, [rank(1), rank(2)]);
    }

    #[test]
    fn forgotten_peers_and_liveness_off_declare_nobody() {
        let start = Instant::now();
        let mut liveness = Liveness::new(Some(TIMEOUT), world(), rank(0), start);
        liveness.forget(rank(1));
        liveness.forget(rank(2));
        let mut silent = Vec::new();
        let mut now = start;
        for _ in 0..10 {
            now += liveness.interval().unwrap();
            assert!(liveness.check(now, &mut silent));
        }
        assert!(silent.is_empty());
        let mut off = Liveness::new(None, world(), rank(0), start);
        assert_eq!(off.next_check(), None);
        assert!(!off.check(start + 100 * TIMEOUT, &mut silent));
        assert!(!off.watches(rank(1)));
    }
}
