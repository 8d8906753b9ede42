//! Starting the ranks of a dinah run over TCP, and a rank's side of it.
//!
//! - **`dinah-run`** (the binary of this crate, and [`launcher`], the
//!   library behind it) starts N copies of a program on one machine, as
//!   `mpirun` does, hands every rank every rank's address, prefixes their
//!   output, passes Ctrl-C on, and fails the run when a rank fails.
//! - **A rank** reads who it is from whichever launcher started it
//!   ([`LaunchEnv::from_env`]: `dinah-run`, Slurm's `srun`, OpenMPI's
//!   `mpirun`, MPICH's `mpiexec`, a PMIx launcher, or variables set by
//!   hand) and meets the other ranks ([`LaunchEnv::rendezvous`]): through
//!   `dinah-run`, through rank 0 as the coordinator of an authenticated
//!   rendezvous, or from a static hostfile. The [`Rendezvous`] it returns
//!   is what the TCP transport connects with
//!   (`dinah_tcp::Membership::from(rendezvous)`, or all at once with
//!   `dinah_tcp::Membership::from_env()`).
//! - **The run key** ([`RunKey`]): the secret every rank of an
//!   authenticated run shares, proven with HMAC-SHA256 over fresh nonces
//!   during the rendezvous and the transport's set-up.
//!
//! `docs/launcher.md` in the repository describes both sides, the
//! environment variables and the control protocol.
//!
//! # Platform
//!
//! Unix: the launcher runs each rank in a process group of its own, signals
//! those groups, and catches `SIGINT` and `SIGTERM`.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod env;
mod key;
mod launch_error;
pub mod launcher;
pub mod listener;

pub use env::{
    AddressSource, Authentication, ENV_BIND, ENV_COORDINATOR, ENV_HOSTFILE, EXIT_LAUNCHER_GONE,
    HostfileError, LaunchEnv, Launcher, Rendezvous, RendezvousParts,
};
pub use key::{ENV_KEY, ENV_KEY_FILE, KeyError, NONCE_LEN, RunKey, TAG_LEN, nonce};
pub use launch_error::{EnvProblem, LaunchError, LaunchOp, LaunchPhase};
