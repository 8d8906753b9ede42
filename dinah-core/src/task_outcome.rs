//! What a finished task produced: [`TaskOutcome`], its value or a
//! [`TaskFailure`] classified by [`TaskFailureKind`].

use core::fmt;

use crate::TaskState;

/// The most bytes of a panic message a [`TaskFailure`] keeps.
///
/// 104 bytes hold the messages the standard library's own panics produce
/// (`unwrap` on `None` or on a short `Err`, index out of bounds, arithmetic
/// overflow, `assert_eq!` with short operands) and typical one-line
/// `panic!` texts whole. The cap is chosen so that a `TaskFailure<E>` with a
/// small `E` stays under 128 bytes, small enough to return inside a
/// `Result` by value (clippy's `result_large_err` threshold) on every call
/// path. The message is a summary for reports: the full text still goes to
/// the panic hook. Longer messages are truncated on a character boundary;
/// [`TaskFailure::is_panic_message_truncated`] tells when that happened.
pub const PANIC_MESSAGE_CAPACITY: usize = 104;

/// How a task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskFailureKind {
    /// The task ran and returned its own error value.
    ReturnedError,
    /// The task panicked and the panic was caught.
    Panicked,
    /// The task was cancelled: stopped before it started, or it observed a
    /// cancellation request and stopped early.
    Cancelled,
}

impl TaskFailureKind {
    /// The terminal [`TaskState`] of a task that failed this way:
    /// [`TaskState::Cancelled`] for `Cancelled`, [`TaskState::Failed`]
    /// otherwise.
    #[must_use]
    pub const fn terminal_state(self) -> TaskState {
        match self {
            Self::ReturnedError | Self::Panicked => TaskState::Failed,
            Self::Cancelled => TaskState::Cancelled,
        }
    }

    /// The lowercase name used by `Display`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::ReturnedError => "returned error",
            Self::Panicked => "panicked",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for TaskFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a task did not complete, with the task's own error kept intact.
///
/// A failure says *how* the task failed ([`TaskFailureKind`]) and keeps
/// what it failed with: the task's own error value, untouched, or the
/// message of a caught panic (copied into a fixed buffer of
/// [`PANIC_MESSAGE_CAPACITY`] bytes, so a failure never allocates). Task
/// errors are never flattened into a runtime error type, so a caller can
/// still match on its own error enum.
///
/// `E` is the task's error type. A returned error is stored as is and can
/// be borrowed ([`error`](Self::error)), taken back
/// ([`into_error`](Self::into_error)) or converted
/// ([`map_error`](Self::map_error)) without losing the classification.
///
/// # Error chain
///
/// `Display` includes the task error's own message ("task returned an
/// error: disk full"), so [`source`](core::error::Error::source) skips it
/// and returns *that error's* source. An error reporter that walks the chain
/// thus prints each message once. Use [`error`](Self::error) to reach the
/// task error itself.
///
/// # Size
///
/// A failure holds its panic-message buffer inline, because the core never
/// allocates: it is the larger of `E` and about
/// [`PANIC_MESSAGE_CAPACITY`] + 16 bytes (120 bytes on 64-bit targets for
/// an `E` of that size or smaller).
///
/// # Examples
///
/// ```
/// use dinah_core::{TaskFailure, TaskFailureKind};
///
/// let failure: TaskFailure<std::num::ParseIntError> = TaskFailure::panicked("index out of bounds");
/// assert_eq!(failure.kind(), TaskFailureKind::Panicked);
/// assert_eq!(failure.panic_message(), Some("index out of bounds"));
/// assert!(failure.error().is_none());
/// assert_eq!(failure.to_string(), "task panicked: index out of bounds");
///
/// let parse = "x".parse::<u8>().unwrap_err();
/// let failure = TaskFailure::returned(parse.clone()).map_error(|e| e.to_string());
/// assert_eq!(failure.kind(), TaskFailureKind::ReturnedError);
/// assert_eq!(failure.error(), Some(&parse.to_string()));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TaskFailure<E> {
    repr: Repr<E>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr<E> {
    Returned(E),
    Panicked {
        message: heapless::String<PANIC_MESSAGE_CAPACITY>,
        truncated: bool,
    },
    Cancelled,
}

impl<E> TaskFailure<E> {
    /// The task returned `error`.
    pub const fn returned(error: E) -> Self {
        Self {
            repr: Repr::Returned(error),
        }
    }

