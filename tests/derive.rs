//! `#[derive(WireValue)]` and `#[derive(Action)]` from a user crate: round
//! trips of every shape, the exact encoding, typed decode errors, the
//! schema-ID rule, the facade path, strict lints on the generated code, and
//! a derived action called across two ranks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Poll;
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::__derive::{enum_schema, struct_schema};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, action_id, schema_id,
};
use proptest::prelude::*;

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Named {
    id: u32,
    label: String,
    flag: bool,
}

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Tuple(u8, i64);

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Unit;

#[derive(WireValue, Debug, Clone, PartialEq)]
enum Every {
    Empty,
    Pair(u16, char),
    Record { name: String, score: f64 },
    Nested(Named),
}

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Wrapper<T>
where
    T: Clone,
{
    inner: T,
    extra: Option<T>,
}

#[derive(WireValue, Debug, Clone, PartialEq)]
enum Either<L, R> {
    Left(L),
    Right(R),
}

#[derive(WireValue, Debug, Clone, PartialEq)]
struct Outer {
    named: Named,
    maybe: Option<Tuple>,
    pair: (u8, String),
    bytes: Vec<u8>,
}

/// Field and variant names are digested without `r#`.
#[derive(WireValue, Debug, Clone, PartialEq)]
#[expect(non_camel_case_types, reason = "a keyword-named variant")]
enum r#Keyword {
    r#type { r#for: u8 },
}

/// All 256 one-byte tags in use (laid out sixteen to a line).
#[rustfmt::skip]
#[derive(WireValue, Debug, Clone, Copy, PartialEq)]
enum Full {
    V00, V01, V02, V03, V04, V05, V06, V07, V08, V09, V0a, V0b, V0c, V0d, V0e, V0f,
    V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V1a, V1b, V1c, V1d, V1e, V1f,
    V20, V21, V22, V23, V24, V25, V26, V27, V28, V29, V2a, V2b, V2c, V2d, V2e, V2f,
    V30, V31, V32, V33, V34, V35, V36, V37, V38, V39, V3a, V3b, V3c, V3d, V3e, V3f,
    V40, V41, V42, V43, V44, V45, V46, V47, V48, V49, V4a, V4b, V4c, V4d, V4e, V4f,
    V50, V51, V52, V53, V54, V55, V56, V57, V58, V59, V5a, V5b, V5c, V5d, V5e, V5f,
    V60, V61, V62, V63, V64, V65, V66, V67, V68, V69, V6a, V6b, V6c, V6d, V6e, V6f,
    V70, V71, V72, V73, V74, V75, V76, V77, V78, V79, V7a, V7b, V7c, V7d, V7e, V7f,
    V80, V81, V82, V83, V84, V85, V86, V87, V88, V89, V8a, V8b, V8c, V8d, V8e, V8f,
    V90, V91, V92, V93, V94, V95, V96, V97, V98, V99, V9a, V9b, V9c, V9d, V9e, V9f,
    Va0, Va1, Va2, Va3, Va4, Va5, Va6, Va7, Va8, Va9, Vaa, Vab, Vac, Vad, Vae, Vaf,
    Vb0, Vb1, Vb2, Vb3, Vb4, Vb5, Vb6, Vb7, Vb8, Vb9, Vba, Vbb, Vbc, Vbd, Vbe, Vbf,
    Vc0, Vc1, Vc2, Vc3, Vc4, Vc5, Vc6, Vc7, Vc8, Vc9, Vca, Vcb, Vcc, Vcd, Vce, Vcf,
    Vd0, Vd1, Vd2, Vd3, Vd4, Vd5, Vd6, Vd7, Vd8, Vd9, Vda, Vdb, Vdc, Vdd, Vde, Vdf,
    Ve0, Ve1, Ve2, Ve3, Ve4, Ve5, Ve6, Ve7, Ve8, Ve9, Vea, Veb, Vec, Ved, Vee, Vef,
    Vf0, Vf1, Vf2, Vf3, Vf4, Vf5, Vf6, Vf7, Vf8, Vf9, Vfa, Vfb, Vfc, Vfd, Vfe, Vff,
}

/// Encodes `value`, checks it decodes back using every segment, and
/// returns the segments.
fn round_trip<T: WireValue + PartialEq + std::fmt::Debug>(value: &T) -> Vec<Vec<u8>> {
    let mut out = SegmentWriter::new();
    value.encode(&mut out).unwrap();
    let mut input = SegmentReader::from_writer(&out);
    assert_eq!(&T::decode(&mut input).unwrap(), value);
    input.finish().unwrap();
    out.segments().map(<[u8]>::to_vec).collect()
}

