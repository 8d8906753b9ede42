//! Validated bounds for the protocol and the runtime.
//!
//! Every table, queue and buffer dinah keeps is sized once, from these
//! limits, when a runtime starts; nothing grows afterwards. Zero is never a
//! valid bound, derived capacities are computed with checked arithmetic,
//! and every error names the field that is wrong.
//!
//! [`ProtocolLimits`] travel in the hello handshake and must agree between
//! peers; [`RuntimeLimits`] are local to one rank.
//!
//! # Examples
//!
//! ```
//! use core::time::Duration;
//! use dinah_core::{LimitField, LimitProblem, LimitsError, RuntimeLimits};
//!
//! let mut limits = RuntimeLimits::default();
//! limits.max_pending_calls = 64;
//! limits.default_deadline = Duration::from_secs(2);
//! limits.validate()?;
//!
//! limits.max_dedup_entries = 0;
//! assert_eq!(
//!     limits.validate(),
//!     Err(LimitsError { field: LimitField::MaxDedupEntries, problem: LimitProblem::Zero })
//! );
//! # Ok::<(), LimitsError>(())
//! ```

use core::fmt;
use core::time::Duration;

/// The largest error text carried on the wire, in bytes (UTF-8).
pub const ERROR_TEXT_CAP: u32 = 4096;

/// The largest frame any transport accepts: 1 GiB, far below MPI's `c_int`
/// counts and any sane single message.
pub const FRAME_BYTES_CAP: u32 = 1 << 30;

/// The most segments one frame may carry.
pub const SEGMENTS_CAP: u16 = 1024;

/// Bounds both peers of a connection must agree on; exchanged in the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ProtocolLimits {
    /// Largest frame (header plus all segments plus their length table), in
    /// bytes. At most [`FRAME_BYTES_CAP`].
    pub max_frame_bytes: u32,
    /// Largest single payload segment, in bytes. At most `max_frame_bytes`.
    pub max_segment_bytes: u32,
    /// Most payload segments in one frame. At most [`SEGMENTS_CAP`].
    pub max_segments: u16,
    /// Largest error text in an error message, in bytes. At most
    /// [`ERROR_TEXT_CAP`].
    pub max_error_text_bytes: u32,
}

impl ProtocolLimits {
    /// The defaults: 16 MiB frames and segments, 64 segments, 4096-byte
    /// error texts.
    pub const DEFAULT: Self = Self {
        max_frame_bytes: 16 << 20,
        max_segment_bytes: 16 << 20,
        max_segments: 64,
        max_error_text_bytes: ERROR_TEXT_CAP,
    };

    /// Checks every field.
    ///
    /// # Errors
    ///
    /// The first field that is zero or above its cap, as a [`LimitsError`].
    pub const fn validate(&self) -> Result<(), LimitsError> {
        if let Err(e) = bounded(
            LimitField::MaxFrameBytes,
            self.max_frame_bytes as u64,
            FRAME_BYTES_CAP as u64,
        ) {
            return Err(e);
        }
        if let Err(e) = bounded(
            LimitField::MaxSegmentBytes,
            self.max_segment_bytes as u64,
            self.max_frame_bytes as u64,
        ) {
            return Err(e);
        }
        if let Err(e) = bounded(
            LimitField::MaxSegments,
            self.max_segments as u64,
            SEGMENTS_CAP as u64,
        ) {
            return Err(e);
        }
        if let Err(e) = bounded(
            LimitField::MaxErrorTextBytes,
            self.max_error_text_bytes as u64,
            ERROR_TEXT_CAP as u64,
        ) {
            return Err(e);
        }
        // The longest error text must fit its segment, and its frame
        // (header, one length entry, text) must fit a frame.
        if self.max_segment_bytes < self.max_error_text_bytes {
            return Err(LimitsError {
                field: LimitField::MaxSegmentBytes,
                problem: LimitProblem::TooSmall {
                    min: self.max_error_text_bytes as u64,
                },
            });
        }
        let min_frame = (crate::wire::HEADER_LEN + crate::wire::LENGTH_ENTRY_LEN) as u64
            + self.max_error_text_bytes as u64;
        if (self.max_frame_bytes as u64) < min_frame {
            return Err(LimitsError {
                field: LimitField::MaxFrameBytes,
                problem: LimitProblem::TooSmall { min: min_frame },
            });
        }
        Ok(())
    }
}

