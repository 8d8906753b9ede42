//! Finished action jobs, routed by who they worked for: a peer's request
//! goes back to the serving side, a call this rank made to itself to its
//! waiting future.

use dinah_core::wire::{Channel, DecodeContext};
use dinah_core::{Instant, TaskFailureKind, TaskOutcome};

use crate::runtime::Runtime;
use crate::runtime::caller::{CallInfo, CallOutcome};
use crate::runtime::error::{FailureKind, RuntimeError};
use crate::runtime::frames::decode_received;
use crate::runtime::job_outcome::{JobCompletion, JobFailure, JobKey, ResultFrame};

use super::OwnerCounts;

impl Runtime {
    /// Routes up to `budget` finished jobs; returns how many.
    pub(super) fn handle_completions(&mut self, budget: usize, now: Instant) -> usize {
        if self.hub.completions.is_empty() {
            // The common round (and every round with inline handlers only).
            return 0;
        }
        let mut handled = 0;
        while handled < budget {
            let Some(completion) = self.hub.completions.pop() else {
                break;
            };
            self.route(completion, now);
            handled += 1;
        }
        handled
    }

    /// Routes one finished job.
    pub(super) fn route(&mut self, completion: JobCompletion, now: Instant) {
        match completion.key {
            JobKey::Remote { slot } => {
                let outcome = completion.outcome;
                self.server.on_completion(&self.hub, slot, outcome, now);
            }
            JobKey::Local { request } => {
                let outcome = completion.outcome;
                let counts = &mut self.counts;
                let ctx = self.contexts[self.hub.rank.index()].with_channel(Channel::Action);
                let result = self
                    .hub
                    .calls
                    .complete(request, |info| local_outcome(*info, outcome, &ctx, counts));
                if result.is_err() {
                    self.counts.late_result_discarded();
                }
            }
        }
    }
}

/// How a call to this rank ended, counted as its caller sees it.
fn local_outcome(
    info: CallInfo,
    outcome: TaskOutcome<ResultFrame, JobFailure>,
    ctx: &DecodeContext,
    counts: &mut OwnerCounts,
) -> CallOutcome {
    let error = match outcome {
        // The future decodes the output from the frame through its header.
        TaskOutcome::Completed(frame) => match decode_received(&frame, ctx) {
            Ok(decoded) => {
                let header = *decoded.header();
                counts.completed();
                return CallOutcome::Frame { header, frame };
            }
            Err(error) => RuntimeError::Protocol {
                peer: info.peer,
                error,
            },
        },
        TaskOutcome::Failed(failure) => match failure.kind() {
            TaskFailureKind::Cancelled => RuntimeError::Cancelled,
            TaskFailureKind::Panicked => RuntimeError::Remote {
                kind: FailureKind::Panicked,
                text: failure.panic_message().unwrap_or("panicked").to_owned(),
                trace: info.call.trace,
            },
            _ => match failure.into_error() {
                Some(JobFailure { code, text }) => {
                    RuntimeError::from_wire(code, &text, info.call, info.deadline_after)
                }
                None => RuntimeError::Remote {
                    kind: FailureKind::Returned,
                    text: String::new(),
                    trace: info.call.trace,
                },
            },
        },
    };
    if matches!(error, RuntimeError::DeadlineExceeded { .. }) {
        counts.deadline_expiry();
    } else {
        counts.failed();
    }
    CallOutcome::Failed(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dinah_core::wire::{Call, ErrorCode};
    use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, TaskFailure, WorldSize};
    use std::time::Duration;

    fn info() -> CallInfo {
        CallInfo {
            peer: Rank::ZERO,
            call: Call {
                request: RequestId::MIN,
                action: ActionId::MIN,
                domain: DomainId::MIN,
                trace: dinah_core::wire::TraceId::new(9),
            },
            deadline_after: Duration::from_millis(5),
        }
    }

    fn ctx() -> DecodeContext {
        DecodeContext::new(
            Channel::Action,
            Rank::ZERO,
            WorldSize::ONE,
            ProtocolLimits::DEFAULT,
        )
        .unwrap()
    }

    #[test]
    fn a_deadline_the_job_saw_pass_counts_as_an_expiry() {
        let mut counts = OwnerCounts::default();
        let failure = JobFailure::new(ErrorCode::DeadlineExceeded, "late");
        let outcome = local_outcome(
            info(),
            TaskOutcome::Failed(TaskFailure::returned(failure)),
            &ctx(),
            &mut counts,
        );
        assert!(matches!(
            outcome,
            CallOutcome::Failed(RuntimeError::DeadlineExceeded { .. })
        ));
        let read = counts.read(&dinah_core::RuntimeMetrics::new());
        assert_eq!((read.deadline_expiries, read.failed), (1, 0));
        let outcome = local_outcome(
            info(),
            TaskOutcome::Failed(TaskFailure::panicked("boom")),
            &ctx(),
            &mut counts,
        );
        let CallOutcome::Failed(RuntimeError::Remote { trace, .. }) = outcome else {
            panic!("a panic is a remote failure");
        };
        assert_eq!(
            trace,
            info().call.trace,
            "the caller's error carries its trace"
        );
        assert_eq!(counts.read(&dinah_core::RuntimeMetrics::new()).failed, 1);
    }
}
