//! The sequence, map, `Result` and box codecs: any element type in one
//! segment (a group of records), numeric sequences packed, maps of either
//! kind with one schema, and typed errors for every malformed or hostile
//! input (a torn record, a count larger than its group, a repeated key, an
//! array of the wrong length). It also keeps the seed corpus of the
//! `decode_payload` fuzz target equal to what the codecs write.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use dinah_std::{CodecError, DETACH_FROM, SegmentReader, SegmentWriter, WireValue, schema_id};
use proptest::prelude::*;

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Point {
    x: i32,
    label: String,
}

#[derive(WireValue, Debug, Clone, PartialEq)]
enum Shape {
    Dot(Point),
    Path(Vec<Point>),
    Named { tags: BTreeMap<String, u32> },
}

#[derive(WireValue, Debug, Clone, Copy, PartialEq)]
struct Nothing;

fn encode<T: WireValue>(value: &T) -> Result<SegmentWriter, CodecError> {
    let mut out = SegmentWriter::new();
    value.encode(&mut out)?;
    Ok(out)
}

fn decode<T: WireValue>(out: &SegmentWriter) -> Result<T, CodecError> {
    let mut input = SegmentReader::from_writer(out);
    let value = T::decode(&mut input)?;
    input.finish()?;
    Ok(value)
}

fn round_trip<T: WireValue + PartialEq + Debug>(value: T) -> usize {
    let out = encode(&value).expect("encodes");
    assert_eq!(decode::<T>(&out).expect("decodes"), value);
    out.len()
}

fn point(i: i32) -> Point {
    Point {
        x: i,
        label: format!("p{i}"),
    }
}

#[test]
fn a_sequence_of_structs_takes_one_segment_however_long() {
    let points: Vec<Point> = (0..1000).map(point).collect();
    assert_eq!(round_trip(points), 1);
    assert_eq!(round_trip(Vec::<Point>::new()), 1);
    assert_eq!(round_trip(vec![vec![1_u64, 2], vec![], vec![3]]), 1);
    assert_eq!(round_trip(vec!["a".to_owned(), String::new()]), 1);
    assert_eq!(round_trip(vec![Some(1_u8), None]), 1);
    assert_eq!(
        round_trip(vec![
            Shape::Dot(point(1)),
            Shape::Path(vec![point(2), point(3)])
        ]),
        1
    );
}

#[test]
fn numeric_sequences_stay_packed_in_one_segment() {
    let out = encode(&vec![1_u16, 2, 3]).unwrap();
    assert_eq!(
        out.segments().collect::<Vec<_>>(),
        [&[1, 0, 2, 0, 3, 0][..]]
    );
    assert_eq!(round_trip([7_u32; 4]), 1);
    assert_eq!(round_trip(vec![1.5_f64; 3].into_boxed_slice()), 1);
    // The schemas of packed sequences are the ones they always had.
    assert_eq!(<Vec<u8>>::SCHEMA_ID, schema_id("dinah.vec.u8"));
    assert_eq!(<[u8; 3]>::SCHEMA_ID, <Vec<u8>>::SCHEMA_ID);
    assert_ne!(<Vec<Point>>::SCHEMA_ID, <Vec<Shape>>::SCHEMA_ID);
}

#[test]
fn maps_results_arrays_and_boxes_round_trip() {
    let mut tags = BTreeMap::new();
    tags.insert("a".to_owned(), 1);
    tags.insert("b".to_owned(), 2);
    assert_eq!(round_trip(Shape::Named { tags: tags.clone() }), 2);
    let hashed: HashMap<u64, Point> = (0..50).map(|i| (i, point(i as i32))).collect();
    round_trip(hashed.clone());
    round_trip(Ok::<u64, String>(5));
    round_trip(Err::<u64, String>("no".into()));
    round_trip([point(1), point(2), point(3)]);
    round_trip(Box::new(point(9)));
    round_trip(vec![Nothing; 12]);
    // One map schema: sent as a HashMap, read as a BTreeMap.
    assert_eq!(
        <HashMap<u64, Point>>::SCHEMA_ID,
        <BTreeMap<u64, Point>>::SCHEMA_ID
    );
    let out = encode(&hashed).unwrap();
    let ordered: BTreeMap<u64, Point> = decode(&out).unwrap();
    assert_eq!(ordered.len(), 50);
    assert_eq!(ordered[&7], point(7));
}

