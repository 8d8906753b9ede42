//! Socket set-up and the non-blocking reads and writes of the owner thread.
//!
//! On Unix each connection's socket stays in blocking mode for its whole
//! life (the set-up code uses blocking calls with timeouts); the owner
//! thread reads and writes it without blocking by passing `MSG_DONTWAIT`
//! on each call, and the watcher waits for readiness (see `watch.rs`),
//! never in a socket call. Windows has no such flag, so there a
//! connection's socket is switched to non-blocking mode once its set-up is
//! done ([`PER_CALL_NONBLOCKING`]).
//!
//! A write to a closed connection must fail with `EPIPE`, never raise a
//! `SIGPIPE` that would kill a process that did not ignore it: Linux,
//! Android and the BSDs pass `MSG_NOSIGNAL` on each write, Apple's systems
//! set `SO_NOSIGPIPE` on the socket, and Windows has no such signal.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::TcpStream;
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};

/// Whether a call can be made non-blocking by itself (`MSG_DONTWAIT`), so
/// that a connection's socket can stay in blocking mode.
pub(crate) const PER_CALL_NONBLOCKING: bool = cfg!(unix);

/// The flags of the owner's reads: this call does not block.
#[cfg(unix)]
const RECV_FLAGS: core::ffi::c_int = libc::MSG_DONTWAIT;
#[cfg(not(unix))]
const RECV_FLAGS: core::ffi::c_int = 0;

/// The flags of the owner's writes: this call does not block, and a
/// closed connection raises no `SIGPIPE` (where the flag exists; Apple's
/// systems set `SO_NOSIGPIPE` on the socket instead, see [`configure`]).
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly"
))]
const SEND_FLAGS: core::ffi::c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
#[cfg(all(
    unix,
    not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly"
    ))
))]
const SEND_FLAGS: core::ffi::c_int = libc::MSG_DONTWAIT;
#[cfg(not(unix))]
const SEND_FLAGS: core::ffi::c_int = 0;

pub(crate) use dinah_launch::listener::bind;

/// Configures an established connection: `TCP_NODELAY` (frames leave at
/// once; the owner batches writes itself) and the keep-alive probes.
pub(crate) fn configure(stream: &TcpStream, keepalive: Option<Duration>) -> io::Result<()> {
    stream.set_nodelay(true)?;
    #[cfg(target_vendor = "apple")]
    SockRef::from(stream).set_nosigpipe(true)?;
    if let Some(idle) = keepalive {
        let probe = (idle / 4).max(Duration::from_secs(1));
        let params = TcpKeepalive::new()
            .with_time(idle)
            .with_interval(probe)
            .with_retries(4);
        SockRef::from(stream).set_tcp_keepalive(&params)?;
    }
    Ok(())
}