    /// The task panicked with `message`.
    ///
    /// At most [`PANIC_MESSAGE_CAPACITY`] bytes are kept: a longer message
    /// is cut at the last character boundary that fits and
    /// [`is_panic_message_truncated`](Self::is_panic_message_truncated)
    /// returns `true`.
    #[must_use]
    pub fn panicked(message: &str) -> Self {
        let (kept, truncated) = truncate_on_char_boundary(message, PANIC_MESSAGE_CAPACITY);
        let mut buffer = heapless::String::new();
        // `kept` fits by construction, so this push cannot fail; if it ever
        // did, the message would only be shorter, never corrupted.
        let pushed = buffer.push_str(kept).is_ok();
        debug_assert!(pushed, "a truncated panic message fits its buffer");
        Self {
            repr: Repr::Panicked {
                message: buffer,
                truncated,
            },
        }
    }

    /// The task was cancelled (before it started, or it acknowledged a
    /// cancellation request).
    pub const fn cancelled() -> Self {
        Self {
            repr: Repr::Cancelled,
        }
    }

    /// How the task failed.
    #[must_use]
    pub const fn kind(&self) -> TaskFailureKind {
        match self.repr {
            Repr::Returned(_) => TaskFailureKind::ReturnedError,
            Repr::Panicked { .. } => TaskFailureKind::Panicked,
            Repr::Cancelled => TaskFailureKind::Cancelled,
        }
    }

    /// The task's terminal state: see [`TaskFailureKind::terminal_state`].
    #[must_use]
    pub const fn terminal_state(&self) -> TaskState {
        self.kind().terminal_state()
    }

    /// The error the task returned, if it failed that way.
    #[must_use]
    pub const fn error(&self) -> Option<&E> {
        match &self.repr {
            Repr::Returned(error) => Some(error),
            Repr::Panicked { .. } | Repr::Cancelled => None,
        }
    }

    /// Takes back the error the task returned, if it failed that way.
    #[must_use]
    pub fn into_error(self) -> Option<E> {
        match self.repr {
            Repr::Returned(error) => Some(error),
            Repr::Panicked { .. } | Repr::Cancelled => None,
        }
    }

    /// The (possibly truncated) panic message, if the task panicked.
    #[must_use]
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panicked { message, .. } => Some(message.as_str()),
            Repr::Returned(_) | Repr::Cancelled => None,
        }
    }

    /// Was the panic message longer than [`PANIC_MESSAGE_CAPACITY`] and
    /// cut? `false` for failures that are not panics.
    #[must_use]
    pub const fn is_panic_message_truncated(&self) -> bool {
        matches!(
            self.repr,
            Repr::Panicked {
                truncated: true,
                ..
            }
        )
    }

    /// Converts the returned error with `f`, keeping the kind (and the
    /// panic message). `f` runs only for a returned error.
    pub fn map_error<F, M>(self, f: M) -> TaskFailure<F>
    where
        M: FnOnce(E) -> F,
    {
        TaskFailure {
            repr: match self.repr {
                Repr::Returned(error) => Repr::Returned(f(error)),
                Repr::Panicked { message, truncated } => Repr::Panicked { message, truncated },
                Repr::Cancelled => Repr::Cancelled,
            },
        }
    }
}

/// `message` cut to at most `capacity` bytes on a character boundary, and
/// whether anything was cut.
fn truncate_on_char_boundary(message: &str, capacity: usize) -> (&str, bool) {
    if message.len() <= capacity {
        return (message, false);
    }
    let mut end = capacity;
    // Index 0 is always a boundary, so this stops.
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    (message.get(..end).unwrap_or_default(), true)
}

impl<E: fmt::Debug> fmt::Debug for TaskFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("TaskFailure");
        out.field("kind", &self.kind());
        match &self.repr {
            Repr::Returned(error) => out.field("error", error),
            Repr::Panicked { message, truncated } => out
                .field("message", &message.as_str())
                .field("truncated", truncated),
            Repr::Cancelled => &mut out,
        }
        .finish()
    }
}

