//! Binding a listener the way every dinah listener is bound.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// The listen backlog of every listener (the kernel caps it at
/// `net.core.somaxconn`): room for a burst of strangers' connections
/// without turning a genuine rank's connection away while its owner
/// accepts them.
pub const LISTEN_BACKLOG: i32 = 1024;

/// Binds a listener on `addr` with a backlog of [`LISTEN_BACKLOG`], and on
/// Unix with `SO_REUSEADDR` (a restarted run can reuse a port in
/// `TIME_WAIT`, as the standard library's listeners can; on Windows the
/// option would let another socket take a port that is listening, and the
/// standard library does not set it there either). The launcher's control
/// listener, the coordinator's, and the TCP transport's rank listeners all
/// are.
///
/// # Errors
///
/// The operating system's error (the address is taken, or not this
/// host's).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Did `accept` fail because the process (or the system) is out of file
/// descriptors (`EMFILE`, `ENFILE`; `WSAEMFILE` on Windows)? A listener
/// under a flood of connections then drops one it holds and goes on.
pub fn is_out_of_descriptors(error: &io::Error) -> bool {
    #[cfg(unix)]
    let codes = [libc::EMFILE, libc::ENFILE];
    // `WSAEMFILE` in `winsock2.h`.
    #[cfg(not(unix))]
    let codes = [10024];
    error
        .raw_os_error()
        .is_some_and(|code| codes.contains(&code))
}