impl Default for ProtocolLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Bounds local to one rank's runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RuntimeLimits {
    /// Calls this rank has issued and not yet seen finish.
    pub max_pending_calls: u32,
    /// Send tickets: frames handed to the transport and not yet released.
    pub max_send_tickets: u32,
    /// Bytes the transport may retain for frames not yet sent.
    pub max_retained_bytes: u64,
    /// Queued (not yet running) action jobs per worker domain.
    pub max_action_queue: u32,
    /// Worker threads per domain.
    pub workers_per_domain: u16,
    /// Worker domains.
    pub max_domains: u16,
    /// Queued cancellations (outgoing) and remembered cancellations of
    /// requests not yet seen (tombstones).
    pub max_cancellations: u32,
    /// Entries in the receiver's dedup table (running, completed and
    /// cancelled requests from all peers).
    pub max_dedup_entries: u32,
    /// Bytes of responses the dedup table may cache for resending.
    pub max_dedup_bytes: u64,
    /// Events handled per category in one `progress` call.
    pub max_progress_events: u32,
    /// Deadline of a call that does not set its own.
    pub default_deadline: Duration,
    /// How long completed and cancelled dedup entries are kept.
    pub dedup_ttl: Duration,
    /// How long `shutdown` may take by default.
    pub shutdown_timeout: Duration,
}

impl RuntimeLimits {
    /// The defaults: 1024 pending calls, 2 domains of 2 workers with 256
    /// queued jobs each, 4096 dedup entries caching up to 4 MiB, 30 s
    /// deadlines, 60 s dedup TTL, 10 s shutdown.
    pub const DEFAULT: Self = Self {
        max_pending_calls: 1024,
        max_send_tickets: 1024,
        max_retained_bytes: 64 << 20,
        max_action_queue: 256,
        workers_per_domain: 2,
        max_domains: 2,
        max_cancellations: 1024,
        max_dedup_entries: 4096,
        max_dedup_bytes: 4 << 20,
        max_progress_events: 256,
        default_deadline: Duration::from_secs(30),
        dedup_ttl: Duration::from_secs(60),
        shutdown_timeout: Duration::from_secs(10),
    };