impl<E: fmt::Display> fmt::Display for TaskFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Returned(error) => write!(f, "task returned an error: {error}"),
            Repr::Panicked { message, truncated } => {
                write!(f, "task panicked: {message}")?;
                if *truncated {
                    f.write_str(" [truncated]")?;
                }
                Ok(())
            }
            Repr::Cancelled => f.write_str("task was cancelled"),
        }
    }
}

impl<E: core::error::Error> core::error::Error for TaskFailure<E> {
    /// The returned error's own source (the returned error's message is
    /// already part of this failure's `Display`).
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match &self.repr {
            Repr::Returned(error) => error.source(),
            Repr::Panicked { .. } | Repr::Cancelled => None,
        }
    }
}

/// How a task ended: its value, or why it has none.
///
/// The result half of a task's lifecycle (the state half is
/// [`TaskState`]). Build one from a task's `Result` with `From`, or
/// directly. [`terminal_state`](Self::terminal_state) gives the
/// [`TaskState`] the task must end in, so the outcome and the state machine
/// cannot disagree.
///
/// # Examples
///
/// ```
/// use dinah_core::{TaskFailureKind, TaskOutcome, TaskState};
///
/// #[derive(Debug, PartialEq)]
/// struct DiskFull;
///
/// let outcome: TaskOutcome<u64, DiskFull> = Err(DiskFull).into();
/// assert!(!outcome.is_success());
/// assert_eq!(outcome.terminal_state(), TaskState::Failed);
/// let failure = outcome.into_result().unwrap_err();
/// assert_eq!(failure.kind(), TaskFailureKind::ReturnedError);
/// assert_eq!(failure.into_error(), Some(DiskFull));
/// ```
///
/// ```
/// use dinah_core::{TaskFailure, TaskOutcome, TaskState};
///
/// let done: TaskOutcome<u32, ()> = TaskOutcome::Completed(7);
/// assert_eq!(done.terminal_state(), TaskState::Completed);
/// assert_eq!(done.into_result().ok(), Some(7));
///
/// let stopped: TaskOutcome<u32, ()> = TaskOutcome::Failed(TaskFailure::cancelled());
/// assert_eq!(stopped.terminal_state(), TaskState::Cancelled);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[must_use = "a task outcome carries the task's value or failure"]
pub enum TaskOutcome<T, E> {
    /// The task returned successfully with this value.
    Completed(T),
    /// The task failed, panicked or was cancelled.
    Failed(TaskFailure<E>),
}

impl<T, E> TaskOutcome<T, E> {
    /// The terminal state this outcome corresponds to:
    /// [`TaskState::Completed`] for a value, [`TaskState::Cancelled`] for a
    /// cancellation, [`TaskState::Failed`] for a returned error or a panic.
    #[must_use]
    pub const fn terminal_state(&self) -> TaskState {
        match self {
            Self::Completed(_) => TaskState::Completed,
            Self::Failed(failure) => failure.terminal_state(),
        }
    }

    /// Did the task complete successfully?
    #[must_use]
    pub const fn is_success(&self) -> bool {
        matches!(self, Self::Completed(_))
    }

    /// The task's value, if it completed.
    #[must_use]
    pub const fn value(&self) -> Option<&T> {
        match self {
            Self::Completed(value) => Some(value),
            Self::Failed(_) => None,
        }
    }

    /// The failure, if the task did not complete.
    #[must_use]
    pub const fn failure(&self) -> Option<&TaskFailure<E>> {
        match self {
            Self::Completed(_) => None,
            Self::Failed(failure) => Some(failure),
        }
    }

    /// The outcome as a `Result`, for `?`.
    ///
    /// # Errors
    ///
    /// The [`TaskFailure`] if the task did not complete.
    pub fn into_result(self) -> Result<T, TaskFailure<E>> {
        match self {
            Self::Completed(value) => Ok(value),
            Self::Failed(failure) => Err(failure),
        }
    }

