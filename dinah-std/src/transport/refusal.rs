//! Connections a transport refused during set-up, as the runtime's
//! statistics report them: a count and the first few, each with its
//! remote address, the rank it claimed and why, in a form that is
//! `Copy` (the statistics are a plain snapshot) and names no payload and
//! no key.

use core::fmt;
use std::io;
use std::net::SocketAddr;

use dinah_core::Rank;
use dinah_core::wire::HelloField;

/// How many refusals [`Refusals`] keeps (the first ones).
pub const KEPT_REFUSALS: usize = 8;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalCause {
    /// Its first bytes were not a hello of this protocol version.
    NotAHello,
    /// Its hello differs from this rank's (another run, registry, world,
    /// limits, authentication...).
    Mismatch(HelloField),
    /// It did not prove the run key.
    AuthFailed,
    /// It claimed a connection that already exists.
    Duplicate,
    /// A lower rank dialled (lower ranks are dialled, never dialling).
    WrongDirection,
    /// It sent no hello in time.
    Silent,
    /// It closed the connection before its hello was complete.
    Closed,
    /// It was dropped, still silent, to make room for newer connections.
    Evicted,
    /// The connection failed, or could not be accepted or configured.
    Io(io::ErrorKind),
}

impl fmt::Display for RefusalCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAHello => f.write_str("not a hello"),
            Self::Mismatch(field) => write!(f, "{field} differs"),
            Self::AuthFailed => f.write_str("failed to prove the run key"),
            Self::Duplicate => f.write_str("duplicate connection"),
            Self::WrongDirection => f.write_str("a lower rank dialled"),
            Self::Silent => f.write_str("no hello in time"),
            Self::Closed => f.write_str("closed during the handshake"),
            Self::Evicted => f.write_str("dropped to make room"),
            Self::Io(kind) => write!(f, "i/o error: {kind}"),
        }
    }
}

/// One refused connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// Where it came from, when known.
    pub addr: Option<SocketAddr>,
    /// The rank it claimed, when its hello named one.
    pub claimed: Option<Rank>,
    /// Why it was refused.
    pub cause: RefusalCause,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(addr) => write!(f, "{addr}")?,
            None => f.write_str("unknown address")?,
        }
        if let Some(rank) = self.claimed {
            write!(f, " (claiming {rank})")?;
        }
        write!(f, ": {}", self.cause)
    }
}

/// The connections refused since the start: how many, and the first
/// [`KEPT_REFUSALS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Refusals {
    total: u64,
    first: [Option<Refusal>; KEPT_REFUSALS],
}

impl Refusals {
    /// Counts `refusal`, keeping it if fewer than [`KEPT_REFUSALS`] are
    /// kept.
    pub fn record(&mut self, refusal: Refusal) {
        if let Some(slot) = self.first.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(refusal);
        }
        self.total += 1;
    }

    /// Counts `n` refusals whose details are not kept.
    pub fn count(&mut self, n: u64) {
        self.total += n;
    }

    /// How many connections were refused.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The first refusals, oldest first.
    pub fn first(&self) -> impl Iterator<Item = &Refusal> {
        self.first.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusals_are_kept_and_all_counted() {
        let mut refusals = Refusals::default();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for i in 0..20 {
            refusals.record(Refusal {
                addr: Some(addr),
                claimed: None,
                cause: if i == 0 {
                    RefusalCause::NotAHello
                } else {
                    RefusalCause::Silent
                },
            });
        }
        refusals.count(5);
        assert_eq!(refusals.total(), 25);
        let kept: Vec<_> = refusals.first().collect();
        assert_eq!(kept.len(), KEPT_REFUSALS);
        assert_eq!(kept[0].cause, RefusalCause::NotAHello);
        assert_eq!(kept[0].to_string(), "127.0.0.1:9: not a hello");
    }
}
