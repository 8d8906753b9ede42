//! A connection's frames taken from the handle and not yet written, and
//! the batched, non-blocking writes that move them to the socket.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::TcpStream;

use dinah_std::transport::{Frame, TransportHandle, frame_buffers};

use crate::socket;

/// The most slices one vectored write gathers (Linux allows 1024): a
/// whole frame is one, a split frame one per part (its head's pieces
/// around its middle parts, each middle part, its tail).
const MAX_SLICES: usize = 64;

/// A frame waiting to be written.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The frame.
    pub(crate) frame: Frame,
    /// Taken from the handle (completed on it once written or failed);
    /// `false` for the driver's own goodbye.
    pub(crate) from_handle: bool,
}

/// What one [`Outbox::flush`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flushed {
    /// Bytes written.
    pub(crate) bytes: usize,
    /// The socket's buffer is full: retry later.
    pub(crate) blocked: bool,
}

/// The frames of one connection between the handle and the socket, in
/// order, with how much of the first one is already written.
///
/// Bounded by the caller through [`has_room`](Self::has_room); the frames'
/// bytes stay counted by the handle until written (or failed).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    frames: VecDeque<Pending>,
    /// Bytes of the first frame already written.
    offset: usize,
    /// Bytes of all queued frames, including the written part of the first.
    bytes: u64,
}

impl Outbox {
    /// Can a frame of `len` bytes join, with at most `max_frames` frames
    /// and `max_bytes` bytes queued? An empty outbox takes any frame.
    pub(crate) fn has_room(&self, len: usize, max_frames: usize, max_bytes: u64) -> bool {
        self.frames.is_empty()
            || (self.frames.len() < max_frames && self.bytes + len as u64 <= max_bytes)
    }

    /// Queues a frame behind the others.
    pub(crate) fn push(&mut self, frame: impl Into<Frame>, from_handle: bool) {
        let frame = frame.into();
        self.bytes += frame.len() as u64;
        self.frames.push_back(Pending { frame, from_handle });
    }

