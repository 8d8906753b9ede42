//! The wire codec: a header round trip, the stream decoder over a byte
//! stream fed in odd chunks, the hello and the registry fingerprint (the
//! rejections are in `rejections.rs`).

use dinah_core::wire::{
    Channel, HELLO_LEN, Header, Hello, HelloField, Message, StreamDecoder, StreamEvent,
    check_compatible, encode_frame,
};
use dinah_core::{ActionId, DomainId, Fingerprint, ProtocolLimits, Registration};

use crate::fixtures::{self, call, ctx, origin, world};
use crate::report::check;

pub fn run() {
    headers();
    stream();
    hello();
}

fn headers() {
    let header = fixtures::request(&[b"left", b"right"]);
    let bytes = header.encode();
    check(
        "header: a request round-trips",
        Header::decode(&bytes, &ctx(Channel::Action)) == Ok(header),
    );
}

fn stream() {
    // A request, a result and a goodbye on the action channel, as one byte
    // stream.
    let header = fixtures::request(&[b"left", b"right"]);
    let input: [&[u8]; 2] = [b"left", b"right"];
    let mut wire = [0u8; 512];
    let mut len = encode_frame(&header, &input, &mut wire).expect("fits");
    let origin = origin();
    let result = Header::new(
        origin,
        Message::Result { call: call() },
        &[b"42" as &[u8]],
        &ProtocolLimits::DEFAULT,
    )
    .expect("a valid result");
    len += encode_frame(&result, &[b"42" as &[u8]], &mut wire[len..]).expect("fits");
    let goodbye = Header::without_payload(origin, Message::Goodbye { frames_sent: 2 })
        .expect("a goodbye has no payload");
    len += encode_frame(&goodbye, &[] as &[&[u8]], &mut wire[len..]).expect("fits");
    let mut decoder = StreamDecoder::new(ctx(Channel::Action));
    let (mut starts, mut ends, mut payload) = (0, 0, 0);
    let mut error = None;
    // Odd chunks: 1, 3, 7, 13 bytes, again and again.
    let sizes = [1usize, 3, 7, 13];
    let (mut at, mut turn) = (0, 0);
    'stream: while at < len {
        let end = (at + sizes[turn % sizes.len()]).min(len);
        turn += 1;
        let mut chunk = &wire[at..end];
        at = end;
        loop {
            match decoder.decode(chunk) {
                Err(e) => {
                    error = Some(e);
                    break 'stream;
                }
                Ok((used, event)) => {
                    chunk = &chunk[used..];
                    match event {
                        None => break,
                        Some(StreamEvent::FrameStart(_)) => starts += 1,
                        Some(StreamEvent::Payload(bytes)) => payload += bytes.len(),
                        Some(StreamEvent::FrameEnd) => ends += 1,
                        Some(_) => {}
                    }
                }
            }
        }
    }
    check(
        "stream decoder: three frames fed in chunks of 1, 3, 7 and 13 bytes",
        error.is_none() && starts == 3 && ends == 3 && payload == 11 && decoder.frames() == 3,
    );
    check(
        "stream decoder: ends between frames",
        decoder.finish().is_ok(),
    );
}

fn hello() {
    let mut registry = [Registration {
        action: ActionId::new(0xadd).expect("non-zero"),
        input_schema: 1,
        output_schema: 2,
        domain: DomainId::new(1).expect("non-zero"),
    }];
    let fingerprint = Fingerprint::of(&mut registry);
    check("fingerprint: of a one-action registry", fingerprint.is_ok());
    let Ok(fingerprint) = fingerprint else {
        return;
    };
    let mine = Hello::new(
        0x5eed,
        world().rank(0).expect("in the world"),
        world(),
        ProtocolLimits::DEFAULT,
        fingerprint,
        Channel::Control,
    )
    .expect("a valid hello");
    let theirs = Hello::new(
        0x5eed,
        world().rank(3).expect("in the world"),
        world(),
        ProtocolLimits::DEFAULT,
        fingerprint,
        Channel::Control,
    )
    .expect("a valid hello");
    let bytes: [u8; HELLO_LEN] = theirs.encode();
    let decoded = Hello::decode(&bytes);
    check(
        "hello: round-trips and is compatible",
        decoded == Ok(theirs) && check_compatible(&mine, &theirs).is_ok(),
    );
    let mut stranger = theirs;
    stranger.fingerprint = Fingerprint::from_u128(0xbad);
    check(
        "hello: another registry is refused, naming the fingerprint",
        check_compatible(&mine, &stranger).is_err_and(|m| m.field == HelloField::Fingerprint),
    );
}
