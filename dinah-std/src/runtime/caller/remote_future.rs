//! `RemoteFuture`: the caller's end of one call.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dinah_core::wire::{Header, Message, ProtocolError};

use super::calls::{CallOutcome, Ticket};
use crate::action::WireValue;
use crate::runtime::error::RuntimeError;
use crate::runtime::frames;
use crate::runtime::hub::Hub;
use crate::transport::Frame;

/// The result of a call issued with
/// [`RuntimeClient::spawn_on`](crate::RuntimeClient::spawn_on): a real
/// [`Future`] resolving to the action's output or a typed
/// [`RuntimeError`].
///
/// It is woken by the owner thread's progress, so it completes only while
/// something drives the runtime ([`Runtime::block_on`](crate::Runtime::block_on),
/// or [`Runtime::progress`](crate::Runtime::progress) in a loop).
///
/// **Dropping** a future that has not completed removes its waiter at once
/// and sends a best-effort cancellation to the target; a result arriving
/// later is counted as late and discarded.
#[must_use = "a remote call is cancelled when its future is dropped"]
pub struct RemoteFuture<T> {
    inner: Inner,
    _output: PhantomData<fn() -> T>,
}

enum Inner {
    Pending { hub: Arc<Hub>, ticket: Ticket },
    Failed(Option<RuntimeError>),
    Done,
}

impl<T> RemoteFuture<T> {
    pub(crate) fn pending(hub: Arc<Hub>, ticket: Ticket) -> Self {
        Self {
            inner: Inner::Pending { hub, ticket },
            _output: PhantomData,
        }
    }

    pub(crate) fn failed(error: RuntimeError) -> Self {
        Self {
            inner: Inner::Failed(Some(error)),
            _output: PhantomData,
        }
    }

    /// The call's ticket, while it is pending (for scopes).
    pub(crate) fn ticket(&self) -> Option<Ticket> {
        match &self.inner {
            Inner::Pending { ticket, .. } => Some(*ticket),
            _ => None,
        }
    }

    /// Has the call finished (its outcome is ready or was taken)?
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Inner::Pending { hub, ticket } => !hub.calls.is_waiting(*ticket),
            Inner::Failed(_) | Inner::Done => true,
        }
    }
}

impl<T: WireValue> RemoteFuture<T> {
    fn decode(outcome: CallOutcome) -> Result<T, RuntimeError> {
        match outcome {
            CallOutcome::Failed(error) => Err(error),
            CallOutcome::Frame { header, mut frame } => {
                let output = Self::decode_frame(header, &mut frame);
                // Decoded: the buffer can carry this thread's next frame.
                crate::transport::frame_buffers::give_frame(frame);
                output
            }
        }
    }

    /// The output in a result frame.
    fn decode_frame(header: Header, frame: &mut Frame) -> Result<T, RuntimeError> {
        // Validated on arrival (or encoded by this rank's own job); only
        // viewed again here.
        let actual = frame.len();
        let mut input = frames::payload(header, frame).ok_or(RuntimeError::Protocol {
            peer: header.origin(),
            error: ProtocolError::Truncated {
                expected: header.frame_len(),
                actual,
            },
        })?;
        debug_assert!(matches!(header.message(), Message::Result { .. }));
        let value = T::decode(&mut input).map_err(RuntimeError::Codec)?;
        input.finish().map_err(RuntimeError::Codec)?;
        Ok(value)
    }
}

impl<T: WireValue> Future for RemoteFuture<T> {
    type Output = Result<T, RuntimeError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `RemoteFuture` holds no self-references: it is `Unpin`.
        let this = self.get_mut();
        match &mut this.inner {
            Inner::Pending { hub, ticket } => match hub.calls.poll(*ticket, cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(outcome) => {
                    let result = Self::decode(outcome);
                    this.inner = Inner::Done;
                    Poll::Ready(result)
                }
            },
            Inner::Failed(error) => {
                let error = error.take().unwrap_or(RuntimeError::Cancelled);
                this.inner = Inner::Done;
                Poll::Ready(Err(error))
            }
            Inner::Done => Poll::Ready(Err(RuntimeError::Cancelled)),
        }
    }
}

impl<T> Drop for RemoteFuture<T> {
    fn drop(&mut self) {
        if let Inner::Pending { hub, ticket } = &self.inner {
            hub.abandon_call(*ticket);
        }
    }
}

impl<T> fmt::Debug for RemoteFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.inner {
            Inner::Pending { .. } => "pending",
            Inner::Failed(_) => "failed",
            Inner::Done => "done",
        };
        f.debug_struct("RemoteFuture")
            .field("state", &state)
            .finish()
    }
}
