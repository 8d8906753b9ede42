use super::*;
use crate::wire::test_support::{patched, rank, world};
use crate::{LimitProblem, WorldSize};

extern crate std;
use core::error::Error;
use std::string::ToString;
use std::vec::Vec;

const RUN: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;

fn hello(index: u32) -> Hello {
    Hello::new(
        RUN,
        rank(index),
        world(),
        ProtocolLimits::DEFAULT,
        Fingerprint::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff),
        Channel::Action,
    )
    .unwrap()
    .with_admission_capacity(0x0102_0304)
}

const GOLDEN: &str = concat!(
    "444e4148060005010200000004000000",
    "1032547698badcfeefcdab8967452301",
    "ffeeddccbbaa99887766554433221100",
    "00000001000000014000000000100000",
    "0403020100000000",
);

fn hex(bytes: &[u8]) -> std::string::String {
    bytes.iter().map(|b| std::format!("{b:02x}")).collect()
}

#[test]
fn encoding_matches_the_documented_layout_and_round_trips() {
    let hello = hello(2);
    let bytes = hello.encode();
    assert_eq!(hex(&bytes), GOLDEN);
    assert_eq!(Hello::decode(&bytes), Ok(hello));
    let control = hello.with_channel(Channel::Control);
    assert_eq!(control.encode()[7], 0);
    assert_eq!(Hello::decode(&control.encode()), Ok(control));
}

#[test]
fn the_admission_capacity_round_trips_and_defaults_to_zero() {
    let plain = Hello::new(
        RUN,
        rank(1),
        world(),
        ProtocolLimits::DEFAULT,
        Fingerprint::from_u128(1),
        Channel::Control,
    )
    .unwrap();
    assert_eq!(plain.admission_capacity, 0);
    assert_eq!(plain.encode()[64..72], [0; 8]);
    assert_eq!(Hello::decode(&plain.encode()), Ok(plain));
    for capacity in [1, 256, u32::MAX] {
        let advertised = plain.with_admission_capacity(capacity);
        assert_eq!(advertised.admission_capacity, capacity);
        let bytes = advertised.encode();
        assert_eq!(bytes[64..68], capacity.to_le_bytes());
        assert_eq!(bytes[68..72], [0; 4], "no authentication, reserved");
        assert_eq!(Hello::decode(&bytes), Ok(advertised));
        // The other channel's hello keeps it.
        assert_eq!(
            advertised.with_channel(Channel::Action).admission_capacity,
            capacity
        );
    }
}

#[test]
fn admission_capacities_are_not_compared() {
    let local = hello(0).with_admission_capacity(7);
    for capacity in [0, 7, 9, u32::MAX] {
        let remote = hello(1).with_admission_capacity(capacity);
        assert_eq!(check_compatible(&local, &remote), Ok(()));
        assert_eq!(check_compatible(&remote, &local), Ok(()));
    }
}

#[test]
fn construction_checks_rank_and_limits() {
    let small = WorldSize::new(2).unwrap();
    let fingerprint = Fingerprint::from_u128(1);
    assert_eq!(
        Hello::new(
            1,
            rank(3),
            small,
            ProtocolLimits::DEFAULT,
            fingerprint,
            Channel::Control
        ),
        Err(HelloError::RankOutOfRange {
            rank: 3,
            world_size: 2
        })
    );
    let mut limits = ProtocolLimits::DEFAULT;
    limits.max_frame_bytes = 0;
    let error = Hello::new(1, rank(0), small, limits, fingerprint, Channel::Control).unwrap_err();
    assert_eq!(
        error,
        HelloError::InvalidLimits(LimitsError {
            field: LimitField::MaxFrameBytes,
            problem: LimitProblem::Zero
        })
    );
    assert!(error.source().is_some());
}

fn expect(bytes: Vec<u8>, error: HelloError) {
    assert_eq!(Hello::decode(&bytes), Err(error));
}

fn golden() -> Vec<u8> {
    hello(2).encode().to_vec()
}

