//! Hello decoding of arbitrary bytes: never panics, accepts only canonical
//! encodings, and the handshake check is consistent.

#![no_main]

use dinah_core::wire::{Channel, Hello, HelloField, check_compatible};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(hello) = Hello::decode(data) else {
        return;
    };
    assert_eq!(&hello.encode()[..], data);
    assert!(hello.world_size.contains(hello.rank));
    assert_eq!(hello.limits.validate(), Ok(()));
    // A hello never accepts itself: same rank.
    let verdict = check_compatible(&hello, &hello).map_err(|e| e.field);
    assert_eq!(verdict, Err(HelloField::DuplicateRank));
    // The other channel's hello of the same peer differs only in channel.
    let other = hello.with_channel(match hello.channel {
        Channel::Control => Channel::Action,
        Channel::Action => Channel::Control,
    });
    assert_eq!(Hello::decode(&other.encode()), Ok(other));
});
