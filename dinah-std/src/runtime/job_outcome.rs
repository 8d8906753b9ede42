//! What an action job hands back to the owner thread: who it worked for and
//! how it ended. Calls from peers and calls to this rank run the same job
//! (see `serve/job.rs`); only their [`JobKey`] differs.

use dinah_core::RequestId;
use dinah_core::wire::ErrorCode;

use super::registry::HandlerError;
use crate::domain::{Completion, CompletionQueue};

/// Who an action job works for. Kept small: it crosses to the worker and
/// back with every job; the serving side keeps the rest of a remote
/// request's identity by its dedup slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKey {
    /// A request from a peer, admitted in dedup slot `slot`.
    Remote { slot: usize },
    /// A call this rank made to itself.
    Local { request: RequestId },
}

/// A job's encoded result frame, ready to send (or, for a call to this
/// rank, to decode).
pub(crate) type ResultFrame = crate::transport::Frame;

/// Why an action job produced no result (panics and cancellations arrive
/// as `TaskFailure` kinds instead).
#[derive(Debug)]
pub(crate) struct JobFailure {
    pub(crate) code: ErrorCode,
    pub(crate) text: String,
}

impl JobFailure {
    pub(crate) fn new(code: ErrorCode, text: impl Into<String>) -> Self {
        Self {
            code,
            text: text.into(),
        }
    }
}

impl From<HandlerError> for JobFailure {
    /// A handler's own error travels as a user failure with its text; a
    /// codec error means the bytes did not match the action's schema.
    fn from(error: HandlerError) -> Self {
        match error {
            HandlerError::User(error) => Self::new(ErrorCode::UserFailure, error.into_text()),
            HandlerError::Codec(error) => {
                Self::new(ErrorCode::ProtocolViolation, error.to_string())
            }
        }
    }
}

/// A finished action job, as the owner drains it.
pub(crate) type JobCompletion = Completion<JobKey, ResultFrame, JobFailure>;

/// A domain's queue of finished action jobs.
pub(crate) type Completions = CompletionQueue<JobKey, ResultFrame, JobFailure>;
