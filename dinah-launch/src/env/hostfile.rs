//! A static hostfile: one `rank host:port` line per rank.
//!
//! For fixed deployments, where every rank's address is known in advance:
//! no coordinator, no rendezvous. Blank lines and text after `#` are
//! ignored; every rank from 0 to the world size minus one appears exactly
//! once, in any order. A host is an IP address or a name, resolved when
//! the file is read (its first address is taken); an IPv6 address is
//! written in brackets (`[::1]:7000`).

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use dinah_core::WorldSize;

/// Why a hostfile cannot be used.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostfileError {
    /// The file could not be read.
    Read {
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
    },
    /// A line is not `rank host:port`.
    Malformed {
        /// The line's number, from 1.
        line: usize,
    },
    /// A line names a rank outside the world.
    RankOutOfRange {
        /// The line's number, from 1.
        line: usize,
        /// The rank it names.
        rank: u32,
    },
    /// A rank appears on two lines.
    DuplicateRank {
        /// The second line's number, from 1.
        line: usize,
        /// The rank.
        rank: u32,
    },
    /// A rank of the world has no line.
    MissingRank {
        /// The lowest rank without one.
        rank: u32,
    },
    /// A host name did not resolve to any address.
    Unresolved {
        /// The line's number, from 1.
        line: usize,
    },
}

impl fmt::Display for HostfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { kind } => write!(f, "cannot read it: {kind}"),
            Self::Malformed { line } => write!(f, "line {line} is not `rank host:port`"),
            Self::RankOutOfRange { line, rank } => {
                write!(f, "line {line} names rank {rank}, outside the world")
            }
            Self::DuplicateRank { line, rank } => {
                write!(f, "line {line} names rank {rank} a second time")
            }
            Self::MissingRank { rank } => write!(f, "rank {rank} has no line"),
            Self::Unresolved { line } => {
                write!(f, "the host on line {line} does not resolve to an address")
            }
        }
    }
}

impl core::error::Error for HostfileError {}

/// The first address `host:port` resolves to.
pub(crate) fn resolve(host: &str) -> Option<SocketAddr> {
    host.to_socket_addrs().ok()?.next()
}

/// Every rank's address from the hostfile's `text`, in rank order, each
/// `host:port` resolved with `resolve`.
///
/// # Errors
///
/// [`HostfileError`]: the text does not list each rank of `world` exactly
/// once.
pub(crate) fn parse(
    text: &str,
    world: WorldSize,
    resolve: impl Fn(&str) -> Option<SocketAddr>,
) -> Result<Vec<SocketAddr>, HostfileError> {
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; world.get() as usize];
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or_default().trim();
        if content.is_empty() {
            continue;
        }
        let mut fields = content.split_whitespace();
        let (Some(rank), Some(host), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(HostfileError::Malformed { line });
        };
        let rank: u32 = rank
            .parse()
            .map_err(|_| HostfileError::Malformed { line })?;
        let slot = addrs
            .get_mut(rank as usize)
            .ok_or(HostfileError::RankOutOfRange { line, rank })?;
        if slot.is_some() {
            return Err(HostfileError::DuplicateRank { line, rank });
        }
        // `host:port` with a port: a bare host is a mistake, not port 0.
        let port_ok = host
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(HostfileError::Malformed { line });
        }
        *slot = Some(resolve(host).ok_or(HostfileError::Unresolved { line })?);
    }
    addrs
        .iter()
        .enumerate()
        .map(|(rank, addr)| {
            addr.ok_or(HostfileError::MissingRank {
                rank: u32::try_from(rank).unwrap_or(u32::MAX),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(n: u32) -> WorldSize {
        WorldSize::new(n).unwrap()
    }

    fn parse_ips(text: &str, n: u32) -> Result<Vec<SocketAddr>, HostfileError> {
        parse(text, world(n), |host| host.parse().ok())
    }

    #[test]
    fn a_hostfile_lists_every_rank_in_any_order() {
        let text =
            "# the run's ranks\n\n1 127.0.0.3:7001   # second\n0\t127.0.0.2:7000\n2 [::1]:7002\n";
        let addrs = parse_ips(text, 3).unwrap();
        assert_eq!(
            addrs,
            [
                "127.0.0.2:7000".parse().unwrap(),
                "127.0.0.3:7001".parse().unwrap(),
                "[::1]:7002".parse().unwrap(),
            ]
        );
    }

    #[test]
    fn names_resolve() {
        let addrs = parse("0 localhost:7000\n", world(1), resolve).unwrap();
        assert!(addrs[0].ip().is_loopback());
        assert_eq!(addrs[0].port(), 7000);
    }

    #[test]
    fn every_mistake_is_named_with_its_line() {
        let cases: [(&str, HostfileError); 7] = [
            (
                "0 127.0.0.1:1 extra\n",
                HostfileError::Malformed { line: 1 },
            ),
            ("zero 127.0.0.1:1\n", HostfileError::Malformed { line: 1 }),
            ("0 127.0.0.1\n", HostfileError::Malformed { line: 1 }),
            (
                "\n0 127.0.0.1:99999\n",
                HostfileError::Malformed { line: 2 },
            ),
            (
                "0 127.0.0.1:1\n2 127.0.0.1:2\n",
                HostfileError::RankOutOfRange { line: 2, rank: 2 },
            ),
            (
                "0 127.0.0.1:1\n0 127.0.0.1:2\n",
                HostfileError::DuplicateRank { line: 2, rank: 0 },
            ),
            ("1 127.0.0.1:1\n", HostfileError::MissingRank { rank: 0 }),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_ips(text, 2).unwrap_err(), expected, "{text:?}");
        }
        assert_eq!(
            parse("0 nowhere.invalid:1\n", world(1), |_| None).unwrap_err(),
            HostfileError::Unresolved { line: 1 }
        );
    }
}
