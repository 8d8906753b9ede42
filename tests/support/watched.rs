//! A transport driver that wraps another one and shows a test the
//! runtime's calls to it: each poll, each idle wait and what the runtime
//! says of its workers go to a [`Watch`] first; everything else is the
//! wrapped driver's.

use std::time::Duration;

use dinah_std::transport::{
    DriverCounts, TransportDriver, TransportError, TransportEvent, TransportHandle,
};

/// What a test does when the runtime calls its driver.
pub(crate) trait Watch {
    /// Before each poll; an error is the poll's instead.
    fn poll(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    /// Before each idle wait.
    fn idle_wait(&mut self) {}

    /// When the runtime tells the driver whether its workers run jobs.
    fn workers_running(&mut self, running: bool) {
        let _ = running;
    }
}

/// `inner`, watched by `watch`.
pub(crate) struct Watched<D, W> {
    pub(crate) inner: D,
    pub(crate) watch: W,
}

impl<D: TransportDriver, W: Watch> TransportDriver for Watched<D, W> {
    fn poll(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        self.watch.poll()?;
        self.inner.poll(budget, events)
    }

    fn flush(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        self.inner.flush(budget, events)
    }

    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        self.watch.idle_wait();
        self.inner.idle_wait(spin, timeout);
    }

    fn set_workers_running(&mut self, running: bool) {
        self.watch.workers_running(running);
        self.inner.set_workers_running(running);
    }

    fn handle(&self) -> &TransportHandle {
        self.inner.handle()
    }

    fn begin_shutdown(&mut self) {
        self.inner.begin_shutdown();
    }

    fn is_drained(&self) -> bool {
        self.inner.is_drained()
    }

    fn counts(&self) -> DriverCounts {
        self.inner.counts()
    }

    fn close(&mut self, deadline: std::time::Instant) -> DriverCounts {
        self.inner.close(deadline)
    }
}