    /// Checks every field and every derived capacity.
    ///
    /// # Errors
    ///
    /// The first field that is zero, or whose derived capacity overflows, as
    /// a [`LimitsError`].
    pub const fn validate(&self) -> Result<(), LimitsError> {
        let counts: [(LimitField, u64); 10] = [
            (LimitField::MaxPendingCalls, self.max_pending_calls as u64),
            (LimitField::MaxSendTickets, self.max_send_tickets as u64),
            (LimitField::MaxRetainedBytes, self.max_retained_bytes),
            (LimitField::MaxActionQueue, self.max_action_queue as u64),
            (LimitField::WorkersPerDomain, self.workers_per_domain as u64),
            (LimitField::MaxDomains, self.max_domains as u64),
            (LimitField::MaxCancellations, self.max_cancellations as u64),
            (LimitField::MaxDedupEntries, self.max_dedup_entries as u64),
            (LimitField::MaxDedupBytes, self.max_dedup_bytes),
            (
                LimitField::MaxProgressEvents,
                self.max_progress_events as u64,
            ),
        ];
        let mut i = 0;
        while i < counts.len() {
            if counts[i].1 == 0 {
                return Err(LimitsError {
                    field: counts[i].0,
                    problem: LimitProblem::Zero,
                });
            }
            i += 1;
        }
        let durations: [(LimitField, Duration); 3] = [
            (LimitField::DefaultDeadline, self.default_deadline),
            (LimitField::DedupTtl, self.dedup_ttl),
            (LimitField::ShutdownTimeout, self.shutdown_timeout),
        ];
        let mut i = 0;
        while i < durations.len() {
            if durations[i].1.is_zero() {
                return Err(LimitsError {
                    field: durations[i].0,
                    problem: LimitProblem::Zero,
                });
            }
            if crate::time::duration_nanos(durations[i].1).is_none() {
                return Err(LimitsError {
                    field: durations[i].0,
                    problem: LimitProblem::Overflow,
                });
            }
            i += 1;
        }
        match self.completion_capacity() {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Worker threads over all domains: `max_domains * workers_per_domain`
    /// (two `u16`s, so the product always fits).
    pub const fn total_workers(&self) -> u32 {
        self.max_domains as u32 * self.workers_per_domain as u32
    }

    /// The most action jobs that can be admitted at once over all domains,
    /// queued or running: `max_domains * (max_action_queue +
    /// workers_per_domain)`. The completion path is sized from this, so a
    /// finishing worker never needs an unbounded fallback.
    ///
    /// # Errors
    ///
    /// [`LimitProblem::Overflow`] on `MaxActionQueue` if the sum or product
    /// does not fit a `u32`.
    pub const fn completion_capacity(&self) -> Result<u32, LimitsError> {
        let overflow = LimitsError {
            field: LimitField::MaxActionQueue,
            problem: LimitProblem::Overflow,
        };
        let per_domain = match self
            .max_action_queue
            .checked_add(self.workers_per_domain as u32)
        {
            Some(n) => n,
            None => return Err(overflow),
        };
        match per_domain.checked_mul(self.max_domains as u32) {
            Some(n) => Ok(n),
            None => Err(overflow),
        }
    }
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which limit a [`LimitsError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitField {
    /// [`ProtocolLimits::max_frame_bytes`].
    MaxFrameBytes,
    /// [`ProtocolLimits::max_segment_bytes`].
    MaxSegmentBytes,
    /// [`ProtocolLimits::max_segments`].
    MaxSegments,
    /// [`ProtocolLimits::max_error_text_bytes`].
    MaxErrorTextBytes,
    /// [`RuntimeLimits::max_pending_calls`].
    MaxPendingCalls,
    /// [`RuntimeLimits::max_send_tickets`].
    MaxSendTickets,
    /// [`RuntimeLimits::max_retained_bytes`].
    MaxRetainedBytes,
    /// [`RuntimeLimits::max_action_queue`].
    MaxActionQueue,
    /// [`RuntimeLimits::workers_per_domain`].
    WorkersPerDomain,
    /// [`RuntimeLimits::max_domains`].
    MaxDomains,
    /// [`RuntimeLimits::max_cancellations`].
    MaxCancellations,
    /// [`RuntimeLimits::max_dedup_entries`].
    MaxDedupEntries,
    /// [`RuntimeLimits::max_dedup_bytes`].
    MaxDedupBytes,
    /// [`RuntimeLimits::max_progress_events`].
    MaxProgressEvents,
    /// [`RuntimeLimits::default_deadline`].
    DefaultDeadline,
    /// [`RuntimeLimits::dedup_ttl`].
    DedupTtl,
    /// [`RuntimeLimits::shutdown_timeout`].
    ShutdownTimeout,
}

impl LimitField {
    /// The field's name as written in the structs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::MaxFrameBytes => "max_frame_bytes",
            Self::MaxSegmentBytes => "max_segment_bytes",
            Self::MaxSegments => "max_segments",
            Self::MaxErrorTextBytes => "max_error_text_bytes",
            Self::MaxPendingCalls => "max_pending_calls",
            Self::MaxSendTickets => "max_send_tickets",
            Self::MaxRetainedBytes => "max_retained_bytes",
            Self::MaxActionQueue => "max_action_queue",
            Self::WorkersPerDomain => "workers_per_domain",
            Self::MaxDomains => "max_domains",
            Self::MaxCancellations => "max_cancellations",
            Self::MaxDedupEntries => "max_dedup_entries",
            Self::MaxDedupBytes => "max_dedup_bytes",
            Self::MaxProgressEvents => "max_progress_events",
            Self::DefaultDeadline => "default_deadline",
            Self::DedupTtl => "dedup_ttl",
            Self::ShutdownTimeout => "shutdown_timeout",
        }
    }
}

impl fmt::Display for LimitField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitProblem {
    /// Zero is never a valid bound.
    Zero,
    /// Above the largest allowed value.
    TooLarge {
        /// The largest allowed value.
        max: u64,
    },
    /// A capacity derived from this field overflows.
    Overflow,
    /// Below the smallest value consistent with the other fields (a frame
    /// must hold a header and the longest error text).
    TooSmall {
        /// The smallest allowed value.
        min: u64,
    },
}

/// A limit failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitsError {
    /// The offending field.
    pub field: LimitField,
    /// What is wrong with it.
    pub problem: LimitProblem,
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problem {
            LimitProblem::Zero => write!(f, "limit `{}` must be non-zero", self.field),
            LimitProblem::TooLarge { max } => {
                write!(f, "limit `{}` must be at most {max}", self.field)
            }
            LimitProblem::Overflow => write!(
                f,
                "a capacity derived from limit `{}` overflows",
                self.field
            ),
            LimitProblem::TooSmall { min } => {
                write!(f, "limit `{}` must be at least {min}", self.field)
            }
        }
    }
}

impl core::error::Error for LimitsError {}

const fn bounded(field: LimitField, value: u64, max: u64) -> Result<(), LimitsError> {
    if value == 0 {
        Err(LimitsError {
            field,
            problem: LimitProblem::Zero,
        })
    } else if value > max {
        Err(LimitsError {
            field,
            problem: LimitProblem::TooLarge { max },
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(ProtocolLimits::default().validate(), Ok(()));
        assert_eq!(RuntimeLimits::default().validate(), Ok(()));
        assert_eq!(
            RuntimeLimits::DEFAULT.completion_capacity(),
            Ok(2 * (256 + 2))
        );
        assert_eq!(RuntimeLimits::DEFAULT.total_workers(), 4);
    }

    #[test]
    fn every_zero_runtime_field_is_named() {
        type Setter = fn(&mut RuntimeLimits);
        let cases: [(LimitField, Setter); 13] = [
            (LimitField::MaxPendingCalls, |l| l.max_pending_calls = 0),
            (LimitField::MaxSendTickets, |l| l.max_send_tickets = 0),
            (LimitField::MaxRetainedBytes, |l| l.max_retained_bytes = 0),
            (LimitField::MaxActionQueue, |l| l.max_action_queue = 0),
            (LimitField::WorkersPerDomain, |l| l.workers_per_domain = 0),
            (LimitField::MaxDomains, |l| l.max_domains = 0),
            (LimitField::MaxCancellations, |l| l.max_cancellations = 0),
            (LimitField::MaxDedupEntries, |l| l.max_dedup_entries = 0),
            (LimitField::MaxDedupBytes, |l| l.max_dedup_bytes = 0),
            (LimitField::MaxProgressEvents, |l| l.max_progress_events = 0),
            (LimitField::DefaultDeadline, |l| {
                l.default_deadline = Duration::ZERO
            }),
            (LimitField::DedupTtl, |l| l.dedup_ttl = Duration::ZERO),
            (LimitField::ShutdownTimeout, |l| {
                l.shutdown_timeout = Duration::ZERO
            }),
        ];
        for (field, set) in cases {
            let mut limits = RuntimeLimits::default();
            set(&mut limits);
            assert_eq!(
                limits.validate(),
                Err(LimitsError {
                    field,
                    problem: LimitProblem::Zero
                }),
                "{field}"
            );
        }
    }

    #[test]
    fn every_protocol_field_is_bounded() {
        let limits = ProtocolLimits {
            max_frame_bytes: FRAME_BYTES_CAP + 1,
            ..ProtocolLimits::DEFAULT
        };
        assert_eq!(
            limits.validate(),
            Err(LimitsError {
                field: LimitField::MaxFrameBytes,
                problem: LimitProblem::TooLarge {
                    max: FRAME_BYTES_CAP as u64
                }
            })
        );
        let limits = ProtocolLimits {
            max_segment_bytes: ProtocolLimits::DEFAULT.max_frame_bytes + 1,
            ..ProtocolLimits::DEFAULT
        };
        assert_eq!(
            limits.validate().unwrap_err().field,
            LimitField::MaxSegmentBytes
        );
        let limits = ProtocolLimits {
            max_segments: 0,
            ..ProtocolLimits::DEFAULT
        };
        assert_eq!(
            limits.validate().unwrap_err(),
            LimitsError {
                field: LimitField::MaxSegments,
                problem: LimitProblem::Zero
            }
        );
        let limits = ProtocolLimits {
            max_error_text_bytes: ERROR_TEXT_CAP + 1,
            ..ProtocolLimits::DEFAULT
        };
        assert_eq!(
            limits.validate().unwrap_err().field,
            LimitField::MaxErrorTextBytes
        );
    }

    #[test]
    fn protocol_limits_must_hold_the_longest_error_frame() {
        let mut limits = ProtocolLimits::DEFAULT;
        limits.max_error_text_bytes = 1000;
        limits.max_segment_bytes = 999;
        assert_eq!(
            limits.validate(),
            Err(LimitsError {
                field: LimitField::MaxSegmentBytes,
                problem: LimitProblem::TooSmall { min: 1000 }
            })
        );
        limits.max_segment_bytes = 1000;
        limits.max_frame_bytes = 80 + 4 + 1000 - 1;
        let error = limits.validate().unwrap_err();
        assert_eq!(
            error,
            LimitsError {
                field: LimitField::MaxFrameBytes,
                problem: LimitProblem::TooSmall { min: 1084 }
            }
        );
        assert_eq!(
            error.to_string(),
            "limit `max_frame_bytes` must be at least 1084"
        );
        limits.max_frame_bytes = 1084;
        assert_eq!(limits.validate(), Ok(()));
    }

    #[test]
    fn derived_capacity_overflow_is_reported() {
        let limits = RuntimeLimits {
            max_action_queue: u32::MAX,
            ..RuntimeLimits::DEFAULT
        };
        assert_eq!(
            limits.validate(),
            Err(LimitsError {
                field: LimitField::MaxActionQueue,
                problem: LimitProblem::Overflow
            })
        );
        let limits = RuntimeLimits {
            max_action_queue: u32::MAX / 2,
            max_domains: 3,
            ..RuntimeLimits::DEFAULT
        };
        assert_eq!(
            limits.completion_capacity().unwrap_err().problem,
            LimitProblem::Overflow
        );
        let limits = RuntimeLimits {
            default_deadline: Duration::MAX,
            ..RuntimeLimits::DEFAULT
        };
        assert_eq!(
            limits.validate(),
            Err(LimitsError {
                field: LimitField::DefaultDeadline,
                problem: LimitProblem::Overflow
            })
        );
    }

    #[test]
    fn errors_name_the_field() {
        let error = LimitsError {
            field: LimitField::DedupTtl,
            problem: LimitProblem::Zero,
        };
        assert_eq!(error.to_string(), "limit `dedup_ttl` must be non-zero");
        let error = LimitsError {
            field: LimitField::MaxSegments,
            problem: LimitProblem::TooLarge { max: 1024 },
        };
        assert_eq!(
            error.to_string(),
            "limit `max_segments` must be at most 1024"
        );
    }
}
