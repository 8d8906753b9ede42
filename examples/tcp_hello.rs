//! The smallest complete dinah program over TCP, the one
//! `docs/getting-started.md` builds: every rank asks the next one (in a
//! ring) to add two numbers with a typed action, checks the answer, waits
//! at a barrier until every rank has its answer, and shuts down.
//!
//! ```sh
//! cargo build --release --bin dinah-run --example tcp_hello
//! target/release/dinah-run -n 2 -- target/release/examples/tcp_hello
//! ```
//!
//! Each rank learns its rank and the other ranks' addresses from its
//! launcher: `dinah-run`, or `srun`, `mpirun` or `mpiexec` with rank 0 as
//! coordinator (`DINAH_COORDINATOR=host:port` and a run key in
//! `DINAH_KEY`, see `docs/launcher.md`). Started on its own, the program
//! stops with an error naming the missing `DINAH_RANK`. `dinah-run` puts
//! the rank in front of every line a rank prints (`[1] ...`). A wrong sum,
//! or any failure, makes the rank and so the launcher exit non-zero.
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use std::time::Duration;

use dinah::prelude::*;

/// Adds two numbers on the rank it is sent to.
#[derive(WireValue, Action)]
#[action(name = "hello.Add/1", output = u64)]
struct Add(u64, u64);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // This rank, the world size and every rank's address, from the launcher.
    let membership = Membership::from_env()?;
    // Every rank registers the same actions under the same run ID.
    let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
    builder.register::<Add, _>(|Add(a, b)| Ok(a + b))?;
    let (handle, driver) = TcpTransport::connect(membership, builder.hello()?)?;
    let mut runtime = builder.start(handle, driver)?;

    // Ask the next rank to add 100 to this rank's number, and check.
    let (me, world) = (runtime.rank().get(), runtime.world());
    let next = world.rank((me + 1) % world.get())?;
    let sum = runtime.block_on(runtime.client().spawn_on(next, Add(me.into(), 100)))?;
    println!("{me} + 100 = {sum}, computed by rank {}", next.get());
    if sum != u64::from(me) + 100 {
        return Err(format!("wrong sum: {sum}").into());
    }

    // A rank in the barrier keeps serving, so no rank stops while another
    // still waits for its answer; then all shut down together.
    runtime.barrier(Duration::from_secs(30))?;
    runtime.shutdown(Duration::from_secs(10))?;
    println!("shut down cleanly");
    Ok(())
}
