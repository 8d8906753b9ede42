//! The raw MPI floors of `benches/mpi.rs`: ping-pongs and echoes with the
//! `mpi` crate alone (immediate sends and receives completed by polling
//! `test()`), the same with a Rayon hop on the serving side, and the
//! 8-byte ping-pong received on two tags as the MPI driver receives. Each
//! runs between ranks 0 and 1 between two barriers; further ranks only
//! take part in the barriers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dinah::mpi::mpi;
use dinah::mpi::mpi::topology::{Process, SimpleCommunicator};
use dinah::mpi::mpi::traits::{Communicator, CommunicatorCollectives, Destination, Source};

/// Mean round trip of `iterations` ping-pongs of `size` bytes between
/// ranks 0 and 1 with immediate sends and receives completed by polling
/// `test()`. Other ranks only take part in the barrier.
///
/// With a `hop` pool (given on rank 1 only), this is the pool-hop
/// reference: a pooled handler's two hand-offs on the serving side. Rank 1
/// spawns each request's no-op on the pool, and its main thread, the only
/// one that calls MPI (as the runtime's owner thread is), sends the reply
/// once the worker has set a flag, which it polls yielding its core
/// between looks, as the owner does before it parks. What dinah's pooled
/// round trip is set beside, not a floor: its cost varies widely from run
/// to run.
pub(crate) fn raw_pingpong(
    world: &SimpleCommunicator,
    size: usize,
    iterations: usize,
    hop: Option<&rayon::ThreadPool>,
) -> Duration {
    let send = vec![0xa5u8; size];
    let mut receive = vec![0u8; size];
    let done = Arc::new(AtomicBool::new(false));
    timed_pair(world, iterations, |rank, peer| {
        for _ in 0..iterations {
            if rank == 0 {
                send_and_receive(&peer, &send, &mut receive);
            } else {
                receive_from(&peer, &mut receive);
                if let Some(pool) = hop {
                    let finished = Arc::clone(&done);
                    pool.spawn(move || finished.store(true, Ordering::Release));
                    while !done.swap(false, Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                }
                send_to(&peer, &send);
            }
        }
    })
}

/// The raw payload echo between ranks 0 and 1: each sends back the buffer
/// it has just received into (rank 0 sends first), as dinah's echo sends
/// the vector the previous echo returned: every message is bytes the other
/// rank has just written, where [`raw_pingpong`] sends a buffer nobody
/// writes (with Open MPI's single-copy transfers on, that makes it about
/// twice as fast as this echo from 64 KiB to 1 MiB). Other ranks only take
/// part in the barrier.
pub(crate) fn raw_echo(world: &SimpleCommunicator, size: usize, iterations: usize) -> Duration {
    let mut buffer = vec![0xa5u8; size];
    // Rank 0 posts its receive before its send, as `raw_pingpong` does, so
    // it receives into a second buffer and sends that one next.
    let mut spare = vec![0u8; size];
    timed_pair(world, iterations, |rank, peer| {
        for _ in 0..iterations {
            if rank == 0 {
                send_and_receive(&peer, &buffer, &mut spare);
                std::mem::swap(&mut buffer, &mut spare);
            } else {
                receive_from(&peer, &mut buffer);
                send_to(&peer, &buffer);
            }
        }
    })
}

/// Runs `exchange` on ranks 0 and 1 (given its rank and the other one)
/// between two barriers and returns the time per iteration; other ranks
/// only take part in the barriers.
fn timed_pair(
    world: &SimpleCommunicator,
    iterations: usize,
    exchange: impl FnOnce(mpi::Rank, Process<'_>),
) -> Duration {
    let rank = world.rank();
    world.barrier();
    let start = Instant::now();
    if rank <= 1 {
        exchange(rank, world.process_at_rank(1 - rank));
    }
    let elapsed = start.elapsed();
    world.barrier();
    elapsed / iterations.max(1) as u32
}

/// One step of the calling side of a ping-pong: the receive posted before
/// the send, then both completed.
fn send_and_receive(peer: &Process<'_>, send: &[u8], receive: &mut [u8]) {
    mpi::request::scope(|scope| {
        let received = peer.immediate_receive_into(scope, receive);
        let sent = peer.immediate_send(scope, send);
        complete(sent);
        complete(received);
    });
}

/// Receives one message from `peer` into `buffer`.
fn receive_from(peer: &Process<'_>, buffer: &mut [u8]) {
    mpi::request::scope(|scope| complete(peer.immediate_receive_into(scope, buffer)));
}

/// Sends `buffer` to `peer`.
fn send_to(peer: &Process<'_>, buffer: &[u8]) {
    mpi::request::scope(|scope| complete(peer.immediate_send(scope, buffer)));
}

/// How the receiving side of [`lane_pingpong`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawWait {
    /// As the MPI driver does: a receive posted in advance from any source
    /// on each of two tags (control and action), the control one tested
    /// before the action one until one completes; the completed receive
    /// is posted again before the reply is sent.
    AsTheDriver,
    /// The receive path the driver had before its posted receives:
    /// `MPI_Improbe` on the control tag, then on the action tag, until one
    /// matches; then `MPI_Imrecv` polled with `test()`.
    MatchedProbes,
}

/// The tag of the raw ping-pongs that stands for the driver's control
/// lane (nothing is sent on it).
const CONTROL: mpi::Tag = 11;
/// The tag that stands for the action lane.
const ACTION: mpi::Tag = 12;

/// The raw 8-byte ping-pong again, between ranks 0 and 1 on two tags,
/// each message received the `wait` way. No runtime, no frames: what the
/// receive path alone costs a round trip. Other ranks only take part in
/// the barrier.
pub(crate) fn lane_pingpong(
    world: &SimpleCommunicator,
    iterations: usize,
    wait: RawWait,
) -> Duration {
    timed_pair(world, iterations, |_, _| match wait {
        RawWait::AsTheDriver => posted_pingpong(world, iterations),
        RawWait::MatchedProbes => probed_pingpong(world, iterations),
    })
}

/// [`RawWait::AsTheDriver`]. Rank 1 posts its next receive before it sends
/// each reply, as the driver posts a slot again when it takes a message.
fn posted_pingpong(world: &SimpleCommunicator, iterations: usize) {
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let any = world.any_process();
    let send = [0xa5u8; 8];
    let mut control_buffer = [0u8; 8];
    let mut receive = [0u8; 8];
    mpi::request::scope(|outer| {
        // Nothing is sent on the control tag: its receive is tested every
        // time, as the driver's control ring is, and cancelled at the end.
        let mut control =
            Some(any.immediate_receive_into_with_tag(outer, &mut control_buffer[..], CONTROL));
        for index in 0..iterations {
            mpi::request::scope(|scope| {
                let mut action =
                    Some(any.immediate_receive_into_with_tag(scope, &mut receive[..], ACTION));
                if rank == 0 || index > 0 {
                    complete(peer.immediate_send_with_tag(scope, &send[..], ACTION));
                }
                loop {
                    let pending = control.take().expect("posted");
                    control = Some(
                        pending
                            .test()
                            .expect_err("nothing is sent on the control tag"),
                    );
                    match action.take().expect("posted").test() {
                        Ok(_) => break,
                        Err(pending) => action = Some(pending),
                    }
                }
            });
        }
        if rank == 1 {
            mpi::request::scope(|scope| {
                complete(peer.immediate_send_with_tag(scope, &send[..], ACTION));
            });
        }
        let control = control.take().expect("posted");
        control.cancel();
        complete(control);
    });
}

/// [`RawWait::MatchedProbes`].
fn probed_pingpong(world: &SimpleCommunicator, iterations: usize) {
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let any = world.any_process();
    let send = [0xa5u8; 8];
    let mut receive = [0u8; 8];
    let send_one = || {
        mpi::request::scope(|scope| {
            complete(peer.immediate_send_with_tag(scope, &send[..], ACTION));
        });
    };
    let mut wait_and_receive = || {
        let (message, _) = loop {
            if let Some(found) = any.immediate_matched_probe_with_tag(CONTROL) {
                break found;
            }
            if let Some(found) = any.immediate_matched_probe_with_tag(ACTION) {
                break found;
            }
        };
        mpi::request::scope(|scope| {
            complete(message.immediate_matched_receive_into(scope, &mut receive[..]));
        });
    };
    for _ in 0..iterations {
        if rank == 0 {
            send_one();
            wait_and_receive();
        } else {
            wait_and_receive();
            send_one();
        }
    }
}

/// Polls `request` with `test()` until it completes.
fn complete<'a, D: ?Sized, S: mpi::request::Scope<'a>>(
    mut request: mpi::request::Request<'a, D, S>,
) {
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
    }
}
