//! Runtime errors.

use std::fmt;
use std::time::Duration;

use dinah_core::wire::{Call, ErrorCode, ProtocolError, TraceId};
use dinah_core::{
    ActionId, DomainId, FingerprintError, LimitField, LimitsError, Rank, RuntimeState,
};

use crate::action::CodecError;
use crate::domain::DomainStartError;
use crate::transport::TransportError;

/// Which side of a call hit a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// This rank.
    Local,
    /// The rank the call was sent to.
    Remote,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Remote => "remote",
        })
    }
}

/// How a remote handler failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The handler returned an error.
    Returned,
    /// The handler panicked (the panic was caught there).
    Panicked,
    /// The input or output could not be decoded or encoded.
    Codec,
}

/// A remote call (or a runtime operation) failed.
///
/// Every variant is a distinct cause: callers can tell a deadline from a
/// cancellation from a dead peer from a handler's own error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A frame about this call was corrupt or inconsistent.
    Protocol {
        /// Who sent it.
        peer: Rank,
        /// What was wrong.
        error: ProtocolError,
    },
    /// A reply named this call but answered another action; the call is
    /// failed rather than given a wrong result. (A reply from a rank other
    /// than the one the call went to is rejected as a protocol error
    /// before it reaches any call.)
    MismatchedReply {
        /// The rank the reply came from.
        peer: Rank,
    },
    /// The target rank has no action registered under this ID.
    UnknownAction {
        /// The action.
        action: ActionId,
    },
    /// The target rank has no worker domain with this ID.
    UnknownDomain {
        /// The domain.
        domain: DomainId,
    },
    /// The handler failed; its (capped) text is kept.
    Remote {
        /// How it failed.
        kind: FailureKind,
        /// The handler's error text, at most 4096 bytes.
        text: String,
        /// The call's trace ID, if the caller gave one
        /// ([`SpawnOptions::with_trace`](crate::SpawnOptions::with_trace)).
        trace: Option<TraceId>,
    },
    /// The call was cancelled (by the caller, a scope, or shutdown) or the
    /// target observed a cancellation before producing a result.
    Cancelled,
    /// The call's deadline passed.
    DeadlineExceeded {
        /// The deadline the call had, relative to its start.
        after: Duration,
    },
    /// A bound was full, so the action was not executed.
    ResourceExhausted {
        /// The bound.
        limit: LimitField,
        /// Where.
        side: Side,
    },
    /// A duplicate of a completed request found no retained response; the
    /// handler is never run twice, so the result is unavailable.
    DuplicateResultUnavailable,
    /// The transport failed for the target peer.
    Transport {
        /// The peer.
        peer: Rank,
        /// The failure.
        error: TransportError,
    },
    /// The transport as a whole failed; the runtime is `Failed`.
    TransportFailed(TransportError),
    /// The target is shutting down and accepts no new work.
    ShuttingDown,
    /// The local runtime is not in a state that allows this.
    State {
        /// The state it is in.
        state: RuntimeState,
    },
    /// The action's input or output could not be encoded or decoded.
    Codec(CodecError),
    /// The target rank is not in this world.
    NoSuchRank {
        /// The rank asked for.
        rank: Rank,
    },
    /// A deadline of zero (or one too large to represent) was given.
    InvalidDeadline,
    /// This rank is already waiting in a
    /// [`barrier`](crate::RuntimeClient::barrier); barriers run one at a
    /// time.
    BarrierInProgress,
    /// This rank is already in a broadcast or reduce
    /// ([`RuntimeClient::broadcast`](crate::RuntimeClient::broadcast));
    /// they run one at a time.
    CollectiveInProgress,
    /// The root of a broadcast passed no value.
    MissingRootValue,
}

