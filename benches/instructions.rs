//! The runtime's own cost counted in instructions, not seconds: two ranks
//! over the in-memory transport in stepped mode, driven by one thread
//! (progress rank 0, progress rank 1, step the network), so a run is the
//! same sequence of instructions every time, whatever else the machine
//! does. Each case runs under `valgrind --tool=callgrind` twice, with N and
//! 2N actions after the same warm-up, and the difference divided by N is
//! the cost of one action in steady state (set-up and warm-up cancel out).
//! The same difference of the locked instructions (atomic
//! read-modify-writes, found with `objdump`; see `support/locked.rs`) is
//! reported beside it: each costs more than its count suggests.
//!
//! Cases: the floor (the same request and response frames pushed through
//! the same transport by hand, the peer answering each request with a
//! prebuilt response), and a dinah no-op action registered inline (the
//! handler runs on the serving owner thread, so every instruction of both
//! ranks is on the one driving thread), each with 1 and 256 in flight.
//! Pooled handlers are left to `benches/runtime.rs`: their worker threads
//! wait by spinning and parking, which callgrind would count as work.
//!
//! ```sh
//! cargo xtask bench instructions     # needs valgrind and objdump
//! ```
//!
//! With `--test` (the CI smoke lane) every case runs natively for a few
//! hundred actions and its results are checked; nothing is counted.
#![expect(
    clippy::print_stdout,
    reason = "the benchmark reports its measurements"
)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::{Call, Channel, Message, RelativeDeadline};
use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah_std::transport::{HandleConfig, TransportDriver, TransportEvent, TransportHandle};
use dinah_std::{Action, Runtime};

#[path = "support/frames.rs"]
mod frames;
#[path = "support/limits.rs"]
mod limits;
#[path = "support/locked.rs"]
mod locked;
#[path = "support/noop.rs"]
mod noop;
use frames::raw_frame;
use limits::limits;
use noop::Noop;

/// One tick of the stepped network: a fast network's latency.
const TICK: Duration = Duration::from_micros(1);

/// Actions before the counted ones: twice the serving rank's dedup table,
/// so it is full and every new request evicts the oldest finished entry
/// (the steady state of a long-lived runtime).
fn warm_up() -> u64 {
    2 * u64::from(limits().max_dedup_entries)
}

/// Actions counted per case (the second run counts twice as many).
const COUNTED: u64 = 20_000;

/// Actions per case in the `--test` smoke run.
const SMOKE: u64 = 300;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Frames by hand: the transport alone.
    Raw,
    /// A dinah no-op registered inline.
    Inline,
}

#[derive(Clone, Copy)]
struct Case {
    kind: Kind,
    in_flight: usize,
}

impl Case {
    const ALL: [Self; 4] = [
        Self {
            kind: Kind::Raw,
            in_flight: 1,
        },
        Self {
            kind: Kind::Inline,
            in_flight: 1,
        },
        Self {
            kind: Kind::Raw,
            in_flight: 256,
        },
        Self {
            kind: Kind::Inline,
            in_flight: 256,
        },
    ];

    fn name(self) -> String {
        let kind = match self.kind {
            Kind::Raw => "raw",
            Kind::Inline => "inline",
        };
        format!("{kind}-{}", self.in_flight)
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|case| case.name() == name)
    }

    /// Runs `warm_up` then `actions` actions; returns how many answered.
    fn run(self, warm_up: u64, actions: u64) -> u64 {
        let network = SimNetwork::with_mode(
            WorldSize::new(2).expect("two ranks"),
            1,
            FaultPlan::new(),
            SimMode::Stepped { tick: TICK },
        )
        .expect("a stepped network");
        match self.kind {
            Kind::Raw => RawPair::new(&network).run(&network, self.in_flight, warm_up + actions),
            Kind::Inline => {
                DinahPair::new(&network).run(&network, self.in_flight, warm_up + actions)
            }
        }
    }
}

/// Two runtimes over `network`, the no-op registered inline.
struct DinahPair {
    runtimes: [Runtime; 2],
}

impl DinahPair {
    fn new(network: &SimNetwork) -> Self {
        let world = network.world();
        let start = |rank: u32| {
            let mut builder =
                Runtime::builder(1, ProtocolLimits::default(), limits()).expect("valid limits");
            builder
                .register_inline::<Noop, _>(dinah_std::DEFAULT_DOMAIN, |Noop(n)| Ok(n))
                .expect("registers");
            builder.clock(std::sync::Arc::new(network.clock()));
            let hello = builder.hello().expect("a hello");
            let (handle, driver) = network
                .endpoint(world.rank(rank).expect("in the world"), hello.handle)
                .expect("an endpoint");
            builder.start(handle, driver).expect("starts")
        };
        Self {
            runtimes: [start(0), start(1)],
        }
    }

    fn run(mut self, network: &SimNetwork, in_flight: usize, total: u64) -> u64 {
        let client = self.runtimes[0].client();
        let peer = Rank::new(1, network.world()).expect("rank 1");
        let mut cx = Context::from_waker(Waker::noop());
        let mut waiting = VecDeque::with_capacity(in_flight);
        let (mut issued, mut answered) = (0, 0);
        while answered < total {
            while waiting.len() < in_flight && issued < total {
                waiting.push_back((issued, client.spawn_on(peer, Noop(issued))));
                issued += 1;
            }
            for runtime in &mut self.runtimes {
                runtime.progress();
            }
            network.step();
            while let Some((sent, future)) = waiting.front_mut() {
                let Poll::Ready(output) = Pin::new(future).poll(&mut cx) else {
                    break;
                };
                assert_eq!(output.expect("the no-op answers"), *sent);
                waiting.pop_front();
                answered += 1;
            }
        }
        // A stepped network's time moves only when stepped, so a shutdown
        // here would wait forever for its peer; the process ends instead.
        std::mem::forget(self);
        answered
    }
}

