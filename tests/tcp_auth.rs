//! The run key: ranks that hold it set up, a rank or a stranger without it
//! never takes a rank's place, a wrong key is a typed error naming the
//! peer on both sides, and the key never shows in `Debug` or errors. Also
//! the other set-up refusals between genuine ranks, named on both sides.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use dinah_core::wire::{Channel, HELLO_LEN, Hello, HelloAuth, HelloField};
use dinah_core::{Fingerprint, ProtocolLimits, WorldSize};
use dinah_std::transport::{TransportHandle, TransportHello};
use dinah_tcp::{Membership, RunKey, TcpConfig, TcpDriver, TcpError, TcpTransport};

#[path = "support/bare_hello.rs"]
mod bare_hello;

const RUN_ID: u64 = 0xa07;

fn transport_hello() -> TransportHello {
    bare_hello::transport_hello(RUN_ID)
}

/// A short set-up: the refused side's partner gives up soon.
fn config() -> TcpConfig {
    TcpConfig::default()
        .with_setup_timeout(Duration::from_millis(800))
        .with_hello_timeout(Duration::from_millis(500))
}

type Connected = Result<(TransportHandle, TcpDriver), TcpError>;

fn start(membership: Membership, config: TcpConfig) -> JoinHandle<Connected> {
    thread::spawn(move || TcpTransport::connect_with(membership, transport_hello(), config))
}

fn pair() -> (Membership, Membership) {
    let mut members = Membership::loopback(WorldSize::new(2).unwrap()).unwrap();
    let one = members.pop().unwrap();
    let zero = members.pop().unwrap();
    (zero, one)
}

#[test]
fn ranks_that_share_the_key_set_up() {
    let (zero, one) = pair();
    assert!(zero.has_key() && one.has_key());
    let zero = start(zero, config());
    let one = start(one, config());
    let (_, zero_driver) = zero.join().unwrap().expect("rank 0 connects");
    one.join().unwrap().expect("rank 1 connects");
    assert_eq!(zero_driver.rejected_total(), 0);
}

#[test]
fn a_rank_with_another_key_is_refused_naming_it_on_both_sides() {
    let (zero, one) = pair();
    let one = one.with_key(RunKey::generate().unwrap());
    let zero = start(zero, config());
    let error = start(one, config()).join().unwrap().unwrap_err();
    assert!(
        matches!(error, TcpError::AuthFailed { peer: Some(peer), .. } if peer.get() == 0),
        "{error}"
    );
    assert!(error.to_string().contains("rank 0"), "{error}");
    // Rank 0 never counted it: its set-up times out, naming the refusal.
    let error = zero.join().unwrap().unwrap_err();
    let TcpError::SetupTimeout {
        missing: 2,
        last_refused: Some(refused),
    } = &error
    else {
        panic!("{error}")
    };
    assert!(
        matches!(**refused, TcpError::AuthFailed { peer: Some(peer), .. } if peer.get() == 1),
        "{error}"
    );
    assert!(
        error.to_string().contains("failed to prove the run key"),
        "{error}"
    );
}

#[test]
fn a_listener_refuses_a_dialler_whose_tag_is_wrong() {
    // The stranger knows the run's hello (run ID, registry, limits) and
    // claims rank 1, but not the key: it sends a made-up tag.
    let (zero, one) = pair();
    let addr = zero.addrs()[0];
    let zero = start(zero, TcpConfig::default());
    let world = WorldSize::new(2).unwrap();
    let claim = Hello::new(
        u128::from(RUN_ID),
        world.rank(1).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
        Fingerprint::of(&mut []).unwrap(),
        Channel::Action,
    )
    .unwrap()
    .with_auth(HelloAuth::HmacSha256);
    let mut stranger = TcpStream::connect(addr).unwrap();
    stranger.write_all(&claim.encode()).unwrap();
    stranger.write_all(&[7; 32]).unwrap();
    // The listener answers with its hello, nonce and tag ...
    let mut answer = [0; HELLO_LEN + 64];
    stranger.read_exact(&mut answer).unwrap();
    let theirs = Hello::decode(&answer[..HELLO_LEN]).unwrap();
    assert_eq!(theirs.auth, HelloAuth::HmacSha256);
    // ... and closes on the stranger's made-up tag.
    stranger.write_all(&[9; 32]).unwrap();
    let mut rest = Vec::new();
    let closed = match stranger.read_to_end(&mut rest) {
        Ok(_) => rest.is_empty(),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed);
    // The genuine rank 1 still gets its place.
    one_joins(zero, one);
}

