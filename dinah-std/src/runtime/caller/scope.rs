//! Structured remote work: calls that cannot outlive their scope.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use dinah_core::Rank;

use super::calls::Ticket;
use super::issue::SpawnOptions;
use super::remote_future::RemoteFuture;
use crate::action::{Action, WireValue};
use crate::runtime::error::RuntimeError;
use crate::runtime::{Runtime, RuntimeClient};

/// A scope opened by [`Runtime::scope`]: calls spawned here are tracked,
/// their futures cannot escape the scope (the closure is generic over the
/// scope's lifetime), and whatever is still running when the scope ends is
/// cancelled.
pub struct Scope<'scope, 'env: 'scope> {
    runtime: RefCell<&'env mut Runtime>,
    client: RuntimeClient,
    tracked: RefCell<Vec<Ticket>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

/// A [`RemoteFuture`] bound to a [`Scope`].
#[must_use = "a remote call is cancelled when its future is dropped"]
pub struct ScopedFuture<'scope, T> {
    inner: RemoteFuture<T>,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

impl<T: WireValue> Future for ScopedFuture<'_, T> {
    type Output = Result<T, RuntimeError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().inner).poll(cx)
    }
}

impl<T> ScopedFuture<'_, T> {
    /// Has the call finished?
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

impl<T> fmt::Debug for ScopedFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ScopedFuture").field(&self.inner).finish()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Calls `action` on `rank` within this scope.
    pub fn spawn_on<A: Action>(
        &'scope self,
        rank: Rank,
        action: A,
    ) -> ScopedFuture<'scope, A::Output> {
        self.spawn_on_with(rank, action, SpawnOptions::default())
    }

    /// Calls `action` on `rank` with `options` within this scope.
    pub fn spawn_on_with<A: Action>(
        &'scope self,
        rank: Rank,
        action: A,
        options: SpawnOptions,
    ) -> ScopedFuture<'scope, A::Output> {
        let inner = self.client.spawn_on_with(rank, action, options);
        if let Some(ticket) = inner.ticket() {
            let mut tracked = self.tracked.borrow_mut();
            if tracked.len() >= self.client.hub.calls.capacity() {
                let calls = &self.client.hub.calls;
                tracked.retain(|t| calls.is_waiting(*t));
            }
            tracked.push(ticket);
        }
        ScopedFuture {
            inner,
            _scope: PhantomData,
        }
    }

    /// Drives `future` on the runtime, like [`Runtime::block_on`].
    ///
    /// # Panics
    ///
    /// If called from inside a future this scope is already driving (it is
    /// not reentrant); a panic inside `future` propagates.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.borrow_mut().block_on(future)
    }

    /// A client of the runtime (it can outlive the scope; its calls are not
    /// tracked by the scope).
    pub fn client(&self) -> &RuntimeClient {
        &self.client
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("tracked", &self.tracked.borrow().len())
            .finish()
    }
}

/// Cancels what the scope still tracks, even when the scope's closure
/// panics.
struct ExitGuard<'a, 'scope, 'env> {
    scope: &'a Scope<'scope, 'env>,
}

impl Drop for ExitGuard<'_, '_, '_> {
    fn drop(&mut self) {
        let hub = &self.scope.client.hub;
        for ticket in self.scope.tracked.borrow_mut().drain(..) {
            hub.abandon_call(ticket);
        }
        if let Ok(mut runtime) = self.scope.runtime.try_borrow_mut() {
            let budget = hub.limits.max_cancellations as usize;
            runtime.pump_cancels(budget);
        }
    }
}

impl Runtime {
    /// Runs `f` with a [`Scope`] whose calls cannot outlive it. On exit
    /// (normal or by panic) every call still tracked is cancelled and the
    /// cancellation queue is pumped once; a panic in `f` then resumes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
    /// use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
    /// use dinah_std::Runtime;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
    /// let hello = builder.hello()?;
    /// let network = SimNetwork::with_mode(WorldSize::ONE, 1, FaultPlan::new(), SimMode::Threaded)?;
    /// let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle)?;
    /// let mut runtime = builder.start(handle, driver)?;
    ///
    /// let rank = runtime.scope(|s| {
    ///     // Calls spawned with `s.spawn_on` here cannot leave the closure.
    ///     s.client().rank()
    /// });
    /// assert_eq!(rank, Rank::ZERO);
    /// assert!(runtime.shutdown(Duration::from_secs(5))?.is_clean());
    /// # Ok(())
    /// # }
    /// ```
    pub fn scope<'env, F, R>(&'env mut self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let client = self.client();
        let scope = Scope {
            runtime: RefCell::new(self),
            client,
            tracked: RefCell::new(Vec::new()),
            _scope: PhantomData,
        };
        let guard = ExitGuard { scope: &scope };
        let result = f(guard.scope);
        drop(guard);
        result
    }
}
