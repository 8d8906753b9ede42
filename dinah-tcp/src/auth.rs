//! The run key and the challenge-response that proves it during set-up.
//!
//! Every rank of an authenticated run holds the same 32-byte [`RunKey`].
//! On each connection, after the hellos (which announce
//! [`HelloAuth::HmacSha256`](dinah_core::wire::HelloAuth)), both sides
//! prove that they hold it without sending it:
//!
//! 1. the dialler sends its hello and a fresh 32-byte nonce;
//! 2. the listener answers with its hello, its own fresh nonce and
//!    `HMAC-SHA256(key, "dinah-tcp listener" ‖ transcript)`;
//! 3. the dialler checks that tag, then sends
//!    `HMAC-SHA256(key, "dinah-tcp dialler" ‖ transcript)`;
//! 4. the listener checks it, and only then counts the connection as the
//!    rank it claims.
//!
//! The transcript is both hellos and both nonces, so a tag proves the key
//! for this connection only: it cannot be replayed on another (fresh
//! nonces), reflected to the other side (distinct labels) or moved to
//! other hellos. Tags are compared in constant time (`hmac`'s
//! `verify_slice`). What the key does not protect, frames after the
//! set-up, is in `docs/tcp.md`.

use std::net::SocketAddr;

use dinah_core::Rank;
use dinah_core::wire::HELLO_LEN;
pub(crate) use dinah_launch::{NONCE_LEN, RunKey, TAG_LEN, nonce};

use crate::error::TcpError;

/// What the listener adds to its hello: its nonce and its tag.
pub(crate) const ANSWER_PROOF_LEN: usize = NONCE_LEN + TAG_LEN;

/// The transport's tags over a handshake's transcript.
pub(crate) trait Prove {
    /// This side's tag over `transcript`, as `role`.
    fn tag(&self, role: Role, transcript: &Transcript) -> [u8; TAG_LEN];

    /// Checks the other side's `tag` over `transcript`, made as `role`, in
    /// constant time.
    ///
    /// # Errors
    ///
    /// [`TcpError::AuthFailed`] naming the peer (`peer`, `addr`) if the tag
    /// is wrong: it does not hold this key.
    fn check(
        &self,
        role: Role,
        transcript: &Transcript,
        tag: &[u8],
        peer: Option<Rank>,
        addr: SocketAddr,
    ) -> Result<(), TcpError>;
}

impl Prove for RunKey {
    fn tag(&self, role: Role, transcript: &Transcript) -> [u8; TAG_LEN] {
        self.seal(role.label(), &transcript.parts())
    }

    fn check(
        &self,
        role: Role,
        transcript: &Transcript,
        tag: &[u8],
        peer: Option<Rank>,
        addr: SocketAddr,
    ) -> Result<(), TcpError> {
        if self.opens(role.label(), &transcript.parts(), tag) {
            Ok(())
        } else {
            Err(TcpError::AuthFailed { peer, addr })
        }
    }
}

/// Which side makes a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Listener,
    Dialler,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Self::Listener => b"dinah-tcp listener",
            Self::Dialler => b"dinah-tcp dialler",
        }
    }
}

/// What both tags of one connection cover.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Transcript {
    pub(crate) dialler_hello: [u8; HELLO_LEN],
    pub(crate) dialler_nonce: [u8; NONCE_LEN],
    pub(crate) listener_hello: [u8; HELLO_LEN],
    pub(crate) listener_nonce: [u8; NONCE_LEN],
}

impl Transcript {
    /// What a tag covers, in order.
    fn parts(&self) -> [&[u8]; 4] {
        [
            &self.dialler_hello,
            &self.dialler_nonce,
            &self.listener_hello,
            &self.listener_nonce,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> Transcript {
        Transcript {
            dialler_hello: [1; HELLO_LEN],
            dialler_nonce: [2; NONCE_LEN],
            listener_hello: [3; HELLO_LEN],
            listener_nonce: [4; NONCE_LEN],
        }
    }

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    #[test]
    fn a_tag_checks_only_with_the_same_key_role_and_transcript() {
        let key = RunKey::generate().unwrap();
        let t = transcript();
        let tag = key.tag(Role::Listener, &t);
        assert!(key.check(Role::Listener, &t, &tag, None, addr()).is_ok());
        let other = RunKey::generate().unwrap();
        let wrong_key = other.check(Role::Listener, &t, &tag, None, addr());
        assert!(matches!(wrong_key, Err(TcpError::AuthFailed { .. })));
        // Reflected to the other side.
        assert!(key.check(Role::Dialler, &t, &tag, None, addr()).is_err());
        // Replayed on a connection with another nonce.
        let mut replayed = t;
        replayed.listener_nonce[0] ^= 1;
        assert!(
            key.check(Role::Listener, &replayed, &tag, None, addr())
                .is_err()
        );
        // Truncated.
        assert!(
            key.check(Role::Listener, &t, &tag[..16], None, addr())
                .is_err()
        );
    }
}
