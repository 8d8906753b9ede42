//! Wakers collected while the calls table is locked, woken after.

use std::task::Waker;

/// Wakers collected under the lock, woken after it: the first without
/// allocating (a completion wakes one call, nearly always).
#[derive(Default)]
pub(super) struct Wakers {
    first: Option<Waker>,
    rest: Vec<Waker>,
}

impl Wakers {
    pub(super) fn push(&mut self, waker: Option<Waker>) {
        let Some(waker) = waker else { return };
        match self.first {
            None => self.first = Some(waker),
            Some(_) => self.rest.push(waker),
        }
    }

    pub(super) fn wake(self) {
        if let Some(first) = self.first {
            first.wake();
            self.rest.into_iter().for_each(Waker::wake);
        }
    }
}
