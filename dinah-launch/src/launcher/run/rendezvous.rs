//! The control side of the supervision loop: accepting connections,
//! reading reports, refusing what does not belong to the run, and sending
//! the address list once every rank has reported.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{Supervisor, WRITE_LIMIT};
use crate::launch_error::{LaunchError, LaunchOp};
use crate::launcher::arrivals::{Event, Inbound};
use crate::launcher::{
    CONTROL_VERSION, ControlError, LaunchEvent, Message, ReadError, Refusal, write_message,
};

impl Supervisor<'_> {
    /// Accepts new control connections and reads the waiting ones; hands
    /// what finished to [`inbound`](Self::inbound). Returns whether
    /// anything happened.
    pub(super) fn accept(&mut self, listener: &TcpListener) -> bool {
        let mut events = Vec::new();
        let busy = self.arrivals.pass(listener, &mut events);
        for event in events {
            match event {
                Event::Inbound(inbound) => self.inbound(inbound),
                Event::ListenerFailed(source) => {
                    self.fail(
                        LaunchError::Io {
                            op: LaunchOp::AcceptControl,
                            source,
                        },
                        Refusal::Aborted,
                        Duration::ZERO,
                    );
                }
            }
        }
        busy
    }

    /// Refuses and closes a connection that did not deliver a valid report.
    pub(super) fn reject(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        refusal: Option<Refusal>,
    ) {
        self.report.rejected_connections += 1;
        if let Some(event) = self.rejections.refused(peer, Instant::now()) {
            self.sink.event(&event);
        }
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
            ..
        }: Inbound,
    ) {
        if self.rendezvous_done {
            // Every rank has its list: nothing else belongs to the run.
            return self.reject(stream, peer, None);
        }
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
                expected: self.world,
            })
        } else if report.rank >= self.world {
            Some(Refusal::RankOutOfRange { world: self.world })
        } else if let Some(known) = self.report.ranks[report.rank as usize].addr {
            // The same rank and listener again: the rank lost its first
            // connection and reports anew (see `LaunchEnv::rendezvous`);
            // the new connection replaces the old one.
            (known != report.addr).then_some(Refusal::DuplicateRank)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return self.reject(stream, peer, Some(refusal));
        }
        let rank = report.rank;
        if self.report.ranks[rank as usize].addr.is_none() {
            self.report.ranks[rank as usize].addr = Some(report.addr);
            self.sink.event(&LaunchEvent::Reported {
                rank,
                addr: report.addr,
            });
        }
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
