//! Identifier newtypes.
//!
//! Each resource domain has its own type so an ID from one domain cannot be
//! passed where another is expected, even though they share a numeric
//! representation. Zero is reserved as "invalid/uninitialised" for every
//! ID here; [`Rank`](crate::Rank) is the exception and lives in its own
//! module because zero is a valid rank.
//!
//! Each ID type has its own error type for the one way building it can
//! fail, zero: [`TaskIdError`], [`WorkerIdError`], [`CoreIdError`],
//! [`RequestIdError`], [`DomainIdError`] and [`ActionIdError`]. Each
//! converts into the crate-wide [`IdError`] (as [`IdError::Zero`] with its
//! [`IdKind`]), so a caller that builds several kinds of ID, ranks included,
//! can still use `?` into one error type.
//!
//! A value of these types proves only that the number is non-zero: it does
//! not prove that a task, worker or request with that ID exists, nor that it
//! is unique. Uniqueness is the job of whoever allocates the IDs (see
//! [`RequestSequencer`](crate::RequestSequencer) for requests).
//!
//! # Examples
//!
//! ```
//! use dinah_core::{IdError, IdKind, TaskId, WorkerId, WorkerIdError};
//!
//! let task = TaskId::new(7)?;
//! assert_eq!(task.get(), 7);
//! assert_eq!(task.to_string(), "task#7");
//! assert_eq!(WorkerId::new(0), Err(WorkerIdError::Zero));
//! // Into the crate-wide error, the kind goes with it.
//! let error = IdError::from(WorkerIdError::Zero);
//! assert_eq!(error, IdError::Zero { kind: IdKind::Worker });
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

/// An identifier could not be built or allocated: the error of ranks and
/// world sizes, of ID allocators, and the one every per-type error (such as
/// [`TaskIdError`]) converts into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdError {
    /// Zero is reserved as the invalid value of this ID domain (what the
    /// per-type errors, such as [`TaskIdError::Zero`], become).
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
    (
        $(#[$meta:meta])* $name:ident, $error:ident, $nonzero:ty, $raw:ty, $kind:expr
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        #[repr(transparent)]
        pub struct $name($nonzero);

        #[doc = concat!("A [`", stringify!($name), "`] could not be built.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $error {
            /// Zero is reserved as the invalid value of this ID domain.
            Zero,
        }

        impl $error {
            /// The ID domain this error is about.
            pub const fn kind(self) -> IdKind {
                $kind
            }
        }

        impl fmt::Display for $error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    Self::Zero => write!(f, "{} id must be non-zero", $kind.name()),
                }
            }
        }

        impl core::error::Error for $error {}

        impl From<$error> for IdError {
            fn from(error: $error) -> Self {
                match error {
                    $error::Zero => IdError::Zero { kind: $kind },
                }
            }
        }

        impl $name {
            /// The smallest valid value (one).
            pub const MIN: Self = Self(<$nonzero>::MIN);
            /// The largest valid value.
            pub const MAX: Self = Self(<$nonzero>::MAX);

            /// Wraps `value`.
            ///
            /// # Errors
            ///
            #[doc = concat!("[`", stringify!($error), "::Zero`] if `value` is zero.")]
            pub const fn new(value: $raw) -> Result<Self, $error> {
                match <$nonzero>::new(value) {
                    Some(value) => Ok(Self(value)),
                    None => Err($error::Zero),
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
            type Error = $error;

            fn try_from(value: $raw) -> Result<Self, $error> {
                Self::new(value)
            }
        }
    };
}

define_id!(
    /// One logical, one-shot unit of work. Stable for the task's lifetime;
    /// unique only among the live tasks of whoever assigns it.
    TaskId, TaskIdError, NonZeroU64, u64, IdKind::Task
);
define_id!(
    /// One worker (an execution resource, never a task).
    WorkerId, WorkerIdError, NonZeroU64, u64, IdKind::Worker
);
define_id!(
    /// A general core-level resource identity, distinct from tasks and
    /// workers.
    CoreId, CoreIdError, NonZeroU64, u64, IdKind::Core
);
define_id!(
    /// One remote call, scoped to the rank that issued it: the pair
    /// (origin rank, `RequestId`) is unique within a run. Handed out by
    /// [`RequestSequencer`](crate::RequestSequencer), which numbers an
    /// origin's requests to each target in send order.
    RequestId, RequestIdError, NonZeroU64, u64, IdKind::Request
);
define_id!(
    /// A worker domain: a fixed-size pool that runs action handlers.
    DomainId, DomainIdError, NonZeroU64, u64, IdKind::Domain
);
define_id!(
    /// A registered action type. Chosen by the action's author, stable
    /// across builds and ranks; 128 bits so independently chosen IDs (for
    /// example hashes of a name) do not collide.
    ActionId, ActionIdError, NonZeroU128, u128, IdKind::Action
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
        ($module:ident, $name:ident, $error:ident, $raw:ty, $kind:expr, $prefix:literal) => {
            mod $module {
                use super::*;
                extern crate std;
                use std::string::ToString;

                #[test]
                fn zero_is_rejected_with_its_own_error() {
                    assert_eq!($name::new(0), Err($error::Zero));
                    assert_eq!($name::try_from(0 as $raw), Err($error::Zero));
                    assert_eq!($error::Zero.kind(), $kind);
                    assert_eq!(
                        $error::Zero.to_string(),
                        concat!($prefix, " id must be non-zero")
                    );
                }

                #[test]
                fn zero_converts_into_the_shared_error_with_its_kind() {
                    fn build(value: $raw) -> Result<$name, IdError> {
                        Ok($name::new(value)?)
                    }
                    assert_eq!(build(0), Err(IdError::Zero { kind: $kind }));
                    assert_eq!(build(5).map($name::get), Ok(5));
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

    id_suite!(task, TaskId, TaskIdError, u64, IdKind::Task, "task");
    id_suite!(
        worker,
        WorkerId,
        WorkerIdError,
        u64,
        IdKind::Worker,
        "worker"
    );
    id_suite!(core_id, CoreId, CoreIdError, u64, IdKind::Core, "core");
    id_suite!(
        request,
        RequestId,
        RequestIdError,
        u64,
        IdKind::Request,
        "request"
    );
    id_suite!(
        domain,
        DomainId,
        DomainIdError,
        u64,
        IdKind::Domain,
        "domain"
    );
    id_suite!(
        action,
        ActionId,
        ActionIdError,
        u128,
        IdKind::Action,
        "action"
    );

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
