//! Golden vectors for the registry fingerprint.
//!
//! These values are part of the wire protocol: peers built from different
//! commits compare them in the hello handshake. If a change to
//! `fingerprint.rs` breaks this file, the change is a protocol version
//! bump, not a test update. The expected values were computed by an
//! independent implementation of the documented algorithm (128-bit FNV-1a
//! over `"dinah.registry.1"`, the count and the sorted little-endian
//! registrations).

use dinah_core::{ActionId, DomainId, Fingerprint, FingerprintError, Registration, SchemaKind};

fn registration(action: u128, input: u64, output: u64, domain: u64) -> Registration {
    Registration {
        action: ActionId::new(action).unwrap(),
        input_schema: input,
        output_schema: output,
        domain: DomainId::new(domain).unwrap(),
    }
}

fn several() -> [Registration; 4] {
    [
        registration(u128::MAX, 0x5c, 0x5d, 7),
        registration(0x2, 10, 20, 1),
        registration(
            0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
            0xfeed_face,
            0xdead_beef,
            2,
        ),
        registration(0x1, 3, 4, 1),
    ]
}

#[test]
fn empty_registry() {
    let fingerprint = Fingerprint::of(&mut []).unwrap();
    assert_eq!(fingerprint.get(), 0xce53_e2ef_3e92_b61e_5695_4567_57a0_c3b3);
    assert_eq!(fingerprint.to_string(), "ce53e2ef3e92b61e5695456757a0c3b3");
}

#[test]
fn one_registration() {
    let fingerprint = Fingerprint::of(&mut [registration(0xadd, 1, 2, 1)]).unwrap();
    assert_eq!(fingerprint.get(), 0x52c8_bef1_0d77_152d_87fd_d61c_83e2_f62f);
}

#[test]
fn several_registrations_in_any_order() {
    const GOLDEN: u128 = 0xded0_6b85_f01d_facb_ad02_faef_91e8_683c;
    let mut registry = several();
    assert_eq!(Fingerprint::of(&mut registry).unwrap().get(), GOLDEN);
    // Sorted in place by action ID.
    let actions: Vec<u128> = registry.iter().map(|r| r.action.get()).collect();
    assert_eq!(
        actions,
        [1, 2, 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef, u128::MAX]
    );
    // Every rotation and the reversal give the same value.
    for shift in 0..4 {
        let mut rotated = several();
        rotated.rotate_left(shift);
        assert_eq!(Fingerprint::of(&mut rotated).unwrap().get(), GOLDEN);
        rotated.reverse();
        assert_eq!(Fingerprint::of(&mut rotated).unwrap().get(), GOLDEN);
    }
}

#[test]
fn invalid_registries_are_typed_errors() {
    let mut registry = several();
    registry[3].action = registry[0].action;
    assert_eq!(
        Fingerprint::of(&mut registry),
        Err(FingerprintError::DuplicateAction(ActionId::MAX))
    );
    let mut registry = several();
    registry[1].output_schema = 0;
    assert_eq!(
        Fingerprint::of(&mut registry),
        Err(FingerprintError::ZeroSchema {
            action: ActionId::new(2).unwrap(),
            which: SchemaKind::Output
        })
    );
}