impl RuntimeError {
    /// The error a caller sees for an error frame with `code` and `text`
    /// about its `call`, whose deadline was `after`.
    pub(crate) fn from_wire(code: ErrorCode, text: &str, call: Call, after: Duration) -> Self {
        let remote = |kind| Self::Remote {
            kind,
            text: text.to_owned(),
            trace: call.trace,
        };
        match code {
            ErrorCode::UnknownAction => Self::UnknownAction {
                action: call.action,
            },
            ErrorCode::UnknownDomain => Self::UnknownDomain {
                domain: call.domain,
            },
            ErrorCode::UserFailure => remote(FailureKind::Returned),
            ErrorCode::HandlerPanicked => remote(FailureKind::Panicked),
            ErrorCode::Cancelled => Self::Cancelled,
            ErrorCode::DeadlineExceeded => Self::DeadlineExceeded { after },
            ErrorCode::ResourceExhausted { limit } => Self::ResourceExhausted {
                limit,
                side: Side::Remote,
            },
            ErrorCode::DuplicateResultUnavailable => Self::DuplicateResultUnavailable,
            ErrorCode::ShuttingDown => Self::ShuttingDown,
            // ProtocolViolation and codes added later: the peer rejected
            // our frame.
            _ => remote(FailureKind::Codec),
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Protocol { peer, error } => write!(f, "invalid frame from {peer}: {error}"),
            Self::MismatchedReply { peer } => {
                write!(f, "reply from {peer} does not match the call")
            }
            Self::UnknownAction { action } => write!(f, "{action} is not registered on the target"),
            Self::UnknownDomain { domain } => write!(f, "{domain} does not exist on the target"),
            Self::Remote { kind, text, trace } => {
                match kind {
                    FailureKind::Returned => write!(f, "remote handler failed: {text}")?,
                    FailureKind::Panicked => write!(f, "remote handler panicked: {text}")?,
                    FailureKind::Codec => write!(f, "remote side rejected the call: {text}")?,
                }
                match trace {
                    Some(trace) => write!(f, " ({trace})"),
                    None => Ok(()),
                }
            }
            Self::Cancelled => f.write_str("call was cancelled"),
            Self::DeadlineExceeded { after } => {
                write!(f, "call exceeded its deadline of {after:?}")
            }
            Self::ResourceExhausted { limit, side } => {
                write!(f, "{side} resource exhausted: {limit}")
            }
            Self::DuplicateResultUnavailable => {
                f.write_str("duplicate request's result was not retained")
            }
            Self::Transport { peer, error } => write!(f, "transport to {peer} failed: {error}"),
            Self::TransportFailed(error) => write!(f, "transport failed: {error}"),
            Self::ShuttingDown => f.write_str("target is shutting down"),
            Self::State { state } => write!(f, "runtime is {state:?}, not running"),
            Self::Codec(error) => write!(f, "payload codec failed: {error}"),
            Self::NoSuchRank { rank } => write!(f, "{rank} is not in this world"),
            Self::InvalidDeadline => f.write_str("deadline must be non-zero and representable"),
            Self::BarrierInProgress => f.write_str("this rank is already in a barrier"),
            Self::CollectiveInProgress => {
                f.write_str("this rank is already in a broadcast or reduce")
            }
            Self::MissingRootValue => f.write_str("the root of a broadcast passed no value"),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Protocol { error, .. } => Some(error),
            Self::Transport { error, .. } | Self::TransportFailed(error) => Some(error),
            Self::Codec(error) => Some(error),
            _ => None,
        }
    }
}

/// The runtime could not be built or started.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A limit is invalid.
    Limits(LimitsError),
    /// An action ID is zero.
    ZeroActionId,
    /// An action was registered twice.
    DuplicateAction {
        /// The action.
        action: ActionId,
    },
    /// The registrations cannot be fingerprinted (zero schema IDs).
    Fingerprint(FingerprintError),
    /// An action names a domain that was not declared.
    UnknownDomain {
        /// The domain.
        domain: DomainId,
    },
    /// A domain was declared twice, or more domains than `max_domains`.
    DomainLimit {
        /// The domain.
        domain: DomainId,
    },
    /// A domain was declared with more workers than
    /// [`RuntimeLimits::workers_per_domain`](dinah_core::RuntimeLimits::workers_per_domain):
    /// the queues the runtime sizes from the limits would not hold every
    /// job's result.
    DomainWorkers {
        /// The domain.
        domain: DomainId,
        /// The workers asked for.
        workers: usize,
        /// The limit.
        max: u16,
    },
    /// A worker domain could not be started.
    Domain(DomainStartError),
    /// The transport's handle does not match the limits (its world or its
    /// sizes), or the transport was built for another hello.
    TransportMismatch,
    /// The runtime's state machine refused the start.
    State {
        /// The state it was in.
        state: RuntimeState,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(error) => write!(f, "invalid limits: {error}"),
            Self::ZeroActionId => f.write_str("action id must be non-zero"),
            Self::DuplicateAction { action } => write!(f, "{action} is registered twice"),
            Self::Fingerprint(error) => write!(f, "registry cannot be fingerprinted: {error}"),
            Self::UnknownDomain { domain } => write!(f, "{domain} was not declared"),
            Self::DomainLimit { domain } => {
                write!(f, "{domain} is declared twice or exceeds max_domains")
            }
            Self::DomainWorkers {
                domain,
                workers,
                max,
            } => write!(
                f,
                "{domain} is declared with {workers} workers, more than workers_per_domain ({max})"
            ),
            Self::Domain(error) => write!(f, "worker domain failed to start: {error}"),
            Self::TransportMismatch => {
                f.write_str("transport does not match the runtime's hello or limits")
            }
            Self::State { state } => write!(f, "runtime cannot start from state {state:?}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limits(error) => Some(error),
            Self::Fingerprint(error) => Some(error),
            Self::Domain(error) => Some(error),
            _ => None,
        }
    }
}

impl From<LimitsError> for BuildError {
    fn from(error: LimitsError) -> Self {
        Self::Limits(error)
    }
}