/// Rank 1 connects; rank 0's set-up finishes with the stranger's refusal
/// recorded.
fn one_joins(zero: JoinHandle<Connected>, one: Membership) {
    let one = start(one, TcpConfig::default());
    one.join().unwrap().expect("rank 1 connects");
    let (_, zero_driver) = zero.join().unwrap().expect("rank 0 connects");
    let rejected = zero_driver.rejected();
    assert!(
        matches!(rejected, [TcpError::AuthFailed { peer: Some(peer), .. }] if peer.get() == 1),
        "{rejected:?}"
    );
}

#[test]
fn a_rank_without_the_proof_and_one_with_it_name_the_difference() {
    let (zero, one) = pair();
    let one = one.without_authentication();
    let zero = start(zero, config());
    let error = start(one, config()).join().unwrap().unwrap_err();
    assert!(
        matches!(&error, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::Authentication),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("authentication differs (local none, remote HMAC-SHA256)"),
        "{error}"
    );
    let error = zero.join().unwrap().unwrap_err();
    assert!(
        matches!(&error, TcpError::SetupTimeout { last_refused: Some(refused), .. }
            if matches!(&**refused, TcpError::Mismatch { mismatch, .. }
                if mismatch.field == HelloField::Authentication)),
        "{error}"
    );
}

#[test]
fn ranks_of_different_registries_name_both_fingerprints_on_both_sides() {
    let (zero, one) = pair();
    let zero = start(zero, config());
    let mut other = transport_hello();
    other.fingerprint = Fingerprint::from_u128(0xbeef);
    let one = thread::spawn(move || TcpTransport::connect_with(one, other, config()));
    let error = one.join().unwrap().unwrap_err();
    assert!(
        matches!(&error, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::Fingerprint),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("000000000000000000000000000beef"),
        "{error}"
    );
    let error = zero.join().unwrap().unwrap_err();
    assert!(
        matches!(&error, TcpError::SetupTimeout { last_refused: Some(refused), .. }
            if matches!(&**refused, TcpError::Mismatch { mismatch, .. }
                if mismatch.field == HelloField::Fingerprint)),
        "{error}"
    );
    assert!(
        error.to_string().contains("registry fingerprint differs"),
        "{error}"
    );
}

#[test]
fn no_key_and_no_opt_out_is_an_error_before_any_connection() {
    if std::env::var_os("DINAH_KEY").is_some() || std::env::var_os("DINAH_KEY_FILE").is_some() {
        // The environment holds a key: this case cannot arise here.
        return;
    }
    let world = WorldSize::new(2).unwrap();
    let (zero, _) = pair();
    let addrs = zero.addrs().to_vec();
    let bare = Membership::new(world.rank(1).unwrap(), world, addrs).unwrap();
    assert!(!bare.has_key());
    let error = TcpTransport::connect_with(bare, transport_hello(), config()).unwrap_err();
    assert!(matches!(error, TcpError::NoKey), "{error}");
}

#[test]
fn the_key_never_shows() {
    let key = RunKey::generate().unwrap();
    let hex = key.to_hex();
    let (zero, one) = pair();
    let one = one.with_key(key.clone());
    for shown in [
        format!("{key:?}"),
        format!("{one:?}"),
        format!("{zero:?}"),
        format!("{:?}", TcpConfig::default()),
    ] {
        assert!(!shown.contains(&hex), "{shown}");
        assert!(!shown.contains(&hex[..8]), "{shown}");
    }
    // Nor in the errors of a failed proof.
    let zero = start(zero, config());
    let error = start(one, config()).join().unwrap().unwrap_err();
    let (shown, debug) = (error.to_string(), format!("{error:?}"));
    assert!(!shown.contains(&hex[..8]) && !debug.contains(&hex[..8]));
    drop(zero.join());
}
