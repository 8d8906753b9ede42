//! The immutable registry of typed actions, type-erased for dispatch:
//! every call, from a peer or from this rank, reaches its handler through
//! the wire codec.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use dinah_core::{ActionId, DomainId, Fingerprint, Registration};

use super::context::ActionContext;
use super::error::BuildError;
use crate::action::{Action, ActionError, CodecError, SegmentReader, SegmentWriter, WireValue};

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
        output.encode_owned(out).map_err(HandlerError::Codec)
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
    /// The runtime's own action (the barrier's): run on the owner thread
    /// whether or not its domain was started, and never the reason a
    /// domain is started.
    pub(crate) builtin: bool,
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
            builtin: false,
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
