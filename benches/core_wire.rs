//! Wire codec costs: header encode/decode, a 64-byte frame decoded whole
//! and through the stream decoder, hello encode/decode, and the registry
//! fingerprint of 16 registrations.
//!
//! `cargo bench --bench core_wire`; `-- --test` runs each once.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dinah_core::wire::{
    Call, Channel, DecodeContext, Header, Hello, Message, StreamDecoder, StreamEvent, TraceId,
    decode_frame, encode_frame,
};
use dinah_core::{
    ActionId, DomainId, Fingerprint, ProtocolLimits, Registration, RequestId, WorldSize,
};

fn call() -> Call {
    Call {
        request: RequestId::new(0x1234_5678).unwrap(),
        action: ActionId::new(0xadd0_0000_0000_0000_0000_0000_0000_0001).unwrap(),
        domain: DomainId::new(1).unwrap(),
        trace: TraceId::new(99),
    }
}

fn result_frame(world: WorldSize) -> (Header, Vec<u8>) {
    let payload = [0x5au8; 64];
    let segments: [&[u8]; 1] = [&payload];
    let origin = world.rank(1).unwrap();
    let header = Header::new(
        origin,
        Message::Result { call: call() },
        &segments,
        &ProtocolLimits::DEFAULT,
    )
    .unwrap();
    let mut bytes = vec![0; header.frame_len()];
    encode_frame(&header, &segments, &mut bytes).unwrap();
    (header, bytes)
}

fn header(c: &mut Criterion) {
    let world = WorldSize::new(4).unwrap();
    let (header, _) = result_frame(world);
    let ctx = DecodeContext::new(
        Channel::Action,
        world.rank(1).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
    )
    .unwrap();
    let bytes = header.encode();
    let mut group = c.benchmark_group("wire/header");
    group.bench_function("encode", |b| b.iter(|| black_box(&header).encode()));
    group.bench_function("decode", |b| {
        b.iter(|| Header::decode(black_box(&bytes), &ctx).unwrap())
    });
    group.finish();
}

fn frame(c: &mut Criterion) {
    let world = WorldSize::new(4).unwrap();
    let (header, bytes) = result_frame(world);
    let ctx = DecodeContext::new(
        Channel::Action,
        world.rank(1).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
    )
    .unwrap();
    let payload = [0x5au8; 64];
    let mut group = c.benchmark_group("wire/frame_64B");
    group.throughput(Throughput::Elements(1));
    group.bench_function("encode", |b| {
        let mut out = vec![0u8; bytes.len()];
        b.iter(|| encode_frame(black_box(&header), &[&payload[..]], &mut out).unwrap())
    });
    group.bench_function("decode_whole", |b| {
        b.iter(|| {
            let frame = decode_frame(black_box(&bytes), &ctx).unwrap();
            frame.segments().next().map(<[u8]>::len)
        })
    });
    group.bench_function("decode_stream", |b| {
        let mut decoder = StreamDecoder::new(ctx);
        b.iter(|| {
            let mut input = black_box(&bytes[..]);
            let mut payload_bytes = 0;
            loop {
                let (used, event) = decoder.decode(input).unwrap();
                input = &input[used..];
                match event {
                    Some(StreamEvent::Payload(chunk)) => payload_bytes += chunk.len(),
                    Some(StreamEvent::FrameEnd) => break,
                    Some(_) => {}
                    None => unreachable!("the whole frame was given"),
                }
            }
            payload_bytes
        })
    });
    group.bench_function("decode_stream_whole", |b| {
        // The stream decoder's one-step path for a frame whole in the input
        // (what the TCP reader takes for most small frames).
        let mut decoder = StreamDecoder::new(ctx);
        b.iter(|| {
            let (len, header) = decoder
                .decode_whole(black_box(&bytes[..]))
                .unwrap()
                .expect("the whole frame was given");
            (len, header.payload_len())
        })
    });
    group.finish();
}

fn hello(c: &mut Criterion) {
    let world = WorldSize::new(64).unwrap();
    let hello = Hello::new(
        0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
        world.rank(5).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
        Fingerprint::from_u128(0xf00d),
        Channel::Action,
    )
    .unwrap();
    let bytes = hello.encode();
    let mut group = c.benchmark_group("wire/hello");
    group.bench_function("encode", |b| b.iter(|| black_box(&hello).encode()));
    group.bench_function("decode", |b| {
        b.iter(|| Hello::decode(black_box(&bytes)).unwrap())
    });
    group.finish();
}

fn fingerprint(c: &mut Criterion) {
    let registrations: Vec<Registration> = (1..=16u128)
        .rev()
        .map(|i| Registration {
            action: ActionId::new(i * 0x9e37_79b9_7f4a_7c15).unwrap(),
            input_schema: i as u64,
            output_schema: i as u64 + 100,
            domain: DomainId::new(i as u64 % 3 + 1).unwrap(),
        })
        .collect();
    let mut group = c.benchmark_group("wire/fingerprint");
    group.bench_function("16_registrations", |b| {
        b.iter(|| {
            let mut registry: [Registration; 16] =
                black_box(&registrations[..]).try_into().unwrap();
            Fingerprint::of(&mut registry).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, header, frame, hello, fingerprint);
criterion_main!(benches);