fn segments_of<T: WireValue>(value: &T) -> Vec<Vec<u8>> {
    let mut out = SegmentWriter::new();
    value.encode(&mut out).unwrap();
    out.segments().map(<[u8]>::to_vec).collect()
}

fn decode_from<T: WireValue>(segments: &[&[u8]]) -> Result<T, CodecError> {
    let mut writer = SegmentWriter::new();
    for segment in segments {
        writer.push(segment);
    }
    let mut input = SegmentReader::from_writer(&writer);
    let value = T::decode(&mut input)?;
    input.finish()?;
    Ok(value)
}

fn sample_named() -> Named {
    Named {
        id: 7,
        label: "seven".into(),
        flag: true,
    }
}

#[test]
fn structs_encode_like_a_tuple_of_their_fields() {
    let named = sample_named();
    let segments = round_trip(&named);
    assert_eq!(segments, segments_of(&(7u32, String::from("seven"), true)));
    assert_eq!(round_trip(&Tuple(1, -2)), segments_of(&(1u8, -2i64)));
    assert!(round_trip(&Unit).is_empty());
}

#[test]
fn enums_encode_a_tag_then_the_variant_fields() {
    assert_eq!(round_trip(&Every::Empty), [vec![0]]);
    let mut expected = vec![vec![1]];
    expected.extend(segments_of(&(0x0102u16, 'x')));
    assert_eq!(round_trip(&Every::Pair(0x0102, 'x')), expected);
    round_trip(&Every::Record {
        name: "r".into(),
        score: -1.5,
    });
    let nested = round_trip(&Every::Nested(sample_named()));
    assert_eq!(nested[0], [3]);
    assert_eq!(nested[1..], segments_of(&sample_named())[..]);
    assert_eq!(round_trip(&r#Keyword::r#type { r#for: 9 }), [[0], [9]]);
}

#[test]
fn all_256_tags_round_trip() {
    assert_eq!(round_trip(&Full::V00), [[0]]);
    assert_eq!(round_trip(&Full::Vff), [[255]]);
}

#[test]
fn generic_and_nested_types_round_trip() {
    round_trip(&Wrapper {
        inner: 3u64,
        extra: None,
    });
    round_trip(&Wrapper {
        inner: Tuple(1, 2),
        extra: Some(Tuple(3, 4)),
    });
    round_trip(&Either::<Named, Vec<f64>>::Left(sample_named()));
    round_trip(&Either::<Named, Vec<f64>>::Right(vec![1.0, 2.5]));
    round_trip(&Outer {
        named: sample_named(),
        maybe: Some(Tuple(5, 6)),
        pair: (1, "one".into()),
        bytes: vec![0, 1, 255],
    });
    round_trip(&Outer {
        named: sample_named(),
        maybe: None,
        pair: (0, String::new()),
        bytes: Vec::new(),
    });
    assert_ne!(
        <Wrapper<u8>>::SCHEMA_ID,
        <Wrapper<u16>>::SCHEMA_ID,
        "a type parameter's schema is part of the layout"
    );
}

#[test]
fn bad_input_is_a_typed_error() {
    assert_eq!(
        decode_from::<Every>(&[&[4]]),
        Err(CodecError::InvalidTag { index: 0, value: 4 })
    );
    assert_eq!(
        decode_from::<Every>(&[&[0, 0]]),
        Err(CodecError::SegmentLength {
            index: 0,
            expected: 1,
            actual: 2
        })
    );
    // A tag inside a nested field reports its own segment.
    assert_eq!(
        decode_from::<Outer>(&[&7u32.to_le_bytes(), b"s", &[1], &[9]]),
        Err(CodecError::InvalidTag { index: 3, value: 9 })
    );
    let segments = segments_of(&sample_named());
    let truncated: Vec<&[u8]> = segments[..2].iter().map(Vec::as_slice).collect();
    assert_eq!(
        decode_from::<Named>(&truncated),
        Err(CodecError::MissingSegment { index: 2 })
    );
    assert_eq!(
        decode_from::<Every>(&[&[1], &[1, 0]]),
        Err(CodecError::MissingSegment { index: 2 })
    );
    assert_eq!(
        decode_from::<Unit>(&[&[0]]),
        Err(CodecError::TrailingSegments { extra: 1 })
    );
}

#[test]
fn schema_ids_follow_the_documented_rule() {
    assert_eq!(
        Named::SCHEMA_ID,
        struct_schema(
            "Named",
            &[
                ("id", u32::SCHEMA_ID),
                ("label", String::SCHEMA_ID),
                ("flag", bool::SCHEMA_ID),
            ]
        )
    );
    assert_eq!(
        Tuple::SCHEMA_ID,
        struct_schema("Tuple", &[("0", u8::SCHEMA_ID), ("1", i64::SCHEMA_ID)])
    );
    assert_eq!(
        r#Keyword::SCHEMA_ID,
        enum_schema("Keyword", &[("type", &[("for", u8::SCHEMA_ID)])])
    );
    assert_eq!(schema::named::P::SCHEMA_ID, struct_schema("app.P/1", &[]));
}

#[path = "derive/schema.rs"]
mod schema;

#[test]
fn action_ids_are_128_bit_fnv1a_of_the_name() {
    assert_eq!(action_id(""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
    assert_eq!(action_id("a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
    assert_eq!(Summarise::ID, action_id("test.derive.Summarise/1"));
    assert_eq!(
        <<Summarise as Action>::Output as WireValue>::SCHEMA_ID,
        Summary::SCHEMA_ID
    );
    assert_ne!(schema_id("Point"), 0);
}

#[path = "derive/facade.rs"]
pub mod facade;

fn every_strategy() -> impl Strategy<Value = Every> {
    let named = (any::<u32>(), "[a-zé]{0,12}", any::<bool>()).prop_map(|(id, label, flag)| Named {
        id,
        label,
        flag,
    });
    prop_oneof![
        Just(Every::Empty),
        (any::<u16>(), any::<char>()).prop_map(|(n, c)| Every::Pair(n, c)),
        (".{0,8}", -1e9f64..1e9).prop_map(|(name, score)| Every::Record { name, score }),
        named.prop_map(Every::Nested),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn derived_structs_round_trip(
        id in any::<u32>(),
        label in ".{0,16}",
        maybe in proptest::option::of((any::<u8>(), any::<i64>())),
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let value = Outer {
            named: Named { id, label: label.clone(), flag: id % 2 == 0 },
            maybe: maybe.map(|(a, b)| Tuple(a, b)),
            pair: (bytes.len() as u8, label),
            bytes,
        };
        round_trip(&value);
    }

    #[test]
    fn derived_enums_round_trip(value in every_strategy()) {
        let segments = round_trip(&value);
        prop_assert!(segments[0].len() == 1 && segments[0][0] < 4);
    }
}

/// Summarises a list of numbers on the target rank.
#[derive(WireValue, Action, Debug)]
#[action(name = "test.derive.Summarise/1", output = Summary)]
struct Summarise {
    values: Vec<u64>,
    label: String,
}

/// What [`Summarise`] returns.
#[derive(WireValue, Debug, PartialEq)]
enum Summary {
    Empty { label: String },
    Stats { label: String, min: u64, max: u64 },
}

fn summarise(Summarise { values, label }: Summarise) -> Summary {
    match (values.iter().min(), values.iter().max()) {
        (Some(&min), Some(&max)) => Summary::Stats { label, min, max },
        _ => Summary::Empty { label },
    }
}

#[test]
fn a_derived_action_runs_on_another_rank() {
    let world = WorldSize::new(2).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let arrived = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            let arrived = Arc::clone(&arrived);
            std::thread::spawn(move || {
                let mut builder =
                    Runtime::builder(30, ProtocolLimits::default(), RuntimeLimits::default())
                        .unwrap();
                builder
                    .register::<Summarise, _>(|action| Ok(summarise(action)))
                    .unwrap();
                let hello = builder.hello().unwrap();
                let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                let mut runtime = builder.start(handle, driver).unwrap();
                let client = runtime.client();
                let peer = Rank::new(1 - rank.get(), world).unwrap();
                let call = |values: Vec<u64>| Summarise {
                    values,
                    label: format!("from {}", rank.get()),
                };
                let stats = runtime
                    .block_on(client.spawn_on(peer, call(vec![5, 2, 9])))
                    .unwrap();
                let label = format!("from {}", rank.get());
                assert_eq!(
                    stats,
                    Summary::Stats {
                        label: label.clone(),
                        min: 2,
                        max: 9
                    }
                );
                let empty = runtime.block_on(client.spawn_on(peer, call(Vec::new())));
                assert_eq!(empty.unwrap(), Summary::Empty { label });
                // A barrier that keeps progressing, so the peer's calls are
                // still served while this rank waits.
                arrived.fetch_add(1, Ordering::SeqCst);
                runtime.block_on(std::future::poll_fn(|_| {
                    if arrived.load(Ordering::SeqCst) == world.get() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                runtime.shutdown(Duration::from_secs(10))
            })
        })
        .collect();
    for thread in threads {
        let report = thread.join().unwrap().unwrap();
        assert!(report.is_clean(), "{report}");
    }
}
