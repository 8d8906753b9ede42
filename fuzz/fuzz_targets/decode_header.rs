//! Header and whole-frame decoding of arbitrary bytes: never panics,
//! accepts only canonical encodings, and whatever it accepts respects the
//! context.

#![no_main]

use dinah_core::wire::{HEADER_LEN, Header, decode_frame};
use dinah_fuzz::split_context;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((ctx, bytes)) = split_context(data) else {
        return;
    };
    if let Ok(header) = Header::decode(bytes, &ctx) {
        assert_eq!(&header.encode()[..], bytes);
        assert_eq!(header.origin(), ctx.source());
        assert!(header.kind().allowed_on(ctx.channel()));
        assert!(header.frame_len() <= ctx.limits().max_frame_bytes as usize);
        assert!(header.segment_count() <= ctx.limits().max_segments);
    }
    if let Ok(frame) = decode_frame(bytes, &ctx) {
        let header = frame.header();
        assert_eq!(Header::decode(&bytes[..HEADER_LEN], &ctx), Ok(*header));
        assert_eq!(bytes.len(), header.frame_len());
        let mut total = 0;
        for segment in frame.segments() {
            assert!(segment.len() <= ctx.limits().max_segment_bytes as usize);
            total += segment.len();
        }
        assert_eq!(frame.segments().len(), usize::from(header.segment_count()));
        assert_eq!(total, header.payload_len() as usize);
        assert_eq!(
            frame.error_text().is_some(),
            header.kind() == dinah_core::wire::MessageKind::Error
        );
    }
});
