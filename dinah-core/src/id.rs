//! Identifier newtypes.
//!
//! Each resource domain has its own type so an ID from one domain cannot be
//! passed where another is expected, even though they share a numeric
//! representation. Zero is reserved as "invalid/uninitialised" for every
//! ID here; [`Rank`](crate::Rank) is the exception and lives in its own
//! module because zero is a valid rank.
//!
//! All ID types share one error type, [`IdError`], whose variants name the
//! [`IdKind`] they are about. One shared type keeps `?` conversions simple
//! for callers that build several IDs, while the kind keeps the message
//! precise.
//!
//! A value of these types proves only that the number is non-zero: it does
//! not prove that a task, worker or request with that ID exists, nor that it
//! is unique. Uniqueness is the job of whoever allocates the IDs (see
//! [`RequestSequencer`](crate::RequestSequencer) for requests).
//!
//! # Examples
//!
//! ```
//! use dinah_core::{IdError, IdKind, TaskId, WorkerId};
//!
//! let task = TaskId::new(7)?;
//! assert_eq!(task.get(), 7);
//! assert_eq!(task.to_string(), "task#7");
//! assert_eq!(WorkerId::new(0), Err(IdError::Zero { kind: IdKind::Worker }));
//! # Ok::<(), IdError>(())
//! ```

use core::fmt;
use core::num::{NonZeroU64, NonZeroU128};

/// Which identifier domain an [`IdError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum IdKind {
    /// [`TaskId`].
    Task,
    /// [`WorkerId`].
    Worker,
    /// [`CoreId`].
    Core,
    /// [`RequestId`].
    Request,
    /// [`DomainId`].
    Domain,
    /// [`ActionId`].
    Action,
    /// [`Rank`](crate::Rank) and [`WorldSize`](crate::WorldSize).
    Rank,
}

impl IdKind {
    /// The lowercase name used in messages and `Display` prefixes.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Worker => "worker",
            Self::Core => "core",
            Self::Request => "request",
            Self::Domain => "domain",
            Self::Action => "action",
            Self::Rank => "rank",
        }
    }
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An identifier could not be built or allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdError {
    /// Zero is reserved as the invalid value of this ID domain.
    Zero {
        /// The domain the zero was offered to.
        kind: IdKind,
    },
    /// A rank is not below the world size.
    RankOutOfRange {
        /// The offending rank.
        rank: u32,
        /// The world size it was checked against.
        world_size: u32,
    },
    /// A world must contain at least one rank.
    EmptyWorld,
    /// An allocator has handed out every value of its domain.
    Exhausted {
        /// The domain that ran out.
        kind: IdKind,
    },
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Zero { kind } => write!(f, "{kind} id must be non-zero"),
            Self::RankOutOfRange { rank, world_size } => {
                write!(f, "rank {rank} is out of range for a world of {world_size}")
            }
            Self::EmptyWorld => f.write_str("world size must be at least one"),
            Self::Exhausted { kind } => write!(f, "{kind} ids are exhausted"),
        }
    }
}

impl core::error::Error for IdError {}

macro_rules! define_id {
    ($(#[$meta:meta])* $name:ident, $nonzero:ty, $raw:ty, $kind:expr) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        #[repr(transparent)]
        pub struct $name($nonzero);

        impl $name {
            /// The smallest valid value (one).
            pub const MIN: Self = Self(<$nonzero>::MIN);
            /// The largest valid value.
            pub const MAX: Self = Self(<$nonzero>::MAX);

            /// Wraps `value`.
            ///
            /// # Errors
            ///
            /// [`IdError::Zero`] if `value` is zero.
            pub const fn new(value: $raw) -> Result<Self, IdError> {
                match <$nonzero>::new(value) {
                    Some(value) => Ok(Self(value)),
                    None => Err(IdError::Zero { kind: $kind }),
                }
            }

            /// Wraps an already non-zero value; never fails.
            pub const fn from_non_zero(value: $nonzero) -> Self {
                Self(value)
            }

            /// The numeric value (never zero).
            pub const fn get(self) -> $raw {
                self.0.get()
            }

            /// The numeric value as its non-zero integer type.
            pub const fn non_zero(self) -> $nonzero {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}#{}", $kind.name(), self.0)
            }
        }

        impl From<$name> for $raw {
            fn from(id: $name) -> $raw {
                id.get()
            }
        }

        impl TryFrom<$raw> for $name {
            type Error = IdError;

            fn try_from(value: $raw) -> Result<Self, IdError> {
                Self::new(value)
            }
        }
    };
}

