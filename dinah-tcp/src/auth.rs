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

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use dinah_core::Rank;
use dinah_core::wire::HELLO_LEN;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::TcpError;

/// The environment variable holding the run key in hex (64 digits);
/// `dinah-run` sets it for its ranks.
pub const ENV_KEY: &str = "DINAH_KEY";

/// The environment variable naming a file that holds the run key in hex
/// (read when [`ENV_KEY`] is not set).
pub const ENV_KEY_FILE: &str = "DINAH_KEY_FILE";

/// The length of a nonce and of a tag.
pub(crate) const NONCE_LEN: usize = 32;

/// The length of a tag.
pub(crate) const TAG_LEN: usize = 32;

/// What the listener adds to its hello: its nonce and its tag.
pub(crate) const ANSWER_PROOF_LEN: usize = NONCE_LEN + TAG_LEN;

/// The secret every rank of an authenticated run shares.
///
/// Its `Debug` shows no key material; [`to_hex`](Self::to_hex) is the one
/// way to read it back (to hand it to another process).
#[derive(Clone)]
pub struct RunKey([u8; RunKey::LEN]);

impl RunKey {
    /// Bytes in a key.
    pub const LEN: usize = 32;

    /// A fresh key from the operating system's random generator.
    ///
    /// # Errors
    ///
    /// The generator's error, as an I/O error.
    pub fn generate() -> io::Result<Self> {
        let mut key = [0; Self::LEN];
        getrandom::fill(&mut key).map_err(io::Error::from)?;
        Ok(Self(key))
    }

    /// The key with these bytes.
    pub const fn from_bytes(bytes: [u8; Self::LEN]) -> Self {
        Self(bytes)
    }

    /// Parses a key of 64 hex digits (surrounding white space is ignored,
    /// so a key file may end with a newline).
    ///
    /// # Errors
    ///
    /// [`KeyError::Malformed`] for any other text.
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let text = text.trim().as_bytes();
        if text.len() != 2 * Self::LEN {
            return Err(KeyError::Malformed);
        }
        let mut key = [0; Self::LEN];
        for (byte, pair) in key.iter_mut().zip(text.chunks_exact(2)) {
            let digit = |c: u8| char::from(c).to_digit(16).ok_or(KeyError::Malformed);
            // Two hex digits make at most 0xff.
            *byte = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(Self(key))
    }

    /// The key as 64 lowercase hex digits. This is the secret itself: pass
    /// it only to the run's own processes (as `dinah-run` does, through
    /// [`ENV_KEY`]).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key from the environment: [`ENV_KEY`] if set, else the file
    /// [`ENV_KEY_FILE`] names; `None` if neither is set.
    ///
    /// # Errors
    ///
    /// [`KeyError::Malformed`] if the text is not a key;
    /// [`KeyError::File`] if the file cannot be read.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// As [`from_env`](Self::from_env), reading variables through `var`.
    pub(crate) fn from_lookup(
        var: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Option<Self>, KeyError> {
        if let Some(text) = var(ENV_KEY) {
            let text = text.to_str().ok_or(KeyError::Malformed)?;
            return Self::from_hex(text).map(Some);
        }
        let Some(path) = var(ENV_KEY_FILE) else {
            return Ok(None);
        };
        let path = PathBuf::from(path);
        let text = std::fs::read_to_string(&path).map_err(|source| KeyError::File {
            path: path.clone(),
            kind: source.kind(),
        })?;
        Self::from_hex(&text).map(Some)
    }

    /// This side's tag over `transcript`, as `role`.
    pub(crate) fn tag(&self, role: Role, transcript: &Transcript) -> [u8; TAG_LEN] {
        self.mac(role, transcript).finalize().into_bytes().into()
    }

    /// Checks the other side's `tag` over `transcript`, made as `role`, in
    /// constant time.
    ///
    /// # Errors
    ///
    /// [`TcpError::AuthFailed`] naming the peer (`peer`, `addr`) if the tag
    /// is wrong: it does not hold this key.
    pub(crate) fn check(
        &self,
        role: Role,
        transcript: &Transcript,
        tag: &[u8],
        peer: Option<Rank>,
        addr: SocketAddr,
    ) -> Result<(), TcpError> {
        self.mac(role, transcript)
            .verify_slice(tag)
            .map_err(|_| TcpError::AuthFailed { peer, addr })
    }

    /// `HMAC-SHA256(key, label ‖ parts…)`: a tag over a message outside
    /// the transport's handshake (the coordinator's rendezvous).
    pub(crate) fn seal(&self, label: &[u8], parts: &[&[u8]]) -> [u8; TAG_LEN] {
        self.keyed(label, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is [`seal`](Self::seal)'s tag over the same label and
    /// parts under this key, compared in constant time.
    pub(crate) fn opens(&self, label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
        self.keyed(label, parts).verify_slice(tag).is_ok()
    }

    fn keyed(&self, label: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(label);
        for part in parts {
            mac.update(part);
        }
        mac
    }

    fn mac(&self, role: Role, transcript: &Transcript) -> Hmac<Sha256> {
        self.keyed(
            role.label(),
            &[
                &transcript.dialler_hello,
                &transcript.dialler_nonce,
                &transcript.listener_hello,
                &transcript.listener_nonce,
            ],
        )
    }
}

impl fmt::Debug for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunKey(<secret>)")
    }
}

/// A fresh nonce.
///
/// # Errors
///
/// The random generator's error.
pub(crate) fn nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut nonce = [0; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(io::Error::from)?;
    Ok(nonce)
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

/// A run key could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The text is not 64 hex digits.
    Malformed,
    /// The key file could not be read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        kind: io::ErrorKind,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed => write!(f, "a run key is 64 hex digits"),
            Self::File { path, kind } => {
                write!(f, "cannot read the run key file {}: {kind}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyError {}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

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

    #[test]
    fn keys_read_from_hex_the_environment_and_a_file() {
        let key = RunKey::generate().unwrap();
        let hex = key.to_hex();
        assert_eq!(hex.len(), 64);
        let again = RunKey::from_hex(&format!("  {hex}\n")).unwrap();
        assert_eq!(again.to_hex(), hex);
        assert!(matches!(RunKey::from_hex("abc"), Err(KeyError::Malformed)));
        assert!(matches!(
            RunKey::from_hex(&"zz".repeat(32)),
            Err(KeyError::Malformed)
        ));
        let none = RunKey::from_lookup(|_| None).unwrap();
        assert!(none.is_none());
        let from_var = RunKey::from_lookup(|name| (name == ENV_KEY).then(|| OsString::from(&hex)));
        assert_eq!(from_var.unwrap().unwrap().to_hex(), hex);
        let dir = std::env::temp_dir().join(format!("dinah-key-{}", std::process::id()));
        std::fs::write(&dir, format!("{hex}\n")).unwrap();
        let from_file = RunKey::from_lookup(|name| {
            (name == ENV_KEY_FILE).then(|| dir.clone().into_os_string())
        });
        assert_eq!(from_file.unwrap().unwrap().to_hex(), hex);
        std::fs::remove_file(&dir).unwrap();
        let missing = RunKey::from_lookup(|name| {
            (name == ENV_KEY_FILE).then(|| dir.clone().into_os_string())
        });
        assert!(matches!(
            missing,
            Err(KeyError::File {
                kind: io::ErrorKind::NotFound,
                ..
            })
        ));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = RunKey::from_bytes([0xab; RunKey::LEN]);
        let shown = format!("{key:?}");
        assert!(!shown.contains("ab"), "{shown}");
        assert!(!shown.contains("171"), "{shown}");
    }
}
