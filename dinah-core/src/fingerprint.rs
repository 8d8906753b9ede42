//! The action-registry fingerprint exchanged in the hello handshake.
//!
//! Two ranks can only serve each other's calls if they registered the same
//! actions, with the same input and output schemas, in the same worker
//! domains. Each rank digests its registry into a [`Fingerprint`] and the
//! hello handshake refuses peers whose fingerprint differs. It is a
//! compatibility guard against mismatched builds, not authentication: the
//! digest is not cryptographic.
//!
//! [`Fingerprint`] documents the algorithm.

use core::fmt;

use crate::{ActionId, DomainId};

/// One registered action, as far as compatibility is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The action's stable ID.
    pub action: ActionId,
    /// The schema ID of its input's encoding (non-zero).
    pub input_schema: u64,
    /// The schema ID of its output's encoding (non-zero).
    pub output_schema: u64,
    /// The worker domain it runs in.
    pub domain: DomainId,
}

/// A digest of a whole action registry, exchanged in the hello handshake.
/// Displays as 32 lowercase hex digits.
///
/// # Algorithm
///
/// 1. Sort the registrations by action ID (in place; nothing is
///    allocated). Reject a duplicated action ID, then a zero schema ID.
/// 2. Build the canonical byte string, all integers little-endian:
///    the 16-byte prefix `"dinah.registry.1"`, the registration count as a
///    `u64`, then for each registration in order its action ID (`u128`),
///    input schema (`u64`), output schema (`u64`) and domain ID (`u64`):
///    40 bytes each.
/// 3. Digest it with 128-bit FNV-1a (offset basis
///    `0x6c62272e07bb014262b821756295c58d`, prime `2^88 + 2^8 + 0x3b`).
///
/// The prefix separates this digest from any other use of FNV, and the
/// count makes the encoding unambiguous. The value of a registry is fixed
/// forever by the golden vectors in `dinah-core/tests/core_fingerprint.rs`;
/// **changing the algorithm or the encoding is a protocol version bump**
/// ([`PROTOCOL_VERSION`](crate::wire::PROTOCOL_VERSION)).
///
/// # Examples
///
/// ```
/// use dinah_core::{ActionId, DomainId, Fingerprint, FingerprintError, Registration};
///
/// let add = Registration {
///     action: ActionId::new(0xadd)?,
///     input_schema: 1,
///     output_schema: 2,
///     domain: DomainId::new(1)?,
/// };
/// let mul = Registration { action: ActionId::new(0x3a1)?, ..add };
///
/// // Registration order does not matter.
/// let one = Fingerprint::of(&mut [add, mul])?;
/// let other = Fingerprint::of(&mut [mul, add])?;
/// assert_eq!(one, other);
/// assert_eq!(
///     Fingerprint::of(&mut [add, add]),
///     Err(FingerprintError::DuplicateAction(add.action))
/// );
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint(u128);

/// The domain-separation prefix of the canonical encoding.
const PREFIX: &[u8; 16] = b"dinah.registry.1";
const FNV_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

impl Fingerprint {
    /// The fingerprint of `registrations`, which are sorted by action ID in
    /// place.
    ///
    /// # Errors
    ///
    /// [`FingerprintError::DuplicateAction`] with the smallest action ID
    /// registered twice; otherwise [`FingerprintError::ZeroSchema`] for the
    /// first registration (in action order) with a zero schema ID, input
    /// before output.
    pub fn of(registrations: &mut [Registration]) -> Result<Self, FingerprintError> {
        registrations.sort_unstable_by_key(|registration| registration.action);
        if let Some(pair) = registrations
            .windows(2)
            .find(|pair| pair[0].action == pair[1].action)
        {
            return Err(FingerprintError::DuplicateAction(pair[0].action));
        }
        for registration in registrations.iter() {
            for (schema, which) in [
                (registration.input_schema, SchemaKind::Input),
                (registration.output_schema, SchemaKind::Output),
            ] {
                if schema == 0 {
                    return Err(FingerprintError::ZeroSchema {
                        action: registration.action,
                        which,
                    });
                }
            }
        }
        let mut hash = Fnv128::new();
        hash.write(PREFIX);
        hash.write(&(registrations.len() as u64).to_le_bytes());
        for registration in registrations.iter() {
            hash.write(&registration.action.get().to_le_bytes());
            hash.write(&registration.input_schema.to_le_bytes());
            hash.write(&registration.output_schema.to_le_bytes());
            hash.write(&registration.domain.get().to_le_bytes());
        }
        Ok(Self(hash.finish()))
    }