/// The floor: the same frames through the same transport, by hand.
struct RawPair {
    ends: [(TransportHandle, dinah_std::transport::memory::SimDriver); 2],
    request: Vec<u8>,
    response: Vec<u8>,
}

impl RawPair {
    fn new(network: &SimNetwork) -> Self {
        let world = network.world();
        let call = Call {
            request: RequestId::MIN,
            action: ActionId::new(Noop::ID).expect("non-zero"),
            domain: DomainId::MIN,
            trace: None,
        };
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).expect("non-zero");
        let end = |rank: u32| {
            network
                .endpoint(
                    world.rank(rank).expect("in the world"),
                    HandleConfig::default(),
                )
                .expect("an endpoint")
        };
        Self {
            ends: [end(0), end(1)],
            request: raw_frame(Rank::ZERO, Message::Request { call, deadline }, 8),
            response: raw_frame(world.rank(1).expect("rank 1"), Message::Result { call }, 8),
        }
    }

    fn run(mut self, network: &SimNetwork, in_flight: usize, total: u64) -> u64 {
        let peer = Rank::new(1, network.world()).expect("rank 1");
        let mut events = Vec::new();
        let (mut waiting, mut issued, mut answered) = (0, 0, 0);
        while answered < total {
            while waiting < in_flight && issued < total {
                self.ends[0]
                    .0
                    .try_send(peer, Channel::Action, self.request.clone())
                    .expect("room for the request");
                waiting += 1;
                issued += 1;
            }
            for (rank, (handle, driver)) in self.ends.iter_mut().enumerate() {
                events.clear();
                let _ = driver.poll(1024, &mut events);
                let mut responded = false;
                for event in events.drain(..) {
                    let TransportEvent::Frame { from, frame, .. } = event else {
                        continue;
                    };
                    if rank == 1 {
                        handle
                            .try_send(from, Channel::Action, self.response.clone())
                            .expect("room for the response");
                        responded = true;
                    } else {
                        assert_eq!(frame.len(), self.response.len());
                        waiting -= 1;
                        answered += 1;
                    }
                }
                // As the runtime does: what a round queued leaves in it.
                if responded {
                    let _ = driver.flush(1024, &mut events);
                }
            }
            network.step();
        }
        answered
    }
}

/// Instructions, and locked instructions among them, of one run of `case`
/// under callgrind.
#[expect(
    clippy::disallowed_methods,
    reason = "the harness starts itself under valgrind; the xtask helper is not a dependency of benches"
)]
fn count(case: Case, actions: u64) -> Result<(u64, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("no current executable: {e}"))?;
    let profile = std::env::temp_dir().join(format!(
        "dinah-instructions-{}-{}-{actions}.out",
        std::process::id(),
        case.name()
    ));
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--dump-instr=yes"])
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(exe)
        .args(["--case", &case.name(), "--actions", &actions.to_string()])
        .output()
        .map_err(|e| format!("cannot run valgrind (is it installed?): {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("{} failed under valgrind:\n{stderr}", case.name()));
    }
    let instructions = stderr
        .lines()
        .find_map(|line| {
            let (_, counted) = line.split_once("Collected :")?;
            counted.trim().parse().ok()
        })
        .ok_or_else(|| format!("no instruction count in valgrind's output:\n{stderr}"))?;
    let text = std::fs::read_to_string(&profile)
        .map_err(|e| format!("cannot read {}: {e}", profile.display()))?;
    let _ = std::fs::remove_file(&profile);
    Ok((instructions, locked::count_locked(&text)?))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|at| args.get(at + 1))
    };
    if let Some(name) = value("--case") {
        let case = Case::parse(name).ok_or_else(|| format!("no case named {name}"))?;
        let actions: u64 = value("--actions")
            .and_then(|n| n.parse().ok())
            .ok_or("--actions N is required with --case")?;
        let answered = case.run(warm_up(), actions);
        assert_eq!(answered, warm_up() + actions);
        std::process::exit(0);
    }
    if args.iter().any(|arg| arg == "--test") {
        for case in Case::ALL {
            let answered = case.run(0, SMOKE);
            assert_eq!(answered, SMOKE, "{}", case.name());
            println!(
                "instructions/{}: ran {answered} actions (smoke)",
                case.name()
            );
        }
        return Ok(());
    }
    if !args.iter().any(|arg| arg == "--bench") {
        return Err("run it with `cargo xtask bench instructions`".into());
    }
    println!(
        "benches/instructions: instructions per action (both ranks), {COUNTED} actions \
         after a warm-up of {}, counted by callgrind\n",
        warm_up()
    );
    println!(
        "| case | in flight | instructions per action | ratio to raw | locked instructions per action |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut raw = [0.0; 2];
    for case in Case::ALL {
        let (once, locked_once) = count(case, COUNTED)?;
        let (twice, locked_twice) = count(case, 2 * COUNTED)?;
        let per_action = twice.saturating_sub(once) as f64 / COUNTED as f64;
        let locked = locked_twice.saturating_sub(locked_once) as f64 / COUNTED as f64;
        let column = usize::from(case.in_flight > 1);
        let ratio = match case.kind {
            Kind::Raw => {
                raw[column] = per_action;
                "floor".to_owned()
            }
            Kind::Inline => format!("{:.2}x", per_action / raw[column]),
        };
        let kind = match case.kind {
            Kind::Raw => "raw frames",
            Kind::Inline => "dinah no-op, inline",
        };
        println!(
            "| {kind} | {} | {per_action:.0} | {ratio} | {locked:.1} |",
            case.in_flight
        );
    }
    Ok(())
}
