//! Error texts: validating them incrementally, and cutting them to fit.

use super::ProtocolError;

/// The longest prefix of `text` that fits in `max` bytes without splitting
/// a character.
///
/// A runtime turning a handler's failure into an error message uses it to
/// respect [`ProtocolLimits::max_error_text_bytes`](crate::ProtocolLimits).
///
/// # Examples
///
/// ```
/// use dinah_core::wire::truncate_error_text;
///
/// assert_eq!(truncate_error_text("héllo", 2), "h");
/// assert_eq!(truncate_error_text("héllo", 3), "hé");
/// assert_eq!(truncate_error_text("héllo", 64), "héllo");
/// ```
pub fn truncate_error_text(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let (kept, _) = text.split_at(end);
    kept
}

/// Validates UTF-8 one chunk at a time, for the stream decoder, which sees
/// an error text in pieces and holds no copy of it.
///
/// It implements the well-formed byte sequences of the Unicode standard
/// (table 3-7) byte by byte, so it accepts and rejects exactly what
/// [`core::str::from_utf8`] does and reports the same `valid_up_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Utf8Stream {
    /// Bytes seen so far.
    seen: u32,
    /// Where the character being read started.
    char_start: u32,
    /// Continuation bytes still needed by that character.
    need: u8,
    /// The range allowed for the next continuation byte (narrower than
    /// `0x80..=0xBF` right after some lead bytes, to exclude overlong forms,
    /// surrogates and values above U+10FFFF).
    lo: u8,
    hi: u8,
}

impl Utf8Stream {
    /// Feeds `chunk`.
    ///
    /// # Errors
    ///
    /// [`ProtocolError::ErrorTextNotUtf8`] at the first ill-formed byte.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<(), ProtocolError> {
        for &byte in chunk {
            if self.need == 0 {
                self.char_start = self.seen;
                let (need, lo, hi) = match byte {
                    0x00..=0x7F => (0, 0x80, 0xBF),
                    0xC2..=0xDF => (1, 0x80, 0xBF),
                    0xE0 => (2, 0xA0, 0xBF),
                    0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
                    0xED => (2, 0x80, 0x9F),
                    0xF0 => (3, 0x90, 0xBF),
                    0xF1..=0xF3 => (3, 0x80, 0xBF),
                    0xF4 => (3, 0x80, 0x8F),
                    _ => return Err(self.error()),
                };
                self.need = need;
                self.lo = lo;
                self.hi = hi;
            } else if (self.lo..=self.hi).contains(&byte) {
                self.need -= 1;
                self.lo = 0x80;
                self.hi = 0xBF;
            } else {
                return Err(self.error());
            }
            self.seen += 1;
        }
        Ok(())
    }

    /// Ends the text.
    ///
    /// # Errors
    ///
    /// [`ProtocolError::ErrorTextNotUtf8`] if the text ends inside a
    /// character.
    pub(crate) fn finish(&self) -> Result<(), ProtocolError> {
        if self.need == 0 {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn error(&self) -> ProtocolError {
        ProtocolError::ErrorTextNotUtf8 {
            valid_up_to: self.char_start,
        }
    }
}

/// Validates a whole error text the way [`Utf8Stream`] does, returning it
/// as a `str`.
pub(crate) fn check_utf8(text: &[u8]) -> Result<&str, ProtocolError> {
    core::str::from_utf8(text).map_err(|error| ProtocolError::ErrorTextNotUtf8 {
        // Texts are at most ERROR_TEXT_CAP bytes, far below u32::MAX.
        valid_up_to: error.valid_up_to() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn streamed(bytes: &[u8], chunk: usize) -> Result<(), ProtocolError> {
        let mut stream = Utf8Stream::default();
        for piece in bytes.chunks(chunk.max(1)) {
            stream.feed(piece)?;
        }
        stream.finish()
    }

    fn whole(bytes: &[u8]) -> Result<(), ProtocolError> {
        check_utf8(bytes).map(|_| ())
    }

    #[test]
    fn agrees_with_core_on_edge_cases() {
        let cases: &[&[u8]] = &[
            b"",
            b"plain ascii",
            "é€😀".as_bytes(),
            b"\xC0\x80",         // overlong NUL
            b"\xC1\xBF",         // overlong
            b"\xE0\x80\x80",     // overlong 3-byte
            b"\xE0\xA0\x80",     // smallest 3-byte
            b"\xED\xA0\x80",     // surrogate
            b"\xED\x9F\xBF",     // last before surrogates
            b"\xF0\x8F\xBF\xBF", // overlong 4-byte
            b"\xF4\x90\x80\x80", // above U+10FFFF
            b"\xF4\x8F\xBF\xBF", // U+10FFFF
            b"\xF5\x80\x80\x80",
            b"\xFF",
            b"ab\xE2\x82",  // truncated at the end
            b"ab\xE2\x82x", // truncated in the middle
            b"\x80",        // lone continuation
            b"ok\xC3",
        ];
        for case in cases {
            for chunk in 1..=4 {
                assert_eq!(streamed(case, chunk), whole(case), "{case:02x?} / {chunk}");
            }
        }
    }

    #[test]
    fn exhaustive_two_and_three_byte_prefixes_agree_with_core() {
        let step = if cfg!(miri) { 17 } else { 1 };
        for a in (0..=255u8).step_by(step) {
            for b in (0..=255u8).step_by(step) {
                let pair = [b'x', a, b];
                assert_eq!(streamed(&pair, 1), whole(&pair), "{pair:02x?}");
                for c in [0x00, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF] {
                    let triple = [a, b, c];
                    assert_eq!(streamed(&triple, 1), whole(&triple), "{triple:02x?}");
                }
            }
        }
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        let text = "a😀b";
        let lens: Vec<usize> = (0..=text.len() + 1)
            .map(|max| truncate_error_text(text, max).len())
            .collect();
        assert_eq!(lens, [0, 1, 1, 1, 1, 5, 6, 6]);
        assert_eq!(truncate_error_text("", 0), "");
    }
}