    /// Converts the returned error with `f` (see
    /// [`TaskFailure::map_error`]); values and other failures are kept.
    pub fn map_error<F, M>(self, f: M) -> TaskOutcome<T, F>
    where
        M: FnOnce(E) -> F,
    {
        match self {
            Self::Completed(value) => TaskOutcome::Completed(value),
            Self::Failed(failure) => TaskOutcome::Failed(failure.map_error(f)),
        }
    }
}

impl<T, E> From<Result<T, E>> for TaskOutcome<T, E> {
    /// `Ok` becomes [`Completed`](TaskOutcome::Completed); `Err` becomes a
    /// [`ReturnedError`](TaskFailureKind::ReturnedError) failure.
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(value) => Self::Completed(value),
            Err(error) => Self::Failed(TaskFailure::returned(error)),
        }
    }
}

impl<T, E> From<TaskFailure<E>> for TaskOutcome<T, E> {
    fn from(failure: TaskFailure<E>) -> Self {
        Self::Failed(failure)
    }
}

impl<T, E> From<TaskOutcome<T, E>> for Result<T, TaskFailure<E>> {
    fn from(outcome: TaskOutcome<T, E>) -> Self {
        outcome.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use core::error::Error as _;
    use std::string::{String, ToString};

    /// An error with a source, to check the chain.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Outer {
        code: u32,
        inner: Inner,
    }
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Inner;

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "outer failure {}", self.code)
        }
    }
    impl core::error::Error for Outer {
        fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
            Some(&self.inner)
        }
    }
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("inner cause")
        }
    }
    impl core::error::Error for Inner {}

    fn outer(code: u32) -> Outer {
        Outer { code, inner: Inner }
    }

    #[test]
    fn returned_errors_are_preserved() {
        let failure = TaskFailure::returned(outer(7));
        assert_eq!(failure.kind(), TaskFailureKind::ReturnedError);
        assert_eq!(failure.error(), Some(&outer(7)));
        assert_eq!(failure.panic_message(), None);
        assert!(!failure.is_panic_message_truncated());
        assert_eq!(failure.clone().into_error(), Some(outer(7)));
        assert_eq!(failure.terminal_state(), TaskState::Failed);
    }

    #[test]
    fn classification_and_terminal_states() {
        let cases: [(TaskFailure<u8>, TaskFailureKind, TaskState); 3] = [
            (
                TaskFailure::returned(1),
                TaskFailureKind::ReturnedError,
                TaskState::Failed,
            ),
            (
                TaskFailure::panicked("boom"),
                TaskFailureKind::Panicked,
                TaskState::Failed,
            ),
            (
                TaskFailure::cancelled(),
                TaskFailureKind::Cancelled,
                TaskState::Cancelled,
            ),
        ];
        for (failure, kind, state) in cases {
            assert_eq!(failure.kind(), kind);
            assert_eq!(kind.terminal_state(), state);
            let outcome: TaskOutcome<(), u8> = failure.clone().into();
            assert_eq!(outcome.terminal_state(), state);
            assert!(!outcome.is_success());
            assert_eq!(outcome.failure(), Some(&failure));
            assert_eq!(outcome.value(), None);
            assert_eq!(outcome.into_result(), Err(failure));
        }
        let done: TaskOutcome<u8, u8> = Ok(3).into();
        assert!(done.is_success());
        assert_eq!(done.terminal_state(), TaskState::Completed);
        assert_eq!(done.value(), Some(&3));
        assert_eq!(Result::from(done), Ok(3));
    }

    #[test]
    fn mapping_keeps_the_kind() {
        let mapped = TaskFailure::returned(outer(9)).map_error(|e| e.code);
        assert_eq!(mapped, TaskFailure::returned(9));

        let panicked = TaskFailure::<Outer>::panicked("bad index")
            .map_error(|_| -> u32 { unreachable!("a panic carries no error to map") });
        assert_eq!(panicked.kind(), TaskFailureKind::Panicked);
        assert_eq!(panicked.panic_message(), Some("bad index"));

        let cancelled = TaskFailure::<Outer>::cancelled().map_error(|e| e.code);
        assert_eq!(cancelled, TaskFailure::cancelled());

        let outcome: TaskOutcome<u8, Outer> = Err(outer(4)).into();
        assert_eq!(
            outcome.map_error(|e| e.code).into_result(),
            Err(TaskFailure::returned(4))
        );
        let outcome: TaskOutcome<u8, Outer> = Ok(2).into();
        assert_eq!(outcome.map_error(|e| e.code), TaskOutcome::Completed(2));
    }

    #[test]
    fn display_and_error_chain() {
        let failure = TaskFailure::returned(outer(3));
        assert_eq!(
            failure.to_string(),
            "task returned an error: outer failure 3"
        );
        // Display already says "outer failure 3"; the chain goes on with its cause.
        let source = failure.source().expect("the returned error's source");
        assert_eq!(source.to_string(), "inner cause");

        let failure = TaskFailure::<Outer>::panicked("oops");
        assert_eq!(failure.to_string(), "task panicked: oops");
        assert!(failure.source().is_none());

        let failure = TaskFailure::<Outer>::cancelled();
        assert_eq!(failure.to_string(), "task was cancelled");
        assert!(failure.source().is_none());

        assert_eq!(TaskFailureKind::ReturnedError.to_string(), "returned error");
    }

    #[test]
    fn debug_shows_the_payload() {
        assert_eq!(
            std::format!("{:?}", TaskFailure::returned(5_u8)),
            "TaskFailure { kind: ReturnedError, error: 5 }"
        );
        assert_eq!(
            std::format!("{:?}", TaskFailure::<u8>::panicked("p")),
            "TaskFailure { kind: Panicked, message: \"p\", truncated: false }"
        );
        assert_eq!(
            std::format!("{:?}", TaskFailure::<u8>::cancelled()),
            "TaskFailure { kind: Cancelled }"
        );
    }

    #[test]
    fn messages_up_to_capacity_are_kept_whole() {
        let exact: String = "a".repeat(PANIC_MESSAGE_CAPACITY);
        let failure = TaskFailure::<()>::panicked(&exact);
        assert_eq!(failure.panic_message(), Some(exact.as_str()));
        assert!(!failure.is_panic_message_truncated());
        assert_eq!(
            TaskFailure::<()>::panicked("").panic_message(),
            Some(""),
            "an empty message is still a panic"
        );
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        // One byte short of the cap, then a 3-byte character straddling it.
        let mut message: String = "b".repeat(PANIC_MESSAGE_CAPACITY - 1);
        message.push('€');
        message.push_str("tail");
        let failure = TaskFailure::<&str>::panicked(&message);
        let kept = failure.panic_message().expect("a panic message");
        assert_eq!(kept, &message[..PANIC_MESSAGE_CAPACITY - 1]);
        assert!(failure.is_panic_message_truncated());
        assert!(failure.to_string().ends_with("b [truncated]"));

        // All multi-byte: the cut lands on the last whole character.
        let wide: String = "é".repeat(PANIC_MESSAGE_CAPACITY);
        let failure = TaskFailure::<()>::panicked(&wide);
        let kept = failure.panic_message().expect("a panic message");
        assert_eq!(kept.len(), PANIC_MESSAGE_CAPACITY);
        assert!(kept.chars().all(|c| c == 'é'));
        assert!(failure.is_panic_message_truncated());
    }

    #[test]
    fn a_failure_stays_small_enough_to_return_by_value() {
        // The capacity is chosen for this; see PANIC_MESSAGE_CAPACITY.
        assert!(core::mem::size_of::<TaskFailure<u64>>() < 128);
        assert!(core::mem::size_of::<Result<u64, TaskFailure<u64>>>() <= 128);
    }

    #[test]
    fn truncation_helper_edges() {
        assert_eq!(truncate_on_char_boundary("abc", 3), ("abc", false));
        assert_eq!(truncate_on_char_boundary("abcd", 3), ("abc", true));
        assert_eq!(truncate_on_char_boundary("€", 2), ("", true));
        assert_eq!(truncate_on_char_boundary("a€", 3), ("a", true));
        assert_eq!(truncate_on_char_boundary("", 0), ("", false));
    }
}
