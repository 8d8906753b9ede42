//! The text of a panic in user code, kept by a panic hook.
//!
//! A caught panic arrives as `Box<dyn Any + Send>`, and reading its text
//! from there means guessing its type. The runtime does not guess: a panic
//! hook, installed once per process before the first job can run, renders
//! each panic's message (the `PanicHookInfo`'s `Display`, less its
//! location) into a slot of the panicking thread. The code that caught the
//! unwind takes that slot on the same thread, where the panic happened.
//!
//! The hook wraps the hook that was in place when it was installed and
//! calls it after recording, so the default report on standard error (or a
//! hook the user set earlier) still runs. A hook the user sets later
//! replaces this one; the runtime then reports that the text was not kept,
//! instead of a text.

use std::cell::Cell;
use std::panic::{self, PanicHookInfo};
use std::sync::Once;

thread_local! {
    /// The text of the last panic recorded on this thread, if not yet
    /// taken.
    static LAST: Cell<Option<PanicText>> = const { Cell::new(None) };
}

/// What the hook recorded of one panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PanicText {
    /// The message given to `panic!` (or the `&str`/`String` payload of
    /// `panic_any`).
    Message(String),
    /// The payload was of another type: it has no text.
    NotAString,
}

/// The text a failure carries when the payload had none.
pub(crate) const NOT_A_STRING: &str = "the panic payload is not a string";

/// The text a failure carries when no hook recorded the panic.
pub(crate) const NOT_KEPT: &str =
    "the panic's text was not kept (a panic hook set after the runtime started replaced dinah's)";

impl PanicText {
    /// The text a [`TaskFailure`](dinah_core::TaskFailure) carries.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Message(message) => message,
            Self::NotAString => NOT_A_STRING,
        }
    }
}

/// Installs the recording hook, once per process; later calls do nothing.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            record(info);
            previous(info);
        }));
    });
}

/// Takes the text recorded for the last panic on this thread. `None` if no
/// panic was recorded since the last take (the hook was replaced, or the
/// unwind was resumed without a panic, by `resume_unwind`, with nothing
/// recorded before).
pub(crate) fn take() -> Option<PanicText> {
    LAST.try_with(Cell::take).ok().flatten()
}

/// Records `info`'s text for the panicking thread. Never panics: a panic
/// inside a panic hook aborts the process.
fn record(info: &PanicHookInfo<'_>) {
    let text = text_of(info);
    // During thread-local destruction there is nowhere to record: the
    // thread is ending and no job runs on it any more.
    let _ = LAST.try_with(|last| last.set(Some(text)));
}

/// The message part of `info`. Its `Display` is `panicked at <location>`,
/// followed by `:\n<message>` when the payload is a string.
fn text_of(info: &PanicHookInfo<'_>) -> PanicText {
    let rendered = info.to_string();
    let head = match info.location() {
        Some(location) => format!("panicked at {location}"),
        None => String::from("panicked at"),
    };
    match rendered.strip_prefix(head.as_str()) {
        Some("") => PanicText::NotAString,
        Some(rest) => match rest.strip_prefix(":\n") {
            Some(message) => PanicText::Message(message.to_owned()),
            None => PanicText::Message(rendered),
        },
        // A rendering this code does not know: keep all of it rather than
        // lose the message.
        None => PanicText::Message(rendered),
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{self, AssertUnwindSafe};

    use super::*;

    fn caught(f: impl FnOnce()) -> Option<PanicText> {
        install();
        let _ = take();
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        assert!(result.is_err(), "the closure panics");
        take()
    }

    #[test]
    fn a_static_message_is_kept() {
        assert_eq!(
            caught(|| panic!("static text")),
            Some(PanicText::Message("static text".into()))
        );
    }

    #[test]
    fn a_formatted_message_is_kept_whole_across_lines() {
        let n = 7;
        assert_eq!(
            caught(|| panic!("formatted {n}\nsecond line")),
            Some(PanicText::Message("formatted 7\nsecond line".into()))
        );
    }

    #[test]
    fn string_payloads_of_panic_any_are_kept() {
        assert_eq!(
            caught(|| panic::panic_any(String::from("owned"))),
            Some(PanicText::Message("owned".into()))
        );
        assert_eq!(
            caught(|| panic::panic_any("borrowed")),
            Some(PanicText::Message("borrowed".into()))
        );
    }

    #[test]
    fn other_payloads_have_no_text() {
        let text = caught(|| panic::panic_any(42_u32));
        assert_eq!(text, Some(PanicText::NotAString));
        assert_eq!(text.unwrap().as_str(), NOT_A_STRING);
    }

    #[test]
    fn a_take_empties_the_slot() {
        assert!(caught(|| panic!("once")).is_some());
        assert_eq!(take(), None);
    }

    #[test]
    fn a_resumed_unwind_carries_the_text_of_its_first_panic() {
        let text = caught(|| {
            let payload = panic::catch_unwind(|| panic!("first")).unwrap_err();
            panic::resume_unwind(payload);
        });
        assert_eq!(text, Some(PanicText::Message("first".into())));
    }

    #[test]
    fn each_thread_keeps_its_own_text() {
        install();
        let other = std::thread::spawn(|| {
            let _ = panic::catch_unwind(|| panic!("elsewhere"));
            take()
        })
        .join()
        .unwrap();
        assert_eq!(other, Some(PanicText::Message("elsewhere".into())));
        assert_eq!(
            caught(|| panic!("here")),
            Some(PanicText::Message("here".into()))
        );
    }
}
