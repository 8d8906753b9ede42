//! Who is in the run and where each rank listens.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use dinah_core::{Rank, WorldSize};

use dinah_launch::{Authentication, LaunchEnv, LaunchError, Rendezvous, RendezvousParts};

use crate::auth::RunKey;

/// This rank's view of the run: its rank, the world size, the address every
/// rank listens on (indexed by rank), and optionally a listener already
/// bound for this rank.
///
/// [`TcpTransport::connect`](crate::TcpTransport::connect) binds
/// [`bind_addr`](Self::bind_addr) (this rank's own entry of the address
/// list, unless [`with_bind_addr`](Self::with_bind_addr) says otherwise),
/// or uses the listener given with [`with_listener`](Self::with_listener).
/// Pre-binding on port 0 avoids port races: in-process tests bind every
/// rank's listener first ([`Membership::loopback`] does it), and the
/// `dinah-run` launcher has each child bind and report its port before it
/// hands out the full list.
///
/// A membership also says how this rank proves that it belongs to the run
/// (see [`RunKey`]): with the key given by [`with_key`](Self::with_key)
/// (memberships made by [`Membership::loopback`] and `dinah-run` have one),
/// else with the key in the environment (`DINAH_KEY`, `DINAH_KEY_FILE`),
/// read when the transport connects; without one, connecting fails with
/// [`TcpError::NoKey`](crate::TcpError::NoKey) unless
/// [`without_authentication`](Self::without_authentication) turned the
/// proof off.
///
/// # Examples
///
/// ```
/// use dinah_core::WorldSize;
/// use dinah_tcp::Membership;
///
/// let world = WorldSize::new(2)?;
/// let addrs = vec!["127.0.0.1:7000".parse()?, "127.0.0.1:7001".parse()?];
/// let membership = Membership::new(world.rank(1)?, world, addrs)?;
/// assert_eq!(membership.bind_addr().port(), 7001);
/// assert_eq!(membership.addr(world.rank(0)?).port(), 7000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Membership {
    rank: Rank,
    world: WorldSize,
    addrs: Vec<SocketAddr>,
    bind: Option<SocketAddr>,
    listener: Option<TcpListener>,
    auth: Authentication,
}

impl Membership {
    /// `rank` of `world`, where rank `i` listens on `addrs[i]`.
    ///
    /// # Errors
    ///
    /// [`MembershipError::RankOutOfRange`] if `rank` is not below `world`;
    /// [`MembershipError::AddressCount`] unless there is exactly one address
    /// per rank.
    pub fn new(
        rank: Rank,
        world: WorldSize,
        addrs: Vec<SocketAddr>,
    ) -> Result<Self, MembershipError> {
        if !world.contains(rank) {
            return Err(MembershipError::RankOutOfRange {
                rank: rank.get(),
                world: world.get(),
            });
        }
        if addrs.len() != world.get() as usize {
            return Err(MembershipError::AddressCount {
                expected: world.get(),
                found: addrs.len(),
            });
        }
        Ok(Self {
            rank,
            world,
            addrs,
            bind: None,
            listener: None,
            auth: Authentication::FromEnv,
        })
    }

    /// Proves this rank's membership with `key`, which every rank of the
    /// run holds.
    pub fn with_key(mut self, key: RunKey) -> Self {
        self.auth = Authentication::Key(key);
        self
    }

    /// Turns the proof of membership off: anyone who can reach a listener
    /// and knows the run's hello (run ID, world size, limits, registry
    /// fingerprint) can take a rank's place during set-up. Every rank of
    /// the run must do the same (the hellos say it, and a rank that proves
    /// its membership refuses one that does not). Connecting then prints
    /// a warning on standard error, once per process.
    pub fn without_authentication(mut self) -> Self {
        self.auth = Authentication::Off;
        self
    }

    /// Whether this rank proves its membership with a key given here
    /// (`false` when the key comes from the environment or the proof is
    /// off).
    pub fn has_key(&self) -> bool {
        matches!(self.auth, Authentication::Key(_))
    }

    /// How this rank proves its membership.
    pub(crate) fn auth(&self) -> &Authentication {
        &self.auth
    }

    /// Uses `listener`, already bound, for this rank's incoming
    /// connections instead of binding [`bind_addr`](Self::bind_addr). Its
    /// address should be the one the other ranks were given for this rank
    /// (it may be a wildcard address on the advertised port).
    pub fn with_listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Binds `addr` instead of this rank's entry of the address list (for
    /// example `0.0.0.0:port` while the others dial a routable address).
    /// Ignored when a listener was given.
    pub fn with_bind_addr(mut self, addr: SocketAddr) -> Self {
        self.bind = Some(addr);
        self
    }

