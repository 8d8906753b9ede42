//! The control side of the supervision loop: accepting connections,
//! reading reports, refusing what does not belong to the run, and sending
//! the address list once every rank has reported.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::{EXTRA_CONNECTIONS, Supervisor, WRITE_LIMIT};
use crate::launch_error::{LaunchError, LaunchOp};
use crate::launcher::{
    CONTROL_VERSION, ControlError, LaunchEvent, Message, ReadError, Refusal, read_message,
    write_message,
};

/// A control connection and what its reader thread made of it.
pub(super) struct Inbound {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) result: Result<Message, ReadError>,
}

impl Supervisor<'_> {
    pub(super) fn accept(&mut self, listener: &TcpListener) {
        loop {
            match listener.accept() {
                Ok((stream, peer)) => {
                    let busy = self.readers >= self.world as usize + EXTRA_CONNECTIONS;
                    if self.rendezvous_done || busy {
                        self.reject(stream, peer, None);
                        continue;
                    }
                    let (tx, deadline) = (self.inbound_tx.clone(), self.startup_deadline);
                    let reader = thread::Builder::new()
                        .name("dinah-run-control".to_owned())
                        .spawn(move || {
                            let mut stream = stream;
                            let result = match stream.set_nonblocking(false) {
                                Ok(()) => read_message(&mut stream, deadline),
                                Err(e) => Err(ReadError::Io(e)),
                            };
                            let _ = tx.send(Inbound {
                                stream,
                                peer,
                                result,
                            });
                        });
                    match reader {
                        Ok(_) => self.readers += 1,
                        Err(source) => {
                            self.fail(
                                LaunchError::Io {
                                    op: LaunchOp::Thread,
                                    source,
                                },
                                Refusal::Aborted,
                                Duration::ZERO,
                            );
                            return;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(source) => {
                    self.fail(
                        LaunchError::Io {
                            op: LaunchOp::AcceptControl,
                            source,
                        },
                        Refusal::Aborted,
                        Duration::ZERO,
                    );
                    return;
                }
            }
        }
    }

    /// Refuses and closes a connection that did not deliver a valid report.
    pub(super) fn reject(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        refusal: Option<Refusal>,
    ) {
        self.report.rejected_connections += 1;
        self.sink.event(&LaunchEvent::Rejected { peer });
        if let Some(refusal) = refusal {
            let _ = write_message(
                &mut stream,
                &Message::Refusal(refusal),
                Instant::now() + WRITE_LIMIT,
            );
        }
    }

    pub(super) fn inbound(
        &mut self,
        Inbound {
            mut stream,
            peer,
            result,
        }: Inbound,
    ) {
        self.readers -= 1;
        let report = match result {
            Ok(Message::Report(report)) => report,
            Err(ReadError::Protocol(ControlError::UnsupportedVersion { .. })) => {
                let refusal = Refusal::UnsupportedVersion {
                    supported: CONTROL_VERSION,
                };
                return self.reject(stream, peer, Some(refusal));
            }
            _ => return self.reject(stream, peer, None),
        };
        let refusal = if report.run_id != self.report.run_id {
            Some(Refusal::RunMismatch)
        } else if report.world != self.world {
            Some(Refusal::WorldMismatch {
                launcher: self.world,
            })
        } else if report.rank >= self.world {
            Some(Refusal::RankOutOfRange { world: self.world })
        } else if self.report.ranks[report.rank as usize].addr.is_some() {
            Some(Refusal::DuplicateRank)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return self.reject(stream, peer, Some(refusal));
        }
        let rank = report.rank;
        self.report.ranks[rank as usize].addr = Some(report.addr);
        self.sink.event(&LaunchEvent::Reported {
            rank,
            addr: report.addr,
        });
        if let Some(refusal) = self.abort {
            let _ = write_message(
                &mut stream,
                &Message::Refusal(refusal),
                Instant::now() + WRITE_LIMIT,
            );
        } else if let Some((gone, exit)) = self.exited_unreported {
            let refusal = Refusal::RankExited { rank: gone };
            let _ = write_message(
                &mut stream,
                &Message::Refusal(refusal),
                Instant::now() + WRITE_LIMIT,
            );
            self.fail(
                LaunchError::ExitedBeforeReport { rank: gone, exit },
                refusal,
                self.config.grace,
            );
        } else {
            self.waiting[rank as usize] = Some(stream);
        }
    }

    /// Sends the list once every rank has reported.
    pub(super) fn rendezvous(&mut self) {
        if self.rendezvous_done || self.abort.is_some() || self.waiting.iter().any(Option::is_none)
        {
            return;
        }
        let addrs = self
            .report
            .ranks
            .iter()
            .filter_map(|rank| rank.addr)
            .collect();
        let members = Message::Members {
            run_id: self.report.run_id,
            addrs,
        };
        let deadline = Instant::now() + WRITE_LIMIT;
        for mut stream in self.waiting.iter_mut().filter_map(Option::take) {
            // A rank that cannot take the list fails on its own side (and
            // its exit fails the run); the others still get theirs.
            let _ = write_message(&mut stream, &members, deadline);
            self.lifelines.push(stream);
        }
        self.rendezvous_done = true;
        self.sink.event(&LaunchEvent::Rendezvous);
    }
}
