//! [`RuntimeThread`]: a runtime progressed by a thread of its own, so that
//! other executors (tokio, async-std, a hand-written poll loop) can await
//! its calls.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use super::builder::RuntimeBuilder;
use super::client::RuntimeClient;
use super::error::BuildError;
use super::owner::{ShutdownReport, ShutdownTimeout};
use crate::transport::{TransportDriver, TransportHandle};

/// A [`Runtime`](crate::Runtime) that runs on a thread of its own, which
/// does nothing but progress it, until [`shutdown`](Self::shutdown).
///
/// A [`RemoteFuture`](crate::RemoteFuture) is an ordinary [`Future`]: any
/// executor can poll it, and it is woken when its result arrives, but only
/// while something progresses the runtime. With
/// [`Runtime::block_on`](crate::Runtime::block_on) that is the caller's own
/// thread; with a `RuntimeThread` it is the runtime's thread, and the
/// calls can be made and awaited from anywhere through
/// [`client`](Self::client), for example from tokio tasks.
///
/// The runtime is built on its thread (a `Runtime` never moves between
/// threads), so the transport's driver must be [`Send`]: the in-memory and
/// TCP drivers are; the MPI driver is not, since MPI must be progressed by
/// the thread that initialised it (progress that runtime on that thread
/// and hand out its clients instead).
///
/// # Examples
///
/// ```
/// # use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
/// # use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
/// # use dinah_std::{Action, CodecError, Runtime, RuntimeThread, SegmentReader, SegmentWriter, WireValue, schema_id};
/// # struct Twice(u64);
/// # impl WireValue for Twice {
/// #     const SCHEMA_ID: u64 = schema_id("doc.Twice/1");
/// #     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> { self.0.encode(out) }
/// #     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> { u64::decode(input).map(Twice) }
/// # }
/// # impl Action for Twice { const ID: u128 = 0x7_1ce; type Output = u64; }
/// let network = SimNetwork::with_mode(WorldSize::new(1)?, 1, FaultPlan::new(), SimMode::Threaded)?;
/// let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
/// builder.register::<Twice, _>(|Twice(x)| Ok(2 * x))?;
/// let (handle, driver) = network.endpoint(Rank::ZERO, builder.hello()?.handle)?;
/// let runtime = RuntimeThread::start(builder, handle, driver)?;
///
/// // Any thread, any executor: here a plain thread blocking on the future.
/// let client = runtime.client().clone();
/// let answer = std::thread::spawn(move || {
///     let call = client.spawn_on(Rank::ZERO, Twice(21));
///     spin_on(call)
/// });
/// assert_eq!(answer.join().unwrap()?, 42);
///
/// let report = runtime.shutdown(std::time::Duration::from_secs(5))?;
/// assert!(report.is_clean());
/// # fn spin_on<F: std::future::Future>(future: F) -> F::Output {
/// #     let mut future = std::pin::pin!(future);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop {
/// #         if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) { return out; }
/// #         std::thread::yield_now();
/// #     }
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RuntimeThread {
    client: RuntimeClient,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<Outcome>>,
    /// The limits' shutdown timeout, for a drop without `shutdown`.
    drop_timeout: Duration,
}

/// What the runtime's thread ends with: `None` if the runtime was never
/// built (the error went back to `start`).
type Outcome = Option<Result<ShutdownReport, ShutdownTimeout>>;

/// A request to stop, with the time the shutdown may take.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    timeout_nanos: AtomicU64,
}

impl Stop {
    /// Requests a stop within `timeout`, unless one was requested before
    /// (whose timeout then holds). Called by the one thread that holds the
    /// [`RuntimeThread`], so the timeout and the flag are never written
    /// concurrently.
    fn request(&self, timeout: Duration) {
        if self.requested.load(Ordering::Relaxed) {
            return;
        }
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.timeout_nanos.store(nanos, Ordering::Relaxed);
        // `Release`: the timeout is visible to whoever sees the request.
        self.requested.store(true, Ordering::Release);
    }

    fn requested(&self) -> Option<Duration> {
        self.requested
            .load(Ordering::Acquire)
            .then(|| Duration::from_nanos(self.timeout_nanos.load(Ordering::Relaxed)))
    }
}

/// Starting or stopping a [`RuntimeThread`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeThreadError {
    /// The runtime could not be built (on its thread).
    Build(BuildError),
    /// The thread could not be spawned.
    Spawn(std::io::Error),
    /// The runtime's thread panicked.
    Panicked,
    /// The shutdown ran out of time; the report has the exact counts.
    Shutdown(ShutdownTimeout),
}

