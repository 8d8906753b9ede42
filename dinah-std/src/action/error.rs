//! Codec and handler errors.

use std::fmt;

use dinah_core::ERROR_TEXT_CAP;
use dinah_core::wire::truncate_error_text;

/// A payload could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CodecError {
    /// Fewer segments than the type needs.
    MissingSegment {
        /// The index of the missing segment.
        index: usize,
    },
    /// More segments than the type reads.
    TrailingSegments {
        /// How many were left.
        extra: usize,
    },
    /// A segment has the wrong length for its type.
    SegmentLength {
        /// The segment's index.
        index: usize,
        /// The length the type needs (for packed vectors: a multiple of it).
        expected: usize,
        /// The length found.
        actual: usize,
    },
    /// A text segment is not UTF-8.
    InvalidUtf8 {
        /// The segment's index.
        index: usize,
    },
    /// A byte that must be a tag or a `bool` has another value.
    InvalidTag {
        /// The segment's index.
        index: usize,
        /// The byte found.
        value: u8,
    },
    /// A `char` segment is not a Unicode scalar value.
    InvalidChar {
        /// The segment's index.
        index: usize,
    },
    /// A sequence claims more elements than its group could hold (on
    /// decoding), or its elements encode to nothing and are more than the
    /// decoder accepts (on encoding).
    SequenceTooLong {
        /// The element count.
        count: u64,
    },
    /// A fixed-size array arrived with another number of elements.
    ArrayLength {
        /// The array's length.
        expected: usize,
        /// The count found.
        actual: usize,
    },
    /// A map arrived with the same key twice.
    DuplicateKey {
        /// The entry's position in the map's group.
        entry: usize,
    },
    /// A value encoded through serde (`#[wire(serde)]`) could not be
    /// encoded, or its segment is not exactly one value of its type.
    Serde {
        /// The segment's index.
        index: usize,
    },
    /// A value of another type arrived where this one was expected (its
    /// schema ID differs).
    SchemaMismatch {
        /// This type's [`SCHEMA_ID`](crate::WireValue::SCHEMA_ID).
        expected: u64,
        /// The schema ID that arrived.
        found: u64,
    },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingSegment { index } => write!(f, "payload segment {index} is missing"),
            Self::TrailingSegments { extra } => write!(f, "payload has {extra} unread segment(s)"),
            Self::SegmentLength {
                index,
                expected,
                actual,
            } => {
                write!(
                    f,
                    "payload segment {index} has {actual} bytes, expected {expected}"
                )
            }
            Self::InvalidUtf8 { index } => write!(f, "payload segment {index} is not utf-8"),
            Self::InvalidTag { index, value } => {
                write!(f, "payload segment {index} has invalid tag {value}")
            }
            Self::InvalidChar { index } => {
                write!(f, "payload segment {index} is not a unicode scalar value")
            }
            Self::SequenceTooLong { count } => {
                write!(f, "a sequence of {count} elements does not fit its group")
            }
            Self::ArrayLength { expected, actual } => {
                write!(f, "an array of {expected} elements arrived with {actual}")
            }
            Self::DuplicateKey { entry } => write!(f, "map entry {entry} repeats a key"),
            Self::Serde { index } => {
                write!(
                    f,
                    "payload segment {index} is not a serde value of its type"
                )
            }
            Self::SchemaMismatch { expected, found } => write!(
                f,
                "a value of schema {found:#x} arrived where {expected:#x} was expected"
            ),
        }
    }
}

impl std::error::Error for CodecError {}

/// The most bytes of text an [`ActionError`] keeps: the wire's cap.
pub const ACTION_ERROR_TEXT_CAP: usize = ERROR_TEXT_CAP as usize;

/// A handler's failure, sent back to the caller as text.
///
/// The text is capped at [`ACTION_ERROR_TEXT_CAP`] bytes (cut on a
/// character boundary), because it crosses the wire; the caller receives it
/// in [`RuntimeError::Remote`](crate::RuntimeError).
#[derive(Clone, PartialEq, Eq)]
pub struct ActionError {
    text: String,
}

impl ActionError {
    /// A failure described by `message` (anything `Display`).
    pub fn new(message: impl fmt::Display) -> Self {
        let mut text = message.to_string();
        let keep = truncate_error_text(&text, ACTION_ERROR_TEXT_CAP).len();
        text.truncate(keep);
        Self { text }
    }

    /// The (capped) text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text, owned.
    pub fn into_text(self) -> String {
        self.text
    }
}

impl fmt::Debug for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The length, not the text: user text may be large or sensitive.
        f.debug_struct("ActionError")
            .field("text_len", &self.text.len())
            .finish()
    }
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ActionError {}

impl From<CodecError> for ActionError {
    fn from(error: CodecError) -> Self {
        Self::new(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_char_boundary() {
        let long = "é".repeat(ACTION_ERROR_TEXT_CAP);
        let error = ActionError::new(&long);
        assert!(error.text().len() <= ACTION_ERROR_TEXT_CAP);
        assert!(error.text().len() >= ACTION_ERROR_TEXT_CAP - 1);
        assert!(error.text().chars().all(|c| c == 'é'));
    }

    #[test]
    fn debug_shows_no_text() {
        let error = ActionError::new("secret");
        assert!(!format!("{error:?}").contains("secret"));
        assert_eq!(error.to_string(), "secret");
    }
}
