//! Payload decoding of arbitrary bytes: the group codecs (sequences of
//! structs and enums, maps, results, arrays) never panic on a segment from
//! the network, and what they accept re-encodes to an equal value (to the
//! same bytes, for the sequences, whose encoding is canonical).

#![no_main]

use std::collections::BTreeMap;
use std::fmt::Debug;

use dinah_std::{SegmentReader, SegmentWriter, WireValue};
use libfuzzer_sys::fuzz_target;

#[derive(WireValue, Debug, PartialEq)]
struct Item {
    id: u32,
    name: String,
    sizes: Vec<u16>,
}

#[derive(WireValue, Debug, PartialEq)]
enum Kind {
    Empty,
    One(Item),
    Many { items: Vec<Item>, flag: bool },
}

/// Decodes `segment` as `T`; if it is accepted, checks that its encoding
/// decodes to an equal value, and with `canonical`, that it is `segment`.
fn check<T: WireValue + Debug + PartialEq>(segment: &[u8], canonical: bool) {
    let mut input = SegmentWriter::new();
    input.push(segment);
    let mut reader = SegmentReader::from_writer(&input);
    let Ok(value) = T::decode(&mut reader) else {
        return;
    };
    if reader.finish().is_err() {
        return;
    }
    let mut out = SegmentWriter::new();
    value.encode(&mut out).expect("an accepted value encodes");
    let mut again = SegmentReader::from_writer(&out);
    assert_eq!(T::decode(&mut again).as_ref(), Ok(&value));
    if canonical {
        assert_eq!(out.segments().collect::<Vec<_>>(), [segment]);
    }
}

fuzz_target!(|data: &[u8]| {
    check::<Vec<Item>>(data, true);
    check::<Vec<Kind>>(data, true);
    check::<Vec<Vec<String>>>(data, true);
    check::<Vec<Result<u8, String>>>(data, true);
    check::<[Item; 2]>(data, true);
    // A map re-encodes in key order, whatever order it arrived in.
    check::<BTreeMap<String, Vec<u32>>>(data, false);
});