impl fmt::Display for RuntimeThreadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Build(_) => f.write_str("the runtime could not be built on its thread"),
            Self::Spawn(_) => f.write_str("the runtime's thread could not be spawned"),
            Self::Panicked => f.write_str("the runtime's thread panicked"),
            Self::Shutdown(timeout) => write!(f, "{timeout}"),
        }
    }
}

impl std::error::Error for RuntimeThreadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Build(error) => Some(error),
            Self::Spawn(error) => Some(error),
            Self::Panicked => None,
            Self::Shutdown(timeout) => Some(timeout),
        }
    }
}

impl RuntimeThread {
    /// Starts the runtime `builder` describes on a new thread (named
    /// `dinah-owner-<rank>`) and returns once it runs.
    ///
    /// # Errors
    ///
    /// [`RuntimeThreadError::Build`] with the builder's error,
    /// [`RuntimeThreadError::Spawn`] if no thread could be started, and
    /// [`RuntimeThreadError::Panicked`] if building panicked.
    pub fn start<D>(
        builder: RuntimeBuilder,
        handle: TransportHandle,
        driver: D,
    ) -> Result<Self, RuntimeThreadError>
    where
        D: TransportDriver + Send + 'static,
    {
        let stop = Arc::new(Stop::default());
        let drop_timeout = builder.limits().shutdown_timeout;
        let (started, start_result) = mpsc::sync_channel(1);
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("dinah-owner-{}", handle.rank().get()))
            .spawn(move || -> Outcome {
                let mut runtime = match builder.start(handle, driver) {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = started.send(Err(error));
                        return None;
                    }
                };
                let _ = started.send(Ok(runtime.client()));
                let timeout = runtime.block_on(poll_fn(|_| match stopping.requested() {
                    Some(timeout) => Poll::Ready(timeout),
                    None => Poll::Pending,
                }));
                Some(runtime.shutdown(timeout))
            })
            .map_err(RuntimeThreadError::Spawn)?;
        match start_result.recv() {
            Ok(Ok(client)) => Ok(Self {
                client,
                stop,
                thread: Some(thread),
                drop_timeout,
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(RuntimeThreadError::Build(error))
            }
            // The thread ended without a word: it panicked.
            Err(_) => {
                let _ = thread.join();
                Err(RuntimeThreadError::Panicked)
            }
        }
    }

    /// A client of the runtime: clone it into any thread or task.
    #[must_use]
    pub fn client(&self) -> &RuntimeClient {
        &self.client
    }

    /// Starts the runtime's shutdown, within `timeout`, without waiting
    /// for it. A shutdown waits for the peers' goodbyes, so ranks that shut
    /// down together must all have started theirs: start each, then
    /// [`shutdown`](Self::shutdown) each to collect the reports. Only the
    /// first request's timeout counts.
    pub fn begin_shutdown(&self, timeout: Duration) {
        self.stop.request(timeout);
        // The owner may be waiting on its driver: make it look at once.
        self.client.hub.handle.wakeup().wake();
    }

    /// Shuts the runtime down (as [`Runtime::shutdown`](crate::Runtime::shutdown)
    /// with `timeout`, unless [`begin_shutdown`](Self::begin_shutdown) gave
    /// one before) and joins its thread.
    ///
    /// # Errors
    ///
    /// [`RuntimeThreadError::Shutdown`] if the shutdown ran out of time,
    /// [`RuntimeThreadError::Panicked`] if the thread panicked.
    pub fn shutdown(mut self, timeout: Duration) -> Result<ShutdownReport, RuntimeThreadError> {
        self.stop_and_join(timeout)
    }

    fn stop_and_join(&mut self, timeout: Duration) -> Result<ShutdownReport, RuntimeThreadError> {
        let Some(thread) = self.thread.take() else {
            return Err(RuntimeThreadError::Panicked);
        };
        self.begin_shutdown(timeout);
        match thread.join() {
            Ok(Some(Ok(report))) => Ok(report),
            Ok(Some(Err(timeout))) => Err(RuntimeThreadError::Shutdown(timeout)),
            Ok(None) | Err(_) => Err(RuntimeThreadError::Panicked),
        }
    }
}

impl Drop for RuntimeThread {
    /// Shuts the runtime down with the limits' `shutdown_timeout` and joins
    /// its thread, discarding the report: call
    /// [`shutdown`](Self::shutdown) to see it.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_and_join(self.drop_timeout);
        }
    }
}

impl fmt::Debug for RuntimeThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeThread")
            .field("rank", &self.client.rank())
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}
