//! The in-memory transport: N ranks over one seeded, simulated network
//! that can drop, duplicate, delay, reorder, hold back, partition and
//! disconnect frames, and that replays exactly from its seed.
//!
//! A [`SimNetwork`] is created from a world size, a `u64` seed and a
//! [`FaultPlan`]; [`SimNetwork::endpoint`] hands each rank its
//! [`TransportHandle`] and [`SimDriver`], the same pair a TCP or MPI
//! transport returns, so a runtime cannot tell the difference.
//!
//! There is no hello exchange: peers learn each other's admission
//! capacity ([`HandleConfig::admission_capacity`], read back with
//! [`TransportHandle::peer_admission`]) when their endpoints are taken.
//! Taking an endpoint records, on its handle, the capacity of every peer
//! whose endpoint was taken before, and on each of those peers' handles,
//! its own.
//!
//! # The model
//!
//! The network holds one FIFO queue per (source, destination, lane). A
//! driver's [`poll`](crate::transport::TransportDriver::poll) takes the
//! frames its handle queued (control lane first), completes each on the
//! handle, and puts it on its link after applying the plan; it then hands
//! its caller the frames due for its rank. A frame is due when it reaches
//! the head of its link and its delay has passed, so each lane is FIFO
//! unless the plan reorders it. Each delivery wakes the destination's
//! owner ([`Wakeup`](crate::transport::Wakeup)).
//!
//! The network counts time in **ticks**. In stepped mode
//! ([`SimMode::Stepped`], the default) the tick moves only with
//! [`SimNetwork::step`], and [`SimNetwork::clock`] (a
//! [`dinah_core::Clock`]) moves one tick's duration with it, so a runtime
//! using that clock sees its deadlines expire at exact, replayable steps.
//! In threaded mode ([`SimMode::Threaded`]) each rank's owner thread polls
//! its own driver concurrently, the clock is real time, and the tick
//! counts polls; see [`SimMode`] for what each mode supports.
//!
//! # Faults
//!
//! [`FaultPlan`] sets per-lane drop and duplicate probabilities, a fixed or
//! uniformly random [`Delay`], a reordering window and an inbox capacity
//! (saturation), plus [`Disconnect`]s and [`Partition`]s; each item's
//! documentation says exactly what it does. A frame's fate is decided when
//! its driver takes it from the handle, from that rank's own generator.
//!
//! # Determinism and replay
//!
//! Randomness comes from a repository-owned xoshiro256** generator per
//! sending rank, seeded with SplitMix64 from the network's seed (the
//! algorithm is described in the `rng` module's source and pinned by
//! reference vectors). In stepped mode, with the same seed, plan and
//! sequence of `step`, `poll` and `try_send` calls, every driver returns the
//! same events in the same order. The convention for tests: include the
//! network's [`Display`](std::fmt::Display) (world, seed, mode and every
//! fault) in each assertion message, so a failure can be replayed.
//!
//! # Shutdown and drain
//!
//! [`begin_shutdown`](crate::transport::TransportDriver::begin_shutdown)
//! closes the handle; once the frames already queued are sent, the driver
//! sends every peer not down a goodbye on each lane, announcing how many
//! frames it sent to that peer on that lane. The receiver counts the
//! frames it received from each peer per lane and reports
//! [`PeerDrained`](crate::transport::TransportEvent::PeerDrained) once both
//! goodbyes arrived and both counts match.
//!
//! - **Duplicates** are counted as the sender sent them: the network knows
//!   which copies it injected and does not count them, so duplication
//!   never prevents a drain. A copy may still arrive after `PeerDrained`
//!   (the runtime's deduplication handles it).
//! - **Drops** (including a dropped goodbye) make the counts never match:
//!   the peer stays undrained
//!   ([`DriverCounts::undrained_peers`](crate::transport::DriverCounts)),
//!   and the runtime's shutdown deadline bounds the wait.
//! - Goodbyes suffer the lane's faults like other frames (not the inbox
//!   capacity); a reordered goodbye is harmless, the counts decide.
//! - [`is_drained`](crate::transport::TransportDriver::is_drained) also
//!   waits until the network holds nothing from or for the rank (a late
//!   duplicate included), so a drained rank reports zero retained bytes.
//! - [`close`](crate::transport::TransportDriver::close) puts an end
//!   marker after everything already sent; a peer that had not drained the
//!   closed rank when the marker arrives reports it down with
//!   [`DownReason::EndOfStream`](crate::transport::DownReason::EndOfStream).
//!   A peer that had drained it marks it down quietly, so later sends to
//!   it fail at once.
//!
//! # Driving runtimes
//!
//! Stepped mode: give every runtime the network's clock and one endpoint,
//! and let one thread advance them all in turn (progress each runtime,
//! then [`step`](SimNetwork::step)). Nothing moves unless that thread
//! moves it, and `idle_wait` never parks, so a loop that waits for a
//! remote answer on one runtime alone would spin without progress.
//!
//! Threaded mode: move each endpoint's driver to its rank's owner thread,
//! which binds the handle's wakeup and polls; deliveries, disconnects,
//! freed inbox room and peers' progress during drain wake the owners.
//!
//! # Examples
//!
//! Two ranks in stepped mode, one frame with a two-tick delay:
//!
//! ```
//! use dinah_core::WorldSize;
//! use dinah_std::transport::memory::{Delay, FaultPlan, SimNetwork};
//! use dinah_std::transport::{Channel, HandleConfig, TransportDriver, TransportEvent};
//!
//! let world = WorldSize::new(2)?;
//! let plan = FaultPlan::new().delay(Channel::Action, Delay::Fixed(2));
//! let network = SimNetwork::new(world, 42, plan)?;
//! let (handle0, mut driver0) = network.endpoint(world.rank(0)?, HandleConfig::default())?;
//! let (_handle1, mut driver1) = network.endpoint(world.rank(1)?, HandleConfig::default())?;
//!
//! handle0.try_send(world.rank(1)?, Channel::Action, b"not a real frame".to_vec())?;
//! let mut events = Vec::new();
//! driver0.poll(64, &mut events)?; // PeerUp, and the frame enters the network
//! let mut arrived = || -> Result<bool, Box<dyn std::error::Error>> {
//!     events.clear();
//!     driver1.poll(64, &mut events)?;
//!     Ok(events.iter().any(|event| matches!(event, TransportEvent::Frame { .. })))
//! };
//! assert!(!arrived()?);
//! network.step();
//! assert!(!arrived()?);
//! network.step();
//! assert!(arrived()?, "{network}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod driver;
mod error;
mod fault;
mod link;
mod mode;
mod rng;
mod state;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dinah_core::{Rank, WorldSize};