    /// The fingerprint with value `value` (as read from a hello record).
    pub const fn from_u128(value: u128) -> Self {
        Self(value)
    }

    /// The digest value.
    pub const fn get(self) -> u128 {
        self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// 128-bit FNV-1a.
struct Fnv128(u128);

impl Fnv128 {
    const fn new() -> Self {
        Self(FNV_OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u128::from(byte)).wrapping_mul(FNV_PRIME);
        }
    }

    const fn finish(&self) -> u128 {
        self.0
    }
}

/// Which schema of a [`Registration`] a [`FingerprintError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    /// The input schema.
    Input,
    /// The output schema.
    Output,
}

impl fmt::Display for SchemaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Input => "input",
            Self::Output => "output",
        })
    }
}

/// A registry cannot be fingerprinted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FingerprintError {
    /// Two registrations share an action ID.
    DuplicateAction(ActionId),
    /// A registration has a zero schema ID.
    ZeroSchema {
        /// The registration's action.
        action: ActionId,
        /// Which schema is zero.
        which: SchemaKind,
    },
}

impl fmt::Display for FingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateAction(action) => write!(f, "{action} is registered twice"),
            Self::ZeroSchema { action, which } => {
                write!(f, "{action} has a zero {which} schema id")
            }
        }
    }
}

impl core::error::Error for FingerprintError {}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    fn fnv(bytes: &[u8]) -> u128 {
        let mut hash = Fnv128::new();
        hash.write(bytes);
        hash.finish()
    }

    #[test]
    fn fnv_matches_the_published_test_vectors() {
        assert_eq!(fnv(b""), 0x6c62272e07bb014262b821756295c58d);
        assert_eq!(fnv(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
        assert_eq!(fnv(b"foobar"), 0x343e1662793c64bf6f0d3597ba446f18);
    }

    fn registration(action: u128, input: u64, output: u64) -> Registration {
        Registration {
            action: ActionId::new(action).unwrap(),
            input_schema: input,
            output_schema: output,
            domain: DomainId::new(1).unwrap(),
        }
    }

    #[test]
    fn duplicates_are_found_before_zero_schemas() {
        let mut registry = [
            registration(9, 0, 1),
            registration(5, 1, 1),
            registration(9, 1, 0),
            registration(5, 2, 2),
        ];
        assert_eq!(
            Fingerprint::of(&mut registry),
            Err(FingerprintError::DuplicateAction(ActionId::new(5).unwrap()))
        );
        let mut registry = [registration(9, 1, 0), registration(3, 0, 1)];
        assert_eq!(
            Fingerprint::of(&mut registry),
            Err(FingerprintError::ZeroSchema {
                action: ActionId::new(3).unwrap(),
                which: SchemaKind::Input
            })
        );
        let mut registry = [registration(9, 1, 0)];
        assert_eq!(
            Fingerprint::of(&mut registry).unwrap_err().to_string(),
            "action#9 has a zero output schema id"
        );
        assert_eq!(
            FingerprintError::DuplicateAction(ActionId::new(5).unwrap()).to_string(),
            "action#5 is registered twice"
        );
    }

    #[test]
    fn every_field_changes_the_digest() {
        let base = registration(7, 1, 2);
        let reference = Fingerprint::of(&mut [base]).unwrap();
        let variants = [
            registration(8, 1, 2),
            registration(7, 3, 2),
            registration(7, 1, 3),
            Registration {
                domain: DomainId::new(2).unwrap(),
                ..base
            },
        ];
        for variant in variants {
            assert_ne!(
                Fingerprint::of(&mut [variant]).unwrap(),
                reference,
                "{variant:?}"
            );
        }
        assert_ne!(Fingerprint::of(&mut []).unwrap(), reference);
        // Input and output schemas are not interchangeable.
        assert_ne!(
            Fingerprint::of(&mut [registration(7, 2, 1)]).unwrap(),
            reference
        );
    }

    #[test]
    fn display_is_32_hex_digits() {
        let fingerprint = Fingerprint::from_u128(0xab);
        assert_eq!(fingerprint.to_string(), "000000000000000000000000000000ab");
        assert_eq!(fingerprint.get(), 0xab);
    }
}
