//! The run key: the secret every rank of an authenticated run shares.
//!
//! `dinah-run` makes a fresh one for each run and hands it to its ranks in
//! [`ENV_KEY`]; under another launcher every rank reads the same one from
//! [`ENV_KEY`] or the file [`ENV_KEY_FILE`] names. The ranks prove it to
//! each other with HMAC-SHA256 tags over fresh nonces, never sending it:
//! during the coordinator's rendezvous (`env/coordinator.rs`) and during
//! the TCP transport's set-up. [`RunKey::seal`] and [`RunKey::opens`] make
//! and check those tags.

use std::fmt;
use std::io;
use std::path::PathBuf;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable holding the run key in hex (64 digits);
/// `dinah-run` sets it for its ranks.
pub const ENV_KEY: &str = "DINAH_KEY";

/// The environment variable naming a file that holds the run key in hex
/// (read when [`ENV_KEY`] is not set).
pub const ENV_KEY_FILE: &str = "DINAH_KEY_FILE";

/// The length of a nonce, and of a tag.
pub const NONCE_LEN: usize = 32;

/// The length of a tag ([`RunKey::seal`]).
pub const TAG_LEN: usize = 32;

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

    /// As [`from_env`](Self::from_env), reading variables through `var`
    /// (a table, in tests).
    pub fn from_lookup(
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

    /// `HMAC-SHA256(key, label ‖ parts…)`: this side's tag over `parts`.
    /// A distinct `label` per role keeps a tag from being reflected to the
    /// other side; fresh nonces among the parts keep it from being
    /// replayed.
    pub fn seal(&self, label: &[u8], parts: &[&[u8]]) -> [u8; TAG_LEN] {
        self.keyed(label, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is [`seal`](Self::seal)'s tag over the same label and
    /// parts under this key, compared in constant time.
    pub fn opens(&self, label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
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
pub fn nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut nonce = [0; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(io::Error::from)?;
    Ok(nonce)
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

    #[test]
    fn a_seal_opens_only_with_the_same_key_label_and_parts() {
        let key = RunKey::generate().unwrap();
        let tag = key.seal(b"one", &[b"a", b"bc"]);
        assert!(key.opens(b"one", &[b"a", b"bc"], &tag));
        assert!(
            !RunKey::generate()
                .unwrap()
                .opens(b"one", &[b"a", b"bc"], &tag)
        );
        assert!(!key.opens(b"two", &[b"a", b"bc"], &tag), "another label");
        assert!(!key.opens(b"one", &[b"a", b"bd"], &tag), "other parts");
        assert!(!key.opens(b"one", &[b"a", b"bc"], &tag[..16]), "truncated");
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
