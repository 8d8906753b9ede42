//! How refused control connections are reported: the first few one by
//! one, then a summary at most once a second, so thousands of strangers
//! knocking on the control port cost a few lines, not thousands.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::launcher::LaunchEvent;

/// Refusals reported one by one before the summaries start.
const SHOWN: u32 = 3;
/// The least time between two summaries.
const SUMMARY_PERIOD: Duration = Duration::from_secs(1);

/// The refusals not yet reported.
#[derive(Debug)]
pub(super) struct Rejections {
    shown: u32,
    unreported: u64,
    last: Option<SocketAddr>,
    next_summary: Instant,
}

impl Rejections {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            shown: 0,
            unreported: 0,
            last: None,
            next_summary: now + SUMMARY_PERIOD,
        }
    }

    /// Counts a refusal of `peer`: the event to report now, if any.
    pub(super) fn refused(&mut self, peer: SocketAddr, now: Instant) -> Option<LaunchEvent> {
        if self.shown < SHOWN {
            self.shown += 1;
            return Some(LaunchEvent::Rejected { peer });
        }
        self.unreported += 1;
        self.last = Some(peer);
        self.summary(now, false)
    }

    /// The summary of the refusals not yet reported, once a second has
    /// passed since the last one (or at once when `last_call`).
    pub(super) fn summary(&mut self, now: Instant, last_call: bool) -> Option<LaunchEvent> {
        if self.unreported == 0 || !(last_call || now >= self.next_summary) {
            return None;
        }
        let event = LaunchEvent::RejectedMore {
            count: self.unreported,
            last: self.last?,
        };
        self.unreported = 0;
        self.next_summary = now + SUMMARY_PERIOD;
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusals_are_shown_then_summed_up_once_a_second() {
        let start = Instant::now();
        let mut rejections = Rejections::new(start);
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for _ in 0..SHOWN {
            assert_eq!(
                rejections.refused(peer, start),
                Some(LaunchEvent::Rejected { peer })
            );
        }
        // Within the first second: counted, not reported.
        for _ in 0..1000 {
            assert_eq!(rejections.refused(peer, start), None);
        }
        assert_eq!(rejections.summary(start, false), None);
        let later = start + SUMMARY_PERIOD;
        let other: SocketAddr = "127.0.0.2:10".parse().unwrap();
        assert_eq!(
            rejections.refused(other, later),
            Some(LaunchEvent::RejectedMore {
                count: 1001,
                last: other
            })
        );
        assert_eq!(rejections.summary(later, true), None, "nothing left");
        assert_eq!(rejections.refused(peer, later), None);
        assert_eq!(
            rejections.summary(later, true),
            Some(LaunchEvent::RejectedMore {
                count: 1,
                last: peer
            })
        );
    }
}