    /// One membership per rank of `world`, each with a listener bound on
    /// `127.0.0.1` and a port the system picked, for running every rank in
    /// one process (tests, benchmarks, examples). All share one fresh
    /// [`RunKey`].
    ///
    /// # Errors
    ///
    /// The error of binding or querying a listener, or of the random
    /// generator making the key.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::WorldSize;
    /// use dinah_tcp::Membership;
    ///
    /// let members = Membership::loopback(WorldSize::new(3)?)?;
    /// assert_eq!(members.len(), 3);
    /// assert!(members[2].listener().is_some());
    /// assert!(members[0].addrs().iter().all(|addr| addr.ip().is_loopback()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn loopback(world: WorldSize) -> io::Result<Vec<Self>> {
        let listeners = world
            .ranks()
            .map(|_| crate::socket::bind((Ipv4Addr::LOCALHOST, 0).into()))
            .collect::<io::Result<Vec<_>>>()?;
        let addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<io::Result<Vec<_>>>()?;
        let key = RunKey::generate()?;
        Ok(world
            .ranks()
            .zip(listeners)
            .map(|(rank, listener)| Self {
                rank,
                world,
                addrs: addrs.clone(),
                bind: None,
                listener: Some(listener),
                auth: Authentication::Key(key.clone()),
            })
            .collect())
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.world
    }

    /// Every rank's listening address, indexed by rank.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The address `rank` listens on.
    ///
    /// # Panics
    ///
    /// If `rank` is not a rank of this world.
    pub fn addr(&self, rank: Rank) -> SocketAddr {
        self.addrs[rank.index()]
    }

    /// The address this rank binds when no listener was given: the one set
    /// with [`with_bind_addr`](Self::with_bind_addr), else its own entry of
    /// the address list.
    pub fn bind_addr(&self) -> SocketAddr {
        self.bind.unwrap_or(self.addrs[self.rank.index()])
    }

    /// The pre-bound listener, if one was given.
    pub fn listener(&self) -> Option<&TcpListener> {
        self.listener.as_ref()
    }

    /// Takes the pre-bound listener out.
    pub(crate) fn take_listener(&mut self) -> Option<TcpListener> {
        self.listener.take()
    }
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Membership")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("addrs", &self.addrs)
            .field("bind", &self.bind)
            .field(
                "listener",
                &self.listener.as_ref().and_then(|l| l.local_addr().ok()),
            )
            .field(
                "auth",
                &match self.auth {
                    Authentication::FromEnv => "key from the environment",
                    Authentication::Key(_) => "key given",
                    Authentication::Off => "off",
                },
            )
            .finish()
    }
}

impl From<Rendezvous> for Membership {
    /// The membership a rendezvous learned: its rank, world and addresses,
    /// its listener if it bound one, and its way of proving the key.
    fn from(met: Rendezvous) -> Self {
        let RendezvousParts {
            rank,
            world,
            addrs,
            listener,
            authentication,
            ..
        } = met.into_parts();
        let membership = Self::new(rank, world, addrs)
            .expect("a rendezvous checks the rank and the address count");
        Self {
            listener,
            auth: authentication,
            ..membership
        }
    }
}

impl Membership {
    /// The membership of a rank started by `dinah-run`, `srun`, `mpirun`
    /// or `mpiexec` (or with `DINAH_RANK` set by hand): reads the
    /// environment ([`LaunchEnv::from_env`]) and meets the other ranks
    /// ([`LaunchEnv::rendezvous`]).
    ///
    /// # Errors
    ///
    /// As [`LaunchEnv::from_env`] and [`LaunchEnv::rendezvous`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use dinah_tcp::Membership;
    ///
    /// let membership = Membership::from_env()?;
    /// println!("rank {} of {}", membership.rank().get(), membership.world().get());
    /// # Ok::<(), dinah_tcp::LaunchError>(())
    /// ```
    pub fn from_env() -> Result<Self, LaunchError> {
        LaunchEnv::from_env()?.rendezvous().map(Self::from)
    }
}

/// A [`Membership`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MembershipError {
    /// The rank is not below the world size.
    RankOutOfRange {
        /// The rank given.
        rank: u32,
        /// The world size.
        world: u32,
    },
    /// The address list does not have one entry per rank.
    AddressCount {
        /// The world size.
        expected: u32,
        /// The addresses given.
        found: usize,
    },
}

impl fmt::Display for MembershipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RankOutOfRange { rank, world } => {
                write!(f, "rank {rank} is outside a world of {world} rank(s)")
            }
            Self::AddressCount { expected, found } => {
                write!(
                    f,
                    "{found} address(es) given for a world of {expected} rank(s)"
                )
            }
        }
    }
}

impl std::error::Error for MembershipError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from((Ipv4Addr::LOCALHOST, 9000 + i)))
            .collect()
    }

    #[test]
    fn new_checks_the_rank_and_the_address_count() {
        let world = WorldSize::new(2).unwrap();
        let big = WorldSize::new(4).unwrap();
        let outsider = big.rank(3).unwrap();
        assert_eq!(
            Membership::new(outsider, world, addrs(2)).unwrap_err(),
            MembershipError::RankOutOfRange { rank: 3, world: 2 }
        );
        assert_eq!(
            Membership::new(Rank::ZERO, world, addrs(3)).unwrap_err(),
            MembershipError::AddressCount {
                expected: 2,
                found: 3
            }
        );
        let m = Membership::new(Rank::ZERO, world, addrs(2)).unwrap();
        assert_eq!(m.bind_addr(), addrs(2)[0]);
        let wildcard = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 9000));
        assert_eq!(m.with_bind_addr(wildcard).bind_addr(), wildcard);
    }

    #[test]
    fn loopback_prebinds_distinct_listeners() {
        let members = Membership::loopback(WorldSize::new(3).unwrap()).unwrap();
        let ports: Vec<_> = members[0].addrs().iter().map(SocketAddr::port).collect();
        assert!(ports.iter().all(|&p| p != 0));
        for (i, m) in members.iter().enumerate() {
            assert_eq!(m.rank().index(), i);
            assert_eq!(m.listener().unwrap().local_addr().unwrap(), m.bind_addr());
            assert!(format!("{m:?}").contains("Membership"));
        }
    }
}