define_id!(
    /// One logical, one-shot unit of work. Stable for the task's lifetime;
    /// unique only among the live tasks of whoever assigns it.
    TaskId, NonZeroU64, u64, IdKind::Task
);
define_id!(
    /// One worker (an execution resource, never a task).
    WorkerId, NonZeroU64, u64, IdKind::Worker
);
define_id!(
    /// A general core-level resource identity, distinct from tasks and
    /// workers.
    CoreId, NonZeroU64, u64, IdKind::Core
);
define_id!(
    /// One remote call, scoped to the rank that issued it: the pair
    /// (origin rank, `RequestId`) is unique within a run. Handed out by
    /// [`RequestSequencer`](crate::RequestSequencer), which numbers an
    /// origin's requests to each target in send order.
    RequestId, NonZeroU64, u64, IdKind::Request
);
define_id!(
    /// A worker domain: a fixed-size pool that runs action handlers.
    DomainId, NonZeroU64, u64, IdKind::Domain
);
define_id!(
    /// A registered action type. Chosen by the action's author, stable
    /// across builds and ranks; 128 bits so independently chosen IDs (for
    /// example hashes of a name) do not collide.
    ActionId, NonZeroU128, u128, IdKind::Action
);

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::{Hash, Hasher};

    /// FNV-1a, enough to see that equal IDs hash equally without std.
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for byte in bytes {
                self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    fn hash_of<T: Hash>(value: &T) -> u64 {
        let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
        value.hash(&mut hasher);
        hasher.finish()
    }

    macro_rules! id_suite {
        ($module:ident, $name:ident, $raw:ty, $kind:expr, $prefix:literal) => {
            mod $module {
                use super::*;
                extern crate std;
                use std::string::ToString;

                #[test]
                fn zero_is_rejected_with_its_kind() {
                    assert_eq!($name::new(0), Err(IdError::Zero { kind: $kind }));
                    assert_eq!(
                        $name::try_from(0 as $raw),
                        Err(IdError::Zero { kind: $kind })
                    );
                }

                #[test]
                fn boundaries_round_trip() {
                    assert_eq!($name::new(1).unwrap().get(), 1);
                    assert_eq!($name::new(<$raw>::MAX).unwrap().get(), <$raw>::MAX);
                    assert_eq!($name::MIN.get(), 1);
                    assert_eq!($name::MAX.get(), <$raw>::MAX);
                    assert_eq!(<$raw>::from($name::MAX), <$raw>::MAX);
                }

                #[test]
                fn display_names_the_domain() {
                    assert_eq!($name::new(42).unwrap().to_string(), concat!($prefix, "#42"));
                }

                #[test]
                fn order_equality_and_hash_follow_the_value() {
                    let (a, b) = ($name::new(3).unwrap(), $name::new(9).unwrap());
                    assert!(a < b);
                    assert_eq!(a, $name::new(3).unwrap());
                    assert_ne!(a, b);
                    assert_eq!(hash_of(&a), hash_of(&$name::new(3).unwrap()));
                    assert_eq!(a.max(b), b);
                }
            }
        };
    }

    id_suite!(task, TaskId, u64, IdKind::Task, "task");
    id_suite!(worker, WorkerId, u64, IdKind::Worker, "worker");
    id_suite!(core_id, CoreId, u64, IdKind::Core, "core");
    id_suite!(request, RequestId, u64, IdKind::Request, "request");
    id_suite!(domain, DomainId, u64, IdKind::Domain, "domain");
    id_suite!(action, ActionId, u128, IdKind::Action, "action");

    #[test]
    fn errors_display_lowercase_without_period() {
        extern crate std;
        use std::string::ToString;
        let cases = [
            (
                IdError::Zero { kind: IdKind::Task },
                "task id must be non-zero",
            ),
            (
                IdError::RankOutOfRange {
                    rank: 4,
                    world_size: 4,
                },
                "rank 4 is out of range for a world of 4",
            ),
            (IdError::EmptyWorld, "world size must be at least one"),
            (
                IdError::Exhausted {
                    kind: IdKind::Request,
                },
                "request ids are exhausted",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
