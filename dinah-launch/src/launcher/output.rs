//! Where the ranks' output goes: line by line, tagged with the rank.

use std::io::{self, Read, Write};
use std::sync::mpsc::Sender;

use super::LaunchEvent;

/// Which output stream of a rank a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Receives the ranks' output and the launcher's events.
///
/// The launcher reads each rank's stdout and stderr on threads of its own
/// and calls [`line`](Self::line) once per line, so implementations must be
/// `Send + Sync`; lines of one stream of one rank arrive in order.
pub trait OutputSink: Send + Sync {
    /// One line of `rank`'s `stream`, without its line feed. A line longer
    /// than [`MAX_LINE_BYTES`] arrives in pieces of at most that size; the
    /// bytes are whatever the rank wrote (not necessarily UTF-8).
    fn line(&self, rank: u32, stream: Stream, line: &[u8]);

    /// Something the launcher did or saw. The default ignores it.
    fn event(&self, event: &LaunchEvent) {
        let _ = event;
    }
}

/// The longest line passed to [`OutputSink::line`] in one piece.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Writes each line to the launcher's own stdout or stderr, prefixed with
/// `[rank] ` (what `dinah-run` does).
///
/// Each line is written with one locked `write_all`, so lines of different
/// ranks never interleave mid-line. Write errors (a closed pipe) are
/// ignored: the ranks keep running and the launcher still reports how they
/// ended.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrefixedStdio;

impl OutputSink for PrefixedStdio {
    fn line(&self, rank: u32, stream: Stream, line: &[u8]) {
        let mut buffer = Vec::with_capacity(line.len() + 12);
        buffer.extend_from_slice(format!("[{rank}] ").as_bytes());
        buffer.extend_from_slice(line);
        buffer.push(b'\n');
        let _ = match stream {
            Stream::Stdout => io::stdout().lock().write_all(&buffer),
            Stream::Stderr => io::stderr().lock().write_all(&buffer),
        };
    }
}

/// Reads `input` to its end, handing complete lines to `sink`, then says
/// so on `done`. A read error ends the stream like EOF.
pub(crate) fn pump(
    mut input: impl Read,
    rank: u32,
    stream: Stream,
    sink: &dyn OutputSink,
    done: &Sender<()>,
) {
    let mut line = Vec::new();
    let mut chunk = vec![0; 8 * 1024];
    loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &chunk[..read];
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            emit(&mut line, &rest[..end], rank, stream, sink);
            sink.line(rank, stream, &line);
            line.clear();
            rest = &rest[end + 1..];
        }
        emit(&mut line, rest, rank, stream, sink);
    }
    if !line.is_empty() {
        sink.line(rank, stream, &line);
    }
    let _ = done.send(());
}

/// Appends `bytes` to the pending `line`, flushing full pieces of
/// [`MAX_LINE_BYTES`] so a rank that never writes a line feed cannot make
/// the launcher buffer without bound.
fn emit(line: &mut Vec<u8>, mut bytes: &[u8], rank: u32, stream: Stream, sink: &dyn OutputSink) {
    while line.len() + bytes.len() > MAX_LINE_BYTES {
        let take = MAX_LINE_BYTES - line.len();
        line.extend_from_slice(&bytes[..take]);
        sink.line(rank, stream, line);
        line.clear();
        bytes = &bytes[take..];
    }
    line.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc::channel;

    use super::*;

    #[derive(Default)]
    struct Collect(Mutex<Vec<(u32, Stream, Vec<u8>)>>);

    impl OutputSink for Collect {
        fn line(&self, rank: u32, stream: Stream, line: &[u8]) {
            self.0.lock().unwrap().push((rank, stream, line.to_vec()));
        }
    }

    /// A reader that returns its data in fixed-size pieces.
    struct Pieces<'a>(&'a [u8], usize);

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn lines(input: &[u8], piece: usize) -> Vec<Vec<u8>> {
        let sink = Collect::default();
        let (done, finished) = channel();
        pump(Pieces(input, piece), 7, Stream::Stderr, &sink, &done);
        finished.try_recv().expect("the pump says it is done");
        let lines = sink.0.into_inner().unwrap();
        assert!(
            lines
                .iter()
                .all(|(rank, stream, _)| (*rank, *stream) == (7, Stream::Stderr))
        );
        lines.into_iter().map(|(_, _, line)| line).collect()
    }

    #[test]
    fn lines_are_split_however_the_bytes_arrive() {
        let input = b"first\n\nthird line\nno newline at the end";
        let expected: Vec<Vec<u8>> = vec![
            b"first".to_vec(),
            b"".to_vec(),
            b"third line".to_vec(),
            b"no newline at the end".to_vec(),
        ];
        for piece in [1, 2, 5, 1024] {
            assert_eq!(lines(input, piece), expected, "pieces of {piece}");
        }
    }

    #[test]
    fn long_lines_arrive_in_bounded_pieces() {
        let mut input = vec![b'x'; MAX_LINE_BYTES * 2 + 10];
        input.push(b'\n');
        input.extend_from_slice(b"after");
        let lines = lines(&input, 8192);
        let lengths: Vec<_> = lines.iter().map(Vec::len).collect();
        assert_eq!(lengths, [MAX_LINE_BYTES, MAX_LINE_BYTES, 10, 5]);
    }

    #[test]
    fn invalid_utf8_passes_through() {
        assert_eq!(lines(b"\xff\xfe\n", 3), vec![b"\xff\xfe".to_vec()]);
    }
}
