//! The immutable registry of typed actions, type-erased for dispatch.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use dinah_core::{ActionId, DomainId, Fingerprint, Rank, Registration, RequestId};

use super::RuntimeClient;
use super::error::BuildError;
use crate::action::{Action, ActionError, CodecError, SegmentReader, SegmentWriter, WireValue};
use crate::domain::JobContext;

/// What a handler sees besides its input: who called, and whether the call
/// was cancelled.
///
/// Cancellation is cooperative: a long handler should call
/// [`is_cancelled`](Self::is_cancelled) at safe points and return early;
/// nothing interrupts it. The [`client`](Self::client) lets a handler call
/// other ranks (its futures are driven by the owner thread's progress).
pub struct ActionContext<'a> {
    pub(crate) origin: Rank,
    pub(crate) request: RequestId,
    pub(crate) action: ActionId,
    pub(crate) domain: DomainId,
    pub(crate) job: Option<&'a JobContext<'a>>,
    pub(crate) client: &'a RuntimeClient,
}

impl ActionContext<'_> {
    /// The rank that issued the call.
    pub fn origin(&self) -> Rank {
        self.origin
    }

    /// The call's request ID (scoped to the origin).
    pub fn request(&self) -> RequestId {
        self.request
    }

    /// The action being run.
    pub fn action(&self) -> ActionId {
        self.action
    }

    /// The domain running it.
    pub fn domain(&self) -> DomainId {
        self.domain
    }

    /// Has the caller (or a shutdown) asked this call to stop?
    pub fn is_cancelled(&self) -> bool {
        self.job.is_some_and(JobContext::is_cancellation_requested)
    }

    /// A safe point for `?`: stops the handler with a cancellation error if
    /// cancellation was requested (the caller then sees `Cancelled`).
    ///
    /// # Errors
    ///
    /// An [`ActionError`] saying the call was cancelled.
    pub fn check(&self) -> Result<(), ActionError> {
        match self.job {
            Some(job) if job.check().is_err() => Err(ActionError::new("cancelled")),
            _ => Ok(()),
        }
    }

    /// A client of the local runtime, for nested calls.
    pub fn client(&self) -> &RuntimeClient {
        self.client
    }
}

impl fmt::Debug for ActionContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionContext")
            .field("origin", &self.origin)
            .field("request", &self.request)
            .field("action", &self.action)
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

/// Why a handler invocation produced no output.
#[derive(Debug)]
pub(crate) enum HandlerError {
    /// The input could not be decoded or the output encoded.
    Codec(CodecError),
    /// The handler returned an error.
    User(ActionError),
}

/// A handler with its action's types erased.
pub(crate) trait ErasedHandler: Send + Sync {
    /// Decodes the input from `input`, runs, encodes the output into `out`.
    fn run_wire(
        &self,
        input: SegmentReader<'_>,
        ctx: &ActionContext<'_>,
        out: &mut SegmentWriter,
    ) -> Result<(), HandlerError>;

    /// Runs on a typed input boxed by a local call; returns the boxed
    /// output.
    fn run_local(
        &self,
        input: Box<dyn Any + Send>,
        ctx: &ActionContext<'_>,
    ) -> Result<Box<dyn Any + Send>, HandlerError>;
}

/// A user handler `F` for action `A`.
pub(crate) struct Typed<A, F> {
    handler: F,
    _action: PhantomData<fn(A)>,
}

impl<A, F> Typed<A, F> {
    pub(crate) fn new(handler: F) -> Self {
        Self {
            handler,
            _action: PhantomData,
        }
    }
}

impl<A, F> ErasedHandler for Typed<A, F>
where
    A: Action,
    F: Fn(A, &ActionContext<'_>) -> Result<A::Output, ActionError> + Send + Sync + 'static,
{
    fn run_wire(
        &self,
        mut input: SegmentReader<'_>,
        ctx: &ActionContext<'_>,
        out: &mut SegmentWriter,
    ) -> Result<(), HandlerError> {
        let action = A::decode(&mut input).map_err(HandlerError::Codec)?;
        input.finish().map_err(HandlerError::Codec)?;
        let output = (self.handler)(action, ctx).map_err(HandlerError::User)?;
        output.encode(out).map_err(HandlerError::Codec)
    }

    fn run_local(
        &self,
        input: Box<dyn Any + Send>,
        ctx: &ActionContext<'_>,
    ) -> Result<Box<dyn Any + Send>, HandlerError> {
        let Ok(action) = input.downcast::<A>() else {
            // The client boxes exactly `A` for `A::ID`; a mismatch means two
            // action types share an ID, which registration refuses.
            return Err(HandlerError::User(ActionError::new(
                "local call carried another action type",
            )));
        };
        let output = (self.handler)(*action, ctx).map_err(HandlerError::User)?;
        Ok(Box::new(output))
    }
}

/// One registered action.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) registration: Registration,
    pub(crate) handler: Arc<dyn ErasedHandler>,
    /// Requests from other ranks run on the owner thread inside
    /// `progress` instead of on a worker of the domain.
    pub(crate) inline: bool,
}

impl Entry {
    pub(crate) fn new<A: Action>(
        domain: DomainId,
        handler: Arc<dyn ErasedHandler>,
    ) -> Result<Self, BuildError> {
        let action = ActionId::new(A::ID).map_err(|_| BuildError::ZeroActionId)?;
        Ok(Self {
            registration: Registration {
                action,
                input_schema: A::SCHEMA_ID,
                output_schema: <A::Output as WireValue>::SCHEMA_ID,
                domain,
            },
            handler,
            inline: false,
        })
    }
}

/// The registered actions, sorted by ID; immutable once the runtime starts.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    entries: Vec<Entry>,
}

impl Registry {
    /// Adds `entry`.
    pub(crate) fn insert(&mut self, entry: Entry) -> Result<(), BuildError> {
        let action = entry.registration.action;
        match self
            .entries
            .binary_search_by_key(&action, |e| e.registration.action)
        {
            Ok(_) => Err(BuildError::DuplicateAction { action }),
            Err(at) => {
                self.entries.insert(at, entry);
                Ok(())
            }
        }
    }

    /// The entry for `action`.
    pub(crate) fn get(&self, action: ActionId) -> Option<&Entry> {
        self.entries
            .binary_search_by_key(&action, |e| e.registration.action)
            .ok()
            .map(|at| &self.entries[at])
    }

    /// The registry fingerprint exchanged in the hello.
    pub(crate) fn fingerprint(&self) -> Result<Fingerprint, BuildError> {
        let mut registrations: Vec<Registration> =
            self.entries.iter().map(|e| e.registration).collect();
        Fingerprint::of(&mut registrations).map_err(BuildError::Fingerprint)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| e.registration.action))
            .finish()
    }
}