    /// Is nothing left to write?
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Writes queued frames to `stream` without blocking, up to about
    /// `max_bytes`, gathering up to 64 slices per `sendmsg` (a split
    /// frame's parts are written from their own buffers; a lone whole
    /// frame, the usual answer or request, is one slice written with
    /// `send`, without filling the gathering array). Each frame taken from the handle is
    /// completed on `handle` once fully written.
    ///
    /// # Errors
    ///
    /// The connection's error (the frames stay queued for the caller to
    /// fail).
    pub(crate) fn flush(
        &mut self,
        stream: &TcpStream,
        handle: &TransportHandle,
        max_bytes: usize,
    ) -> io::Result<Flushed> {
        let mut flushed = Flushed::default();
        while !self.frames.is_empty() && flushed.bytes < max_bytes {
            let sent = match self.lone_frame() {
                // The common case of a lone answer or request: one slice,
                // without filling the whole gathering array.
                Some(bytes) => socket::send_nonblocking(stream, &[IoSlice::new(bytes)]),
                None => self.send_gathered(stream, max_bytes),
            };
            match sent {
                Ok(written) => {
                    flushed.bytes += written;
                    self.advance(written, handle);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    flushed.blocked = true;
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(flushed)
    }

    /// The unwritten bytes of the only queued frame, if it is whole.
    fn lone_frame(&self) -> Option<&[u8]> {
        match self.frames.front() {
            Some(pending) if self.frames.len() == 1 && !pending.frame.is_split() => {
                Some(&pending.frame.head()[self.offset..])
            }
            _ => None,
        }
    }

    /// One vectored write of up to [`MAX_SLICES`] slices gathered from
    /// the queued frames, about `max_bytes` at most.
    fn send_gathered(&self, stream: &TcpStream, max_bytes: usize) -> io::Result<usize> {
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let mut count = 0;
        let mut gathered = 0;
        'gather: for (i, pending) in self.frames.iter().enumerate() {
            // Each part from its own buffer (a split frame's head, middle
            // parts and tail); the first frame's written bytes skipped.
            let mut skip = if i == 0 { self.offset } else { 0 };
            let frame = &pending.frame;
            if !frame.is_split() {
                if count == MAX_SLICES {
                    break;
                }
                slices[count] = IoSlice::new(&frame.head()[skip..]);
                count += 1;
                gathered += frame.head().len() - skip;
                if gathered >= max_bytes {
                    break;
                }
                continue;
            }
            for part in frame.wire_parts() {
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                if count == MAX_SLICES {
                    break 'gather;
                }
                slices[count] = IoSlice::new(&part[skip..]);
                count += 1;
                gathered += part.len() - skip;
                skip = 0;
            }
            if gathered >= max_bytes {
                break;
            }
        }
        socket::send_nonblocking(stream, &slices[..count])
    }

    /// Marks `written` bytes as sent, completing the frames they finish.
    fn advance(&mut self, mut written: usize, handle: &TransportHandle) {
        while written > 0 {
            let Some(front) = self.frames.front() else {
                break;
            };
            let left = front.frame.len() - self.offset;
            if written < left {
                self.offset += written;
                return;
            }
            written -= left;
            self.offset = 0;
            if let Some(done) = self.frames.pop_front() {
                self.bytes -= done.frame.len() as u64;
                if done.from_handle {
                    handle.complete_send(done.frame.len(), true);
                }
                // Written: the buffers can carry the next frames read or
                // encoded on this thread.
                frame_buffers::give_frame(done.frame);
            }
        }
        // A zero-length frame is complete as soon as it is reached.
        while self
            .frames
            .front()
            .is_some_and(|f| f.frame.len() == self.offset)
        {
            if let Some(done) = self.frames.pop_front() {
                self.offset = 0;
                if done.from_handle {
                    handle.complete_send(0, true);
                }
            }
        }
    }

    /// Removes every queued frame (for a peer that went down or a close).
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = Pending> + '_ {
        self.offset = 0;
        self.bytes = 0;
        self.frames.drain(..)
    }

    /// Frames and bytes queued that the handle does not count (the
    /// driver's goodbyes).
    pub(crate) fn own(&self) -> (u64, u64) {
        self.frames
            .iter()
            .filter(|f| !f.from_handle)
            .fold((0, 0), |(n, b), f| (n + 1, b + f.frame.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener};

    use dinah_core::wire::Channel;
    use dinah_core::{Rank, WorldSize};
    use dinah_std::transport::HandleConfig;

    use super::*;

    fn handle() -> TransportHandle {
        let world = WorldSize::new(2).unwrap();
        TransportHandle::new(Rank::ZERO, world, HandleConfig::default())
    }

    #[test]
    fn frames_are_written_in_order_and_completed_on_the_handle() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let handle = handle();
        let peer = Rank::new(1, handle.world()).unwrap();
        let mut outbox = Outbox::default();
        let mut expected = Vec::new();
        for i in 0..200u8 {
            let frame = vec![i; usize::from(i % 7) * 10];
            expected.extend_from_slice(&frame);
            handle.try_send(peer, Channel::Action, frame).unwrap();
            let popped = handle.pop_outgoing(Channel::Action).unwrap();
            assert!(outbox.has_room(popped.frame.len(), 1000, 1 << 20));
            outbox.push(popped.frame, true);
        }
        outbox.push(b"bye".to_vec(), false);
        assert_eq!(outbox.own(), (1, 3));
        expected.extend_from_slice(b"bye");
        while !outbox.is_empty() {
            let flushed = outbox.flush(&client, &handle, 100).unwrap();
            assert!(!flushed.blocked);
        }
        let counts = handle.counts();
        assert_eq!(
            (counts.in_flight, counts.frames_sent, counts.retained_bytes),
            (0, 200, 0)
        );
        drop(client);
        let mut received = Vec::new();
        server.read_to_end(&mut received).unwrap();
        assert_eq!(received, expected);
    }

    #[test]
    fn a_lone_frame_larger_than_the_socket_buffer_goes_out_in_pieces() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_nonblocking(true).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut received = Vec::new();
            server.read_to_end(&mut received).unwrap();
            received
        });
        let handle = handle();
        let frame: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut outbox = Outbox::default();
        outbox.push(frame.clone(), false);
        let (mut flushes, mut blocked) = (0, 0);
        while !outbox.is_empty() {
            let flushed = outbox.flush(&client, &handle, usize::MAX).unwrap();
            flushes += 1;
            if flushed.blocked {
                blocked += 1;
                std::thread::yield_now();
            }
        }
        assert!(blocked > 0, "the frame outgrew the socket's buffer");
        assert!(flushes > 1);
        drop(client);
        assert!(reader.join().unwrap() == frame, "every byte once, in order");
    }

    #[test]
    fn a_written_frame_gives_its_buffer_back_for_the_next_frame() {
        // On a thread of its own, so no other test's buffers are there.
        std::thread::spawn(|| {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            let handle = handle();
            let mut frame = frame_buffers::take(100);
            frame.extend_from_slice(&[9; 100]);
            let buffer = frame.as_ptr();
            let mut outbox = Outbox::default();
            outbox.push(frame, false);
            while !outbox.is_empty() {
                outbox.flush(&client, &handle, 100).unwrap();
            }
            // An allocation of the same size in between would get the
            // buffer had it gone back to the allocator.
            let decoy: Vec<u8> = Vec::with_capacity(frame_buffers::MIN_CLASS_BYTES);
            let next = frame_buffers::take(100);
            assert_eq!(next.as_ptr(), buffer, "the written frame's buffer");
            assert_ne!(decoy.as_ptr(), buffer);
            drop(client);
            let mut received = Vec::new();
            server.read_to_end(&mut received).unwrap();
            assert_eq!(received, [9; 100]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn room_is_bounded_by_frames_and_bytes_but_one_frame_always_fits() {
        let mut outbox = Outbox::default();
        assert!(outbox.has_room(1 << 30, 1, 10));
        outbox.push(vec![0; 8], true);
        assert!(!outbox.has_room(1, 1, 100), "frame count");
        assert!(!outbox.has_room(3, 10, 10), "bytes");
        assert!(outbox.has_room(2, 10, 10));
        assert_eq!(outbox.take_all().count(), 1);
        assert!(outbox.is_empty());
    }
}