pub use driver::SimDriver;
pub use error::{FaultKind, SimError};
pub use fault::{Delay, Disconnect, FaultPlan, LaneFaults, Partition, PartitionMode};
pub use mode::{SimClock, SimMode};
use state::NetState;
pub use state::SimCounts;

use super::{HandleConfig, TransportHandle};

/// One simulated network shared by every rank of a world.
///
/// Cheap to clone: clones share the network. `Send + Sync`, so threaded
/// tests can step or inspect it from anywhere. See the
/// [module documentation](self) for the model.
#[derive(Clone)]
pub struct SimNetwork {
    state: Arc<Mutex<NetState>>,
    clock: SimClock,
    world: WorldSize,
    seed: u64,
    mode: SimMode,
}

impl SimNetwork {
    /// A stepped network ([`SimMode::stepped`], one millisecond per tick).
    ///
    /// # Errors
    ///
    /// As [`with_mode`](Self::with_mode).
    pub fn new(world: WorldSize, seed: u64, plan: FaultPlan) -> Result<Self, SimError> {
        Self::with_mode(world, seed, plan, SimMode::stepped())
    }

    /// A network of `world` ranks running in `mode`, whose faults follow
    /// `plan` with randomness from `seed`. Disconnects at tick 0 take
    /// effect at once.
    ///
    /// # Errors
    ///
    /// [`SimError::ZeroTick`] for a stepped mode with a zero tick, or
    /// whatever [`FaultPlan::validate`] finds wrong with `plan`.
    pub fn with_mode(
        world: WorldSize,
        seed: u64,
        plan: FaultPlan,
        mode: SimMode,
    ) -> Result<Self, SimError> {
        let clock = match mode {
            SimMode::Stepped { tick } if tick.is_zero() => return Err(SimError::ZeroTick),
            SimMode::Stepped { .. } => SimClock::logical(),
            SimMode::Threaded => SimClock::real(),
        };
        plan.validate(world, mode)?;
        let state = NetState::new(world, seed, plan, mode);
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            clock,
            world,
            seed,
            mode,
        })
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        // See `SimDriver::lock`: a panicking test leaves a usable state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands out `rank`'s handle (with the sizes in `config`) and driver.
    /// The driver reports `PeerUp` for every peer not already down on its
    /// first poll. Frames sent to a rank before its endpoint is taken wait
    /// in the network.
    ///
    /// Peers learn each other's admission capacity when their endpoints
    /// are taken: the new handle knows the
    /// [`admission_capacity`](HandleConfig::admission_capacity) of every
    /// peer whose endpoint was taken before, and those peers' handles
    /// learn `config.admission_capacity`
    /// ([`TransportHandle::peer_admission`]).
    ///
    /// # Errors
    ///
    /// [`SimError::NoSuchRank`] if `rank` is not in the world,
    /// [`SimError::EndpointTaken`] if it was handed out before, or
    /// [`SimError::EmptyHandleQueue`] if a queue size in `config` is zero.
    pub fn endpoint(
        &self,
        rank: Rank,
        config: HandleConfig,
    ) -> Result<(TransportHandle, SimDriver), SimError> {
        if !self.world.contains(rank) {
            return Err(SimError::NoSuchRank { rank });
        }
        if config.action_queue == 0 || config.control_queue == 0 {
            return Err(SimError::EmptyHandleQueue);
        }
        let mut state = self.lock();
        if state.is_claimed(rank) {
            return Err(SimError::EndpointTaken { rank });
        }
        let handle = TransportHandle::new(rank, self.world, config);
        state.claim(rank, &handle);
        drop(state);
        let stepped = !self.mode.is_threaded();
        let driver = SimDriver::new(Arc::clone(&self.state), rank, handle.clone(), stepped);
        Ok((handle, driver))
    }

    /// Every rank's endpoint, in rank order, all with `config`.
    ///
    /// # Errors
    ///
    /// As [`endpoint`](Self::endpoint).
    pub fn endpoints(
        &self,
        config: HandleConfig,
    ) -> Result<Vec<(TransportHandle, SimDriver)>, SimError> {
        self.world
            .ranks()
            .map(|rank| self.endpoint(rank, config))
            .collect()
    }

    /// Advances the network by one tick: moves the clock forward by one
    /// tick's duration (stepped mode), applies the disconnects scheduled
    /// for the new tick, and wakes every rank with a frame now due.
    /// Returns the new tick.
    ///
    /// In threaded mode the tick also advances with every poll; a step
    /// adds one more.
    pub fn step(&self) -> u64 {
        let mut state = self.lock();
        if let SimMode::Stepped { tick } = self.mode {
            self.clock.advance(tick);
        }
        state.advance()
    }

    /// Steps `ticks` times; returns the new tick.
    pub fn advance(&self, ticks: u64) -> u64 {
        let mut now = self.tick();
        for _ in 0..ticks {
            now = self.step();
        }
        now
    }

    /// The current tick.
    pub fn tick(&self) -> u64 {
        self.lock().tick
    }

    /// The network's clock, for a runtime's deadlines (see [`SimClock`]).
    pub fn clock(&self) -> SimClock {
        self.clock.clone()
    }

    /// The seed every fault decision derives from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.world
    }

    /// How the network runs.
    pub fn mode(&self) -> SimMode {
        self.mode
    }

    /// The fault plan.
    pub fn plan(&self) -> FaultPlan {
        self.lock().plan.clone()
    }

    /// Network-wide statistics: what the faults did and what is in
    /// transit.
    pub fn counts(&self) -> SimCounts {
        self.lock().counts()
    }
}

/// Everything needed to replay the network: world, seed, mode and faults.
impl fmt::Display for SimNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        write!(
            f,
            "simulated network of {} ranks, seed {}, {}, at tick {}; faults: {}",
            self.world.get(),
            self.seed,
            self.mode,
            state.tick,
            state.plan
        )
    }
}

impl fmt::Debug for SimNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimNetwork")
            .field("world", &self.world)
            .field("seed", &self.seed)
            .field("mode", &self.mode)
            .field("counts", &self.counts())
            .finish()
    }
}