#[test]
fn every_decode_rejection() {
    expect(golden()[..71].to_vec(), HelloError::WrongLength { len: 71 });
    expect(golden()[..64].to_vec(), HelloError::WrongLength { len: 64 });
    let mut long = golden();
    long.push(0);
    expect(long, HelloError::WrongLength { len: 73 });
    expect(
        patched(golden(), 0, b"HTTP"),
        HelloError::BadMagic { found: *b"HTTP" },
    );
    expect(
        patched(golden(), 4, &9u16.to_le_bytes()),
        HelloError::UnsupportedVersion { found: 9 },
    );
    expect(patched(golden(), 6, &[1]), HelloError::NotHello { kind: 1 });
    expect(
        patched(golden(), 7, &[2]),
        HelloError::UnknownChannel { code: 2 },
    );
    expect(patched(golden(), 58, &[1]), HelloError::ReservedNotZero);
    expect(patched(golden(), 59, &[1]), HelloError::ReservedNotZero);
    for at in 69..72 {
        expect(patched(golden(), at, &[1]), HelloError::ReservedNotZero);
    }
    expect(
        patched(golden(), 68, &[2]),
        HelloError::UnknownAuth { code: 2 },
    );
    expect(
        patched(golden(), 12, &0u32.to_le_bytes()),
        HelloError::EmptyWorld,
    );
    expect(
        patched(golden(), 8, &4u32.to_le_bytes()),
        HelloError::RankOutOfRange {
            rank: 4,
            world_size: 4,
        },
    );
    expect(
        patched(golden(), 56, &0u16.to_le_bytes()),
        HelloError::InvalidLimits(LimitsError {
            field: LimitField::MaxSegments,
            problem: LimitProblem::Zero,
        }),
    );
    expect(
        patched(golden(), 60, &5000u32.to_le_bytes()),
        HelloError::InvalidLimits(LimitsError {
            field: LimitField::MaxErrorTextBytes,
            problem: LimitProblem::TooLarge { max: 4096 },
        }),
    );
}

#[test]
fn a_frame_header_is_not_a_hello() {
    use crate::wire::test_support::{header_of, request};
    let header = header_of(request()).encode();
    assert_eq!(
        Hello::decode(&header[..HELLO_LEN]),
        Err(HelloError::NotHello { kind: 1 })
    );
}

#[test]
fn every_single_byte_corruption_is_rejected_or_canonical() {
    let step = if cfg!(miri) { 51 } else { 1 };
    let original = hello(2);
    let bytes = original.encode();
    for position in 0..HELLO_LEN {
        for delta in (1..=255u8).step_by(step) {
            let mut corrupted = bytes;
            corrupted[position] = corrupted[position].wrapping_add(delta);
            if let Ok(decoded) = Hello::decode(&corrupted) {
                assert_ne!(decoded, original);
                assert_eq!(decoded.encode(), corrupted);
            }
        }
    }
}

#[test]
fn compatible_peers_pass() {
    assert_eq!(check_compatible(&hello(0), &hello(3)), Ok(()));
    assert_eq!(check_compatible(&hello(3), &hello(0)), Ok(()));
}

#[test]
fn every_mismatch_names_its_field_with_both_values() {
    let local = hello(0);
    let peer = hello(1);
    let mut limits = ProtocolLimits::DEFAULT;
    limits.max_segments = 8;
    let cases: [(Hello, HelloField, u128, u128); 12] = [
        (
            Hello {
                protocol_version: 1,
                ..peer
            },
            HelloField::Version,
            PROTOCOL_VERSION.into(),
            1,
        ),
        (Hello { run_id: 5, ..peer }, HelloField::RunId, RUN, 5),
        (
            Hello {
                world_size: WorldSize::new(8).unwrap(),
                ..peer
            },
            HelloField::WorldSize,
            4,
            8,
        ),
        (
            Hello {
                rank: WorldSize::new(8).unwrap().rank(6).unwrap(),
                ..peer
            },
            HelloField::RankOutOfRange,
            4,
            6,
        ),
        (hello(0), HelloField::DuplicateRank, 0, 0),
        (
            peer.with_channel(Channel::Control),
            HelloField::Channel,
            1,
            0,
        ),
        (
            Hello {
                limits: {
                    let mut l = ProtocolLimits::DEFAULT;
                    l.max_frame_bytes = 1 << 20;
                    l.max_segment_bytes = 1 << 20;
                    l
                },
                ..peer
            },
            HelloField::Limit(LimitField::MaxFrameBytes),
            16 << 20,
            1 << 20,
        ),
        (
            Hello {
                limits: {
                    let mut l = ProtocolLimits::DEFAULT;
                    l.max_segment_bytes = 1 << 20;
                    l
                },
                ..peer
            },
            HelloField::Limit(LimitField::MaxSegmentBytes),
            16 << 20,
            1 << 20,
        ),
        (
            Hello { limits, ..peer },
            HelloField::Limit(LimitField::MaxSegments),
            64,
            8,
        ),
        (
            Hello {
                limits: {
                    let mut l = ProtocolLimits::DEFAULT;
                    l.max_error_text_bytes = 100;
                    l
                },
                ..peer
            },
            HelloField::Limit(LimitField::MaxErrorTextBytes),
            4096,
            100,
        ),
        (
            Hello {
                fingerprint: Fingerprint::from_u128(9),
                ..peer
            },
            HelloField::Fingerprint,
            0x0011_2233_4455_6677_8899_aabb_ccdd_eeff,
            9,
        ),
        // The first difference wins: version before run id.
        (
            Hello {
                protocol_version: PROTOCOL_VERSION + 1,
                run_id: 1,
                ..peer
            },
            HelloField::Version,
            PROTOCOL_VERSION.into(),
            (PROTOCOL_VERSION + 1).into(),
        ),
    ];
    for (remote, field, l, r) in cases {
        assert_eq!(
            check_compatible(&local, &remote),
            Err(HelloMismatch {
                field,
                local: l,
                remote: r
            }),
            "{field}"
        );
    }
}