/// Writes as much of `bufs` as the socket takes right now, without
/// blocking: one slice with `send`, several with a gathering `sendmsg`.
/// A lone slice (the usual single answer or request) skips `sendmsg`'s
/// message header and vector, which the kernel would copy in and walk on
/// every call.
///
/// # Errors
///
/// `WouldBlock` when the socket's send buffer is full, or the error of
/// the connection (`BrokenPipe`, `ConnectionReset`...).
pub(crate) fn send_nonblocking(stream: &TcpStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let socket = SockRef::from(stream);
    loop {
        let sent = match bufs {
            [one] => socket.send_with_flags(one, SEND_FLAGS),
            _ => socket.send_vectored_with_flags(bufs, SEND_FLAGS),
        };
        match sent {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Reads what the socket holds right now into `buf`, without blocking.
/// `Ok(0)` is the end of the stream.
///
/// # Errors
///
/// `WouldBlock` when nothing is there, or the connection's error.
pub(crate) fn recv_nonblocking(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and `recv` only
    // ever writes initialised bytes into the slice (it never de-initialises
    // one), so `buf` holds initialised bytes afterwards as before.
    let uninit = unsafe { &mut *(std::ptr::from_mut::<[u8]>(buf) as *mut [MaybeUninit<u8>]) };
    recv_uninit(stream, uninit, RECV_FLAGS)
}

/// Whether the socket holds a byte to read right now, or its end, without
/// taking it and without blocking: `Ok(1)` when it holds data, `Ok(0)`
/// at the end of the stream.
///
/// # Errors
///
/// `WouldBlock` when nothing is there, or the connection's error.
pub(crate) fn peek_nonblocking(stream: &TcpStream) -> io::Result<usize> {
    let mut byte = [MaybeUninit::uninit(); 1];
    #[cfg(unix)]
    return recv_uninit(stream, &mut byte, RECV_FLAGS | libc::MSG_PEEK);
    #[cfg(not(unix))]
    loop {
        // The socket is in non-blocking mode here.
        match SockRef::from(stream).peek(&mut byte) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Reads up to `max` bytes that the socket holds right now onto the end
/// of `frame`, into its spare capacity (reserved by the caller), without
/// blocking and without zero-filling it first. Returns the bytes read;
/// `Ok(0)` is the end of the stream (or `max` was 0).
///
/// # Errors
///
/// `WouldBlock` when nothing is there, or the connection's error.
pub(crate) fn recv_onto(stream: &TcpStream, frame: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    let spare = frame.spare_capacity_mut();
    let limit = max.min(spare.len());
    let read = recv_uninit(stream, &mut spare[..limit], RECV_FLAGS)?;
    let len = frame.len() + read;
    // SAFETY: `recv` initialised the first `read` bytes of the spare
    // capacity (it reports at most the `limit` bytes it was given), so
    // the first `len` bytes of `frame` are initialised.
    unsafe { frame.set_len(len) };
    Ok(read)
}

fn recv_uninit(
    stream: &TcpStream,
    buf: &mut [MaybeUninit<u8>],
    flags: core::ffi::c_int,
) -> io::Result<usize> {
    loop {
        match SockRef::from(stream).recv_with_flags(buf, flags) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// A connected pair of loopback sockets, for tests.
#[cfg(test)]
pub(crate) fn loopback_pair() -> (TcpStream, TcpStream) {
    let listener = bind(std::net::SocketAddr::from((
        std::net::Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// `data` as one slice (written with `send`) and as two (`sendmsg`).
    fn both_shapes(data: &[u8]) -> [Vec<IoSlice<'_>>; 2] {
        let (head, tail) = data.split_at(data.len() / 2);
        [
            vec![IoSlice::new(data)],
            vec![IoSlice::new(head), IoSlice::new(tail)],
        ]
    }

    #[test]
    fn one_slice_and_several_arrive_alike() {
        let (client, mut server) = loopback_pair();
        let data: Vec<u8> = (0..=255).collect();
        for bufs in both_shapes(&data) {
            // A small write into an empty socket buffer goes out whole.
            assert_eq!(send_nonblocking(&client, &bufs).unwrap(), data.len());
            let mut got = vec![0u8; data.len()];
            server.read_exact(&mut got).unwrap();
            assert_eq!(got, data);
        }
    }

    #[test]
    fn a_full_socket_refuses_instead_of_blocking() {
        let (client, server) = loopback_pair();
        configure(&client, Some(Duration::from_secs(10))).unwrap();
        assert!(client.nodelay().unwrap());
        assert!(SockRef::from(&client).keepalive().unwrap());
        // Nobody reads `server`: the buffers fill, then the write refuses,
        // whether it is one slice or several.
        let chunk = vec![7u8; 1 << 16];
        let mut written = 0usize;
        for bufs in both_shapes(&chunk) {
            let error = loop {
                match send_nonblocking(&client, &bufs) {
                    Ok(n) => written += n,
                    Err(error) => break error,
                }
            };
            assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
        }
        assert!(written > 0);
        // The socket itself is still blocking: a read waits for data.
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            std::io::Write::write_all(&mut &server, b"x").unwrap();
            server
        });
        let mut buf = [0u8; 1];
        assert_eq!((&client).read(&mut buf).unwrap(), 1);
        assert_eq!(&buf, b"x");
        drop(late.join().unwrap());
    }

    #[test]
    fn a_write_to_a_closed_peer_is_an_error_not_a_signal() {
        let (client, server) = loopback_pair();
        drop(server);
        let data = [1u8; 1024];
        for bufs in both_shapes(&data) {
            let error = loop {
                if let Err(error) = send_nonblocking(&client, &bufs) {
                    break error;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            assert!(
                matches!(
                    error.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ),
                "{error:?}"
            );
        }
    }

    #[test]
    fn reads_take_what_is_there_and_never_block() {
        let (client, server) = loopback_pair();
        let set = crate::readiness::Set::new().unwrap();
        // SAFETY: removed before it closes, at the end of the test.
        unsafe { set.add(&client, crate::readiness::Interest::Read).unwrap() };
        let readable = || set.any_ready();
        let mut buf = [0u8; 16];
        assert!(!readable());
        let error = recv_nonblocking(&client, &mut buf).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
        std::io::Write::write_all(&mut &server, b"hello").unwrap();
        while !readable() {
            std::thread::yield_now();
        }
        assert_eq!(recv_nonblocking(&client, &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        std::io::Write::write_all(&mut &server, b"0123456789").unwrap();
        let mut frame = Vec::with_capacity(8);
        frame.extend_from_slice(b"ab");
        while !readable() {
            std::thread::yield_now();
        }
        // At most `max` bytes, and never past the reserved capacity.
        assert_eq!(recv_onto(&client, &mut frame, 4).unwrap(), 4);
        assert_eq!(frame, b"ab0123");
        assert_eq!(recv_onto(&client, &mut frame, 100).unwrap(), 2);
        assert_eq!(frame, b"ab012345");
        frame.reserve(10);
        assert_eq!(recv_onto(&client, &mut frame, 100).unwrap(), 4);
        assert_eq!(frame, b"ab0123456789");
        // The end of the stream reads as 0 and counts as readable.
        drop(server);
        while !readable() {
            std::thread::yield_now();
        }
        assert_eq!(recv_nonblocking(&client, &mut buf).unwrap(), 0);
        set.remove(&client);
    }
}
