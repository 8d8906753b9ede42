//! The transport hello of a bare transport (no runtime, an empty
//! registry), for the TCP tests that drive transports directly.

use dinah_core::{Fingerprint, ProtocolLimits};
use dinah_std::transport::{HandleConfig, TransportHello};

/// The fingerprint of an empty registry.
pub(crate) fn fingerprint() -> Fingerprint {
    Fingerprint::of(&mut []).unwrap()
}

/// The hello of run `run_id`: default limits, an empty registry, small
/// queues, no admission capacity advertised.
pub(crate) fn transport_hello(run_id: u64) -> TransportHello {
    TransportHello {
        run_id,
        protocol_limits: ProtocolLimits::DEFAULT,
        fingerprint: fingerprint(),
        handle: HandleConfig {
            action_queue: 64,
            control_queue: 16,
            retained_bytes: 1 << 20,
            admission_capacity: 0,
        },
    }
}
