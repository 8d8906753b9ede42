//! The raw TCP floors of `benches/tcp.rs`: what two threads of one process
//! get from loopback sockets with nothing of dinah's in between.
//!
//! - [`RawPingPong`]: blocking sockets, one message in flight; each side
//!   sleeps in the kernel while it waits (the classic floor, kept as
//!   context);
//! - [`SpinPingPong`]: the same exchange over non-blocking sockets that
//!   both sides poll without ever sleeping, as dinah's owner thread does
//!   while it waits (the honest floor for dinah's round trips); with a
//!   pool hop ([`SpinPingPong::with_pool_hop`]), each reply waits for a
//!   no-op on a Rayon worker (the pool-hop reference for a pooled
//!   handler's round trip);
//! - [`RawPipelined`]: 64-byte requests, a window in flight, through
//!   buffered writers (the throughput floor).

use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A connected loopback pair with `TCP_NODELAY` on both ends.
fn socket_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    client.set_nodelay(true).unwrap();
    server.set_nodelay(true).unwrap();
    (client, server)
}

/// A raw echo server: reads `len`-byte messages and writes each back.
/// With `batched`, replies go through a `BufWriter` flushed only when no
/// more input is buffered.
fn echo_server(stream: TcpStream, len: usize, batched: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut input = BufReader::with_capacity(64 << 10, stream.try_clone().unwrap());
        let mut output = BufWriter::with_capacity(64 << 10, stream);
        let mut message = vec![0u8; len];
        loop {
            if input.read_exact(&mut message).is_err() {
                return;
            }
            if output.write_all(&message).is_err() {
                return;
            }
            if (!batched || input.buffer().is_empty()) && output.flush().is_err() {
                return;
            }
        }
    })
}

/// Blocking ping-pong of `len`-byte messages, one in flight.
pub(crate) struct RawPingPong {
    client: TcpStream,
    message: Vec<u8>,
    server: Option<JoinHandle<()>>,
}

impl RawPingPong {
    pub(crate) fn new(len: usize) -> Self {
        let (client, server) = socket_pair();
        Self {
            client,
            message: vec![1u8; len],
            server: Some(echo_server(server, len, false)),
        }
    }

    pub(crate) fn run(&mut self, n: u64) {
        for _ in 0..n {
            self.client.write_all(&self.message).unwrap();
            self.client.read_exact(&mut self.message).unwrap();
        }
    }
}

impl Drop for RawPingPong {
    fn drop(&mut self) {
        let _ = self.client.shutdown(std::net::Shutdown::Both);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// Pipelined 64-byte requests, `window` in flight, written through a
/// buffered writer and echoed by a batching server.
pub(crate) struct RawPipelined {
    writer: BufWriter<TcpStream>,
    reader: BufReader<TcpStream>,
    server: Option<JoinHandle<()>>,
}

impl RawPipelined {
    pub(crate) fn new() -> Self {
        let (client, server) = socket_pair();
        let reader = BufReader::with_capacity(64 << 10, client.try_clone().unwrap());
        let writer = BufWriter::with_capacity(64 << 10, client);
        Self {
            writer,
            reader,
            server: Some(echo_server(server, 64, true)),
        }
    }

    pub(crate) fn run(&mut self, n: u64, window: u64) {
        let request = [3u8; 64];
        let mut response = [0u8; 64];
        let mut done = 0;
        while done < n {
            let batch = window.min(n - done);
            for _ in 0..batch {
                self.writer.write_all(&request).unwrap();
            }
            self.writer.flush().unwrap();
            for _ in 0..batch {
                self.reader.read_exact(&mut response).unwrap();
            }
            done += batch;
        }
    }
}

impl Drop for RawPipelined {
    fn drop(&mut self) {
        let _ = self.writer.get_ref().shutdown(std::net::Shutdown::Both);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// Writes all of `bytes` to a non-blocking `stream`, polling while the
/// socket buffer is full.
fn spin_write_all(stream: &mut TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(error) if error.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Fills `buffer` from a non-blocking `stream`, polling while nothing has
/// arrived.
fn spin_read_exact(stream: &mut TcpStream, mut buffer: &mut [u8]) -> std::io::Result<()> {
    while !buffer.is_empty() {
        match stream.read(buffer) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buffer = &mut buffer[n..],
            Err(error) if error.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Ping-pong of `len`-byte messages, one in flight, over non-blocking
/// sockets that the client and the echo thread both poll without sleeping.
pub(crate) struct SpinPingPong {
    client: TcpStream,
    message: Vec<u8>,
    server: Option<JoinHandle<()>>,
}

impl SpinPingPong {
    pub(crate) fn new(len: usize) -> Self {
        Self::start(len, None)
    }

    /// The pool-hop reference: the echo thread spawns each message's
    /// no-op on a Rayon pool of `workers` threads and writes the reply
    /// once the worker has set a flag, which it polls yielding its core
    /// between looks, as dinah's owner does before it parks: a pooled
    /// handler's two hand-offs with nothing else. What dinah's pooled
    /// round trip is set beside, not a floor: its cost varies widely from
    /// run to run.
    pub(crate) fn with_pool_hop(len: usize, workers: usize) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .build()
            .unwrap();
        Self::start(len, Some(pool))
    }

    fn start(len: usize, pool: Option<rayon::ThreadPool>) -> Self {
        let (client, mut server) = socket_pair();
        client.set_nonblocking(true).unwrap();
        server.set_nonblocking(true).unwrap();
        let echo = std::thread::spawn(move || {
            let mut message = vec![0u8; len];
            let done = Arc::new(AtomicBool::new(false));
            while spin_read_exact(&mut server, &mut message).is_ok() {
                if let Some(pool) = &pool {
                    let finished = Arc::clone(&done);
                    pool.spawn(move || finished.store(true, Ordering::Release));
                    while !done.swap(false, Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                }
                if spin_write_all(&mut server, &message).is_err() {
                    return;
                }
            }
        });
        Self {
            client,
            message: vec![1u8; len],
            server: Some(echo),
        }
    }

    pub(crate) fn run(&mut self, n: u64) {
        for _ in 0..n {
            spin_write_all(&mut self.client, &self.message).unwrap();
            spin_read_exact(&mut self.client, &mut self.message).unwrap();
        }
    }
}

impl Drop for SpinPingPong {
    fn drop(&mut self) {
        let _ = self.client.shutdown(std::net::Shutdown::Both);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}