#[test]
fn display_is_lowercase_and_specific() {
    let mismatch = HelloMismatch {
        field: HelloField::Limit(LimitField::MaxSegments),
        local: 64,
        remote: 8,
    };
    assert_eq!(
        mismatch.to_string(),
        "peer rejected: limit `max_segments` differs (local 64, remote 8)"
    );
    let mismatch = HelloMismatch {
        field: HelloField::Fingerprint,
        local: 1,
        remote: 2,
    };
    assert_eq!(
        mismatch.to_string(),
        "peer rejected: registry fingerprint differs (local 00000000000000000000000000000001, remote 00000000000000000000000000000002)"
    );
    let mismatch = HelloMismatch {
        field: HelloField::RankOutOfRange,
        local: 4,
        remote: 6,
    };
    assert_eq!(
        mismatch.to_string(),
        "peer rejected: remote rank 6 is outside the local world of 4 rank(s)"
    );
    let mismatch = HelloMismatch {
        field: HelloField::DuplicateRank,
        local: 2,
        remote: 2,
    };
    assert_eq!(
        mismatch.to_string(),
        "peer rejected: remote claims the local rank 2"
    );
    let errors = [
        HelloError::WrongLength { len: 1 },
        HelloError::BadMagic { found: [0; 4] },
        HelloError::UnsupportedVersion { found: 3 },
        HelloError::NotHello { kind: 1 },
        HelloError::UnknownChannel { code: 9 },
        HelloError::ReservedNotZero,
        HelloError::UnknownAuth { code: 2 },
        HelloError::EmptyWorld,
        HelloError::RankOutOfRange {
            rank: 1,
            world_size: 1,
        },
    ];
    for error in errors {
        let text = error.to_string();
        assert!(!text.ends_with('.'), "{text}");
        assert!(error.source().is_none());
    }
    assert_eq!(
        HelloError::NotHello { kind: 1 }.to_string(),
        "expected a hello record, found a record of kind 1"
    );
}

#[test]
fn the_authentication_scheme_travels_and_must_agree() {
    let plain = hello(2);
    assert_eq!(plain.auth, HelloAuth::None);
    let proven = plain.with_auth(HelloAuth::HmacSha256);
    let bytes = proven.encode();
    assert_eq!(bytes[68], 1);
    assert_eq!(Hello::decode(&bytes), Ok(proven));
    let mut other = proven;
    other.rank = other
        .world_size
        .rank((other.rank.get() + 1) % other.world_size.get())
        .unwrap();
    assert_eq!(check_compatible(&proven, &other), Ok(()));
    let mismatch = check_compatible(&proven, &other.with_auth(HelloAuth::None)).unwrap_err();
    assert_eq!(mismatch.field, HelloField::Authentication);
    assert_eq!((mismatch.local, mismatch.remote), (1, 0));
    assert_eq!(
        mismatch.to_string(),
        "peer rejected: authentication differs (local HMAC-SHA256, remote none)"
    );
}
