//! The `tracing` feature: a run of two ranks over TCP, with a stranger at
//! set-up and a rank that leaves without a shutdown, emits the events a
//! user acts on (set-up with its refusals, the refused stranger, the peer
//! down with its reason, the shutdown with its counts), with ranks and
//! counts, and never the run key.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::TcpStream;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use dinah::core::{ProtocolLimits, RuntimeLimits, WorldSize};
use dinah::std::Runtime;
use dinah::tcp::{Membership, RunKey, TcpTransport};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every event's fields, as `name=value` text, in order.
static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records events; has no spans.
struct Recorder;

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut text = String::new();
        event.record(&mut Fields(&mut text));
        EVENTS.lock().unwrap().push(text);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

fn events_with(text: &str) -> Vec<String> {
    EVENTS
        .lock()
        .unwrap()
        .iter()
        .filter(|event| event.contains(text))
        .cloned()
        .collect()
}

#[test]
fn set_up_strangers_peers_down_and_shutdown_are_traced_without_the_key() {
    tracing::subscriber::set_global_default(Recorder).expect("the only subscriber");
    let key = RunKey::generate().unwrap();
    let world = WorldSize::new(2).unwrap();
    let mut members: Vec<Membership> = Membership::loopback(world)
        .unwrap()
        .into_iter()
        .map(|m| m.with_key(key.clone()))
        .collect();
    let one = members.pop().unwrap();
    let zero = members.pop().unwrap();
    // A stranger at rank 0's listener before anyone sets up.
    let mut stranger = TcpStream::connect(zero.addrs()[0]).unwrap();
    stranger.write_all(&[0xab; 100]).unwrap();
    // Rank 1 leaves (without a shutdown) once rank 0 is through the
    // barrier; rank 0 then sees it go down.
    let (through, wait_through) = std::sync::mpsc::channel::<()>();
    let start = |membership: Membership| {
        let builder =
            Runtime::builder(9, ProtocolLimits::default(), RuntimeLimits::default()).unwrap();
        let (handle, driver) = TcpTransport::connect(membership, builder.hello().unwrap()).unwrap();
        let mut runtime = builder.start(handle, driver).unwrap();
        runtime.barrier(Duration::from_secs(30)).unwrap();
        runtime
    };
    let one = thread::spawn(move || {
        let runtime = start(one);
        wait_through.recv().unwrap();
        drop(runtime);
    });
    let mut runtime = start(zero);
    through.send(()).unwrap();
    // Fails once rank 1 is down.
    let _ = runtime.barrier(Duration::from_secs(10));
    let report = runtime.shutdown(Duration::from_secs(10));
    assert!(report.as_ref().is_ok_and(|r| r.is_clean()), "{report:?}");
    one.join().unwrap();
    drop(stranger);

    let set_up = events_with("dinah-tcp: set-up complete");
    assert_eq!(set_up.len(), 2, "{set_up:?}");
    assert!(
        set_up
            .iter()
            .any(|e| e.contains("rank=0 ") && e.contains("refused=1 ")),
        "{set_up:?}"
    );
    let refused = events_with("dinah-tcp: refused a connection");
    assert!(
        refused.iter().any(|e| e.contains("bad hello magic")),
        "{refused:?}"
    );
    let down = events_with("dinah-tcp: peer down");
    assert!(
        down.iter()
            .any(|e| e.contains("rank=0 ") && e.contains("peer=1 ")),
        "{down:?}"
    );
    let shut = events_with("dinah: runtime shut down");
    assert!(
        shut.iter()
            .any(|e| e.contains("rank=0 ") && e.contains("clean=true ")),
        "{shut:?}"
    );
    let hex = key.to_hex();
    for event in EVENTS.lock().unwrap().iter() {
        assert!(!event.contains(&hex[..16]), "the key in an event: {event}");
    }
}
