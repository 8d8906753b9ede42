//! `#[wire(serde)]`: types that already implement `Serialize` and
//! `Deserialize` travel as one segment in postcard's format, with a schema
//! ID from their name, and a segment that is not exactly one such value is
//! a typed error.

use std::collections::BTreeMap;

use dinah_std::__derive::serde_schema;
use dinah_std::{CodecError, SegmentReader, SegmentWriter, WireValue};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(WireValue, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[wire(serde, name = "test.Config/1")]
struct Config {
    name: String,
    limits: BTreeMap<String, u64>,
    mode: Mode,
    ratio: Option<f32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Mode {
    Fast,
    Careful { retries: u8 },
}

/// A generic serde type: the impl asks the type's own serde bounds.
#[derive(WireValue, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[wire(serde, name = "test.Tagged/1")]
struct Tagged<T> {
    tag: u32,
    value: T,
}

fn config() -> Config {
    Config {
        name: "solver".into(),
        limits: [("steps".to_owned(), 10_u64), ("depth".to_owned(), 3)]
            .into_iter()
            .collect(),
        mode: Mode::Careful { retries: 2 },
        ratio: Some(0.5),
    }
}

fn round_trip<T: WireValue + PartialEq + std::fmt::Debug>(value: &T) -> usize {
    let mut out = SegmentWriter::new();
    value.encode(&mut out).unwrap();
    let mut input = SegmentReader::from_writer(&out);
    assert_eq!(&T::decode(&mut input).unwrap(), value);
    input.finish().unwrap();
    out.len()
}

#[test]
fn serde_values_take_one_segment_and_round_trip() {
    assert_eq!(round_trip(&config()), 1);
    assert_eq!(
        round_trip(&Tagged {
            tag: 1,
            value: vec![config(), config()]
        }),
        1
    );
    // Inside dinah's own codecs, too: a sequence of them is one group.
    assert_eq!(round_trip(&vec![config(); 3]), 1);
}

#[test]
fn the_schema_comes_from_the_name() {
    assert_eq!(Config::SCHEMA_ID, serde_schema("test.Config/1"));
    assert_ne!(Config::SCHEMA_ID, serde_schema("test.Config/2"));
    // One name for every instantiation: serde gives no layout to digest.
    assert_eq!(<Tagged<u8>>::SCHEMA_ID, <Tagged<String>>::SCHEMA_ID);
}

fn decode_bytes<T: WireValue>(bytes: &[u8]) -> Result<T, CodecError> {
    let mut out = SegmentWriter::new();
    out.push(bytes);
    T::decode(&mut SegmentReader::from_writer(&out))
}

#[test]
fn a_segment_that_is_not_exactly_one_value_is_refused() {
    let mut out = SegmentWriter::new();
    config().encode(&mut out).unwrap();
    let bytes = out.segments().next().unwrap().to_vec();
    // Cut short.
    assert_eq!(
        decode_bytes::<Config>(&bytes[..bytes.len() - 1]),
        Err(CodecError::Serde { index: 0 })
    );
    // One byte too many.
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        decode_bytes::<Config>(&longer),
        Err(CodecError::Serde { index: 0 })
    );
    assert_eq!(
        decode_bytes::<Config>(&[]),
        Err(CodecError::Serde { index: 0 })
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_configs_round_trip(
        name in ".{0,12}",
        limits in proptest::collection::btree_map(".{0,6}", any::<u64>(), 0..6),
        retries in proptest::option::of(any::<u8>()),
        ratio in proptest::option::of(any::<f32>().prop_filter("not NaN", |r| !r.is_nan())),
    ) {
        let mode = retries.map_or(Mode::Fast, |retries| Mode::Careful { retries });
        prop_assert_eq!(round_trip(&Config { name, limits, mode, ratio }), 1);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_bytes::<Config>(&bytes);
        let _ = decode_bytes::<Tagged<Vec<Config>>>(&bytes);
    }
}