/// A group segment holding `records`, each written with its length.
fn group(records: &[&[u8]]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for record in records {
        bytes.extend_from_slice(&(record.len() as u32).to_le_bytes());
        bytes.extend_from_slice(record);
    }
    bytes
}

fn decode_segment<T: WireValue>(segment: &[u8]) -> Result<T, CodecError> {
    let mut out = SegmentWriter::new();
    out.push(segment);
    decode(&out)
}

#[test]
fn hostile_groups_are_typed_errors() {
    let one = 1_u64.to_le_bytes();
    let x = 5_i32.to_le_bytes();
    // A count far beyond what the group holds: refused before any loop
    // or reservation.
    let huge = u64::MAX.to_le_bytes();
    assert_eq!(
        decode_segment::<Vec<Point>>(&group(&[&huge])),
        Err(CodecError::SequenceTooLong { count: u64::MAX })
    );
    assert_eq!(
        decode_segment::<Vec<Nothing>>(&group(&[&1_000_000_u64.to_le_bytes()])),
        Err(CodecError::SequenceTooLong { count: 1_000_000 })
    );
    // A record claiming more bytes than the group has.
    let mut torn = group(&[&one, &x]);
    torn.extend_from_slice(&100_u32.to_le_bytes());
    torn.extend_from_slice(b"short");
    assert_eq!(
        decode_segment::<Vec<Point>>(&torn),
        Err(CodecError::MissingSegment { index: 2 })
    );
    // Bytes after the last whole record.
    let mut tail = group(&[&one, &x, b"p"]);
    tail.push(0xff);
    assert_eq!(
        decode_segment::<Vec<Point>>(&tail),
        Err(CodecError::TrailingSegments { extra: 1 })
    );
    // A key twice.
    let twice = group(&[&2_u64.to_le_bytes(), &one, &x, &one, &x]);
    assert_eq!(
        decode_segment::<BTreeMap<u64, i32>>(&twice),
        Err(CodecError::DuplicateKey { entry: 1 })
    );
    // An array of three sent as two.
    let out = encode(&vec![point(1), point(2)]).unwrap();
    assert_eq!(
        decode::<[Point; 3]>(&out),
        Err(CodecError::ArrayLength {
            expected: 3,
            actual: 2
        })
    );
    // A result's tag that is neither.
    let mut bad = SegmentWriter::new();
    bad.push(&[2]);
    assert!(matches!(
        decode::<Result<u8, u8>>(&bad),
        Err(CodecError::InvalidTag { value: 2, .. })
    ));
}

