//! [`CancellationToken`]: the owned, cloneable cancellation token of std
//! code.

use core::fmt;
use std::sync::Arc;

use dinah_core::CancelFlag;

/// A cloneable handle on one shared cancellation flag.
///
/// The token shares one [`dinah_core::CancelFlag`] through an `Arc`, so it
/// can move into threads, tasks and `'static` closures, which the core's
/// borrowed [`dinah_core::CancellationToken`] cannot. Any clone can request
/// cancellation, every clone observes it, and [`borrow`](Self::borrow)
/// lends a core token to APIs that take one. A new piece of work that needs
/// its own flag gets a new token from [`new`](Self::new).
///
/// Cancellation is cooperative: a request interrupts nothing. Work polls the
/// token at points where stopping is safe and returns by itself; a request
/// is not proof that any work stopped (see [`dinah_core::CancelFlag`]).
///
/// # Memory ordering
///
/// The token adds no atomics of its own: it uses the flag's orderings (a
/// `Release` request, `Acquire` observations), so whatever a thread wrote
/// before requesting is visible to a thread that has observed the request.
/// The request orders nothing else.
///
/// # Examples
///
/// ```
/// use dinah_std::CancellationToken;
///
/// let token = CancellationToken::new();
/// let worker = {
///     let token = token.clone();
///     std::thread::spawn(move || {
///         let mut rounds = 0_u64;
///         while !token.is_cancellation_requested() {
///             rounds += 1; // one unit of work between safe points
///             std::hint::spin_loop();
///         }
///         rounds
///     })
/// };
/// assert!(token.request_cancellation(), "the first request wins");
/// assert!(!token.request_cancellation(), "later requests change nothing");
/// let _rounds = worker.join().map_err(|_| "worker panicked")?;
/// # Ok::<(), &str>(())
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    flag: Arc<CancelFlag>,
}

impl CancellationToken {
    /// A token with no request, sharing a fresh flag.
    #[must_use]
    pub fn new() -> Self {
        Self {
            flag: Arc::new(CancelFlag::new()),
        }
    }

    /// Requests cancellation. Returns `true` only for the one call, across
    /// all clones, that set the flag; every other call (concurrent or later)
    /// returns `false` and changes nothing.
    pub fn request_cancellation(&self) -> bool {
        self.flag.request()
    }

    /// Has cancellation been requested through any clone?
    ///
    /// `false` means only "not yet, as far as this thread can see".
    #[must_use]
    pub fn is_cancellation_requested(&self) -> bool {
        self.flag.is_requested()
    }

    /// A core token sharing this flag, for APIs that take a
    /// [`dinah_core::CancellationToken`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::CancellationRequested;
    /// use dinah_std::CancellationToken;
    ///
    /// fn step(token: dinah_core::CancellationToken<'_>) -> Result<(), CancellationRequested> {
    ///     token.check()
    /// }
    ///
    /// let token = CancellationToken::new();
    /// assert_eq!(step(token.borrow()), Ok(()));
    /// token.request_cancellation();
    /// assert_eq!(step(token.borrow()), Err(CancellationRequested));
    /// ```
    #[must_use]
    pub fn borrow(&self) -> dinah_core::CancellationToken<'_> {
        self.flag.token()
    }

    /// The shared flag.
    #[must_use]
    pub fn flag(&self) -> &CancelFlag {
        &self.flag
    }

    /// Do `self` and `other` share the same flag?
    #[must_use]
    pub fn same_flag(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.flag, &other.flag)
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("requested", &self.is_cancellation_requested())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::CancellationToken;

    #[test]
    fn clones_share_one_flag() {
        let token = CancellationToken::new();
        let clone = token.clone();
        assert!(token.same_flag(&clone));
        assert!(!token.same_flag(&CancellationToken::new()));
        assert!(!clone.is_cancellation_requested());
        assert!(clone.request_cancellation());
        assert!(token.is_cancellation_requested());
        assert!(!token.request_cancellation());
        assert!(token.borrow().is_cancellation_requested());
        assert!(token.flag().is_requested());
    }

    #[test]
    fn requests_through_a_borrowed_core_token_are_seen_by_clones() {
        let token = CancellationToken::default();
        let clone = token.clone();
        assert!(token.borrow().request_cancellation());
        assert!(clone.is_cancellation_requested());
        assert!(!clone.request_cancellation());
    }

    #[test]
    fn debug_shows_the_request() {
        let token = CancellationToken::new();
        assert_eq!(
            format!("{token:?}"),
            "CancellationToken { requested: false }"
        );
        token.request_cancellation();
        assert_eq!(
            format!("{token:?}"),
            "CancellationToken { requested: true }"
        );
    }
}
