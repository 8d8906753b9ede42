//! The text of a handler's panic comes from dinah's panic hook, which wraps
//! the hook in place when the runtime starts. A test binary of its own,
//! because a panic hook is process-wide.

use std::panic;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dinah_core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::{
    Action, CodecError, FailureKind, Runtime, RuntimeError, SegmentReader, SegmentWriter,
    WireValue, schema_id,
};

/// Panics with its text.
struct Boom(String);
impl WireValue for Boom {
    const SCHEMA_ID: u64 = schema_id("test.hook.Boom/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        String::decode(input).map(Boom)
    }
}
impl Action for Boom {
    const ID: u128 = 0x4_0001;
    type Output = ();
}

fn panic_text(runtime: &mut Runtime, text: &str) -> String {
    let client = runtime.client();
    let error = runtime
        .block_on(client.spawn_on(Rank::ZERO, Boom(text.into())))
        .unwrap_err();
    match error {
        RuntimeError::Remote {
            kind: FailureKind::Panicked,
            text,
            ..
        } => text,
        other => panic!("a handler's panic failed as {other:?}"),
    }
}

#[test]
fn the_hook_keeps_the_text_chains_to_the_users_hook_and_says_when_replaced() {
    // The user's hook, set before the runtime starts: it keeps running.
    let seen = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&seen);
    panic::set_hook(Box::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    }));

    let world = WorldSize::new(1).unwrap();
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded).unwrap();
    let mut builder =
        Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
    builder
        .register::<Boom, _>(|Boom(text)| panic!("{text}"))
        .unwrap();
    let hello = builder.hello().unwrap();
    let (handle, driver) = network.endpoint(Rank::ZERO, hello.handle).unwrap();
    let mut runtime = builder.start(handle, driver).unwrap();

    assert_eq!(panic_text(&mut runtime, "first, whole"), "first, whole");
    assert_eq!(
        panic_text(&mut runtime, "two\nlines"),
        "two\nlines",
        "the message is kept without the location"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "the user's hook ran for each"
    );

    // A hook set after the runtime started replaces dinah's: the failure
    // is still typed, and says that its text was not kept.
    panic::set_hook(Box::new(|_| {}));
    let text = panic_text(&mut runtime, "not kept");
    assert!(text.contains("was not kept"), "{text}");
    assert!(!text.contains("not kept\n"), "{text}");
    let report = runtime.shutdown(Duration::from_secs(5)).unwrap();
    assert!(report.is_clean(), "{report:?}");
}