#[test]
fn elements_that_encode_to_nothing_are_bounded_on_both_sides() {
    assert_eq!(
        encode(&vec![Nothing; 13]).err(),
        Some(CodecError::SequenceTooLong { count: 13 })
    );
    // A failed group leaves nothing behind in the writer.
    let mut out = SegmentWriter::new();
    out.push(b"kept");
    assert!(vec![Nothing; 13].encode(&mut out).is_err());
    assert_eq!(out.len(), 1);
    assert_eq!(out.payload_len(), 4);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sequences_and_maps_round_trip(
        pairs in proptest::collection::vec((any::<u32>(), ".{0,8}"), 0..40),
        nested in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..16), 0..8),
        map in proptest::collection::btree_map(any::<u16>(), proptest::collection::vec(any::<i64>(), 0..4), 0..16),
    ) {
        let points: Vec<Point> = pairs.iter().map(|(x, label)| Point { x: *x as i32, label: label.clone() }).collect();
        prop_assert_eq!(round_trip(pairs), 1);
        prop_assert_eq!(round_trip(points.clone()), 1);
        prop_assert_eq!(round_trip(nested), 1);
        prop_assert_eq!(round_trip(map), 1);
        prop_assert_eq!(round_trip(Shape::Path(points)), 2);
    }

    #[test]
    fn consuming_encodes_write_the_bytes_of_borrowing_ones(
        values in proptest::collection::vec(
            (any::<bool>(), prop_oneof![0usize..64, (DETACH_FROM - 2)..(DETACH_FROM + 2)], any::<u8>()),
            0..5,
        ),
    ) {
        // Byte buffers and strings of sizes around the detach threshold,
        // in any order, in a group too: `encode_owned` (which may detach
        // the last segment) and `encode` give the same segments.
        let value: Vec<(Vec<u8>, String, Shape)> = values
            .iter()
            .map(|&(text, len, byte)| {
                let label = if text { "s".repeat(len) } else { String::new() };
                let point = Point { x: len as i32, label: label.clone() };
                (vec![byte; len], label, Shape::Dot(point))
            })
            .collect();
        let last = values.last().map(|&(_, len, byte)| vec![byte; len]);
        let borrowed = encode(&(value.clone(), last.clone()))?;
        let mut owned = SegmentWriter::new();
        (value.clone(), last.clone()).encode_owned(&mut owned)?;
        prop_assert_eq!(owned.segments().collect::<Vec<_>>(), borrowed.segments().collect::<Vec<_>>());
        prop_assert_eq!(owned.payload_len(), borrowed.payload_len());
        prop_assert_eq!(decode::<(Vec<(Vec<u8>, String, Shape)>, Option<Vec<u8>>)>(&owned)?, (value, last));
    }

    #[test]
    fn arbitrary_groups_never_panic(records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..8), junk in proptest::collection::vec(any::<u8>(), 0..6)) {
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let mut segment = group(&refs);
        segment.extend_from_slice(&junk);
        let _ = decode_segment::<Vec<Point>>(&segment);
        let _ = decode_segment::<BTreeMap<u8, Vec<String>>>(&segment);
        let _ = decode_segment::<Vec<Vec<Shape>>>(&segment);
    }
}

/// The layouts of `fuzz/fuzz_targets/decode_payload.rs`, whose seed corpus
/// is made from them below.
mod fuzz_layouts {
    use dinah_std::WireValue;

    #[derive(WireValue, Debug, Clone, PartialEq)]
    pub(super) struct Item {
        pub(super) id: u32,
        pub(super) name: String,
        pub(super) sizes: Vec<u16>,
    }

    #[derive(WireValue, Debug, Clone, PartialEq)]
    pub(super) enum Kind {
        Empty,
        One(Item),
        Many { items: Vec<Item>, flag: bool },
    }
}

/// The seeds of the `decode_payload` fuzz target: one accepted segment
/// for each kind of group it decodes.
fn payload_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use fuzz_layouts::{Item, Kind};
    let item = |id: u32| Item {
        id,
        name: format!("item {id}"),
        sizes: vec![1, 2, 3],
    };
    let segment = |out: SegmentWriter| -> Vec<u8> {
        let segments: Vec<&[u8]> = out.segments().collect();
        assert_eq!(segments.len(), 1, "every seed is one segment");
        segments[0].to_vec()
    };
    let items = encode(&vec![item(1), item(2)]).unwrap();
    let kinds = encode(&vec![
        Kind::Empty,
        Kind::One(item(3)),
        Kind::Many {
            items: vec![item(4)],
            flag: true,
        },
    ])
    .unwrap();
    let map: BTreeMap<String, Vec<u32>> = [("a".to_owned(), vec![1]), ("b".to_owned(), vec![])]
        .into_iter()
        .collect();
    let results = encode(&vec![Ok::<u8, String>(1), Err("no".into())]).unwrap();
    vec![
        ("seed-items", segment(items)),
        ("seed-kinds", segment(kinds)),
        ("seed-map", segment(encode(&map).unwrap())),
        ("seed-results", segment(results)),
    ]
}

#[test]
fn payload_fuzz_seeds_match_the_codec() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode_payload");
    let bless = std::env::var_os("DINAH_BLESS_FUZZ_SEEDS").is_some();
    for (name, bytes) in payload_seeds() {
        let path = dir.join(name);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let stored = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with DINAH_BLESS_FUZZ_SEEDS=1)",
                path.display()
            )
        });
        assert_eq!(
            stored,
            bytes,
            "{} is stale (run with DINAH_BLESS_FUZZ_SEEDS=1)",
            path.display()
        );
    }
}
