//! Reading who this process is from the variables its launcher set.
//!
//! Every launcher names the rank and the world size differently; the first
//! pair found wins, in this order: dinah's own (`DINAH_RANK`,
//! `DINAH_WORLD_SIZE`, set by `dinah-run` or by hand), OpenMPI's
//! (`OMPI_COMM_WORLD_RANK`/`_SIZE`), PMI's as MPICH's Hydra and Intel MPI
//! set them (`PMI_RANK`/`PMI_SIZE`), PMIx's (`PMIX_RANK`, with the size from
//! `OMPI_COMM_WORLD_SIZE` or `SLURM_NTASKS`), and Slurm's (`SLURM_PROCID`,
//! `SLURM_NTASKS`). MPI launchers come before Slurm because `mpirun` inside
//! a Slurm allocation inherits the batch step's `SLURM_PROCID`.

use std::ffi::OsString;
use std::fmt;

use dinah_core::{Rank, WorldSize};
use sha2::{Digest, Sha256};

use crate::launch_error::{EnvProblem, LaunchError};
use crate::launcher::{ENV_RANK, ENV_RUN_ID, ENV_WORLD_SIZE, MAX_RANKS};

/// Which launcher started this process, as its environment tells.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Launcher {
    /// `dinah-run` (`DINAH_LAUNCHER` is set).
    DinahRun,
    /// Someone who set `DINAH_RANK` and `DINAH_WORLD_SIZE` by hand.
    Manual,
    /// OpenMPI's `mpirun` (`OMPI_COMM_WORLD_RANK`).
    OpenMpi,
    /// A launcher speaking PMI-1/2, such as MPICH's Hydra `mpiexec`
    /// (`PMI_RANK`).
    Pmi,
    /// A PMIx launcher (`PMIX_RANK`): PRRTE, or `srun --mpi=pmix`.
    Pmix,
    /// Slurm's `srun` (`SLURM_PROCID`).
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DinahRun => "dinah-run",
            Self::Manual => "DINAH_RANK",
            Self::OpenMpi => "OpenMPI",
            Self::Pmi => "PMI",
            Self::Pmix => "PMIx",
            Self::Slurm => "Slurm",
        })
    }
}

/// Where each launcher keeps the rank and the world size.
const SOURCES: [(Launcher, &str, &[&str]); 5] = [
    (Launcher::Manual, ENV_RANK, &[ENV_WORLD_SIZE]),
    (
        Launcher::OpenMpi,
        "OMPI_COMM_WORLD_RANK",
        &["OMPI_COMM_WORLD_SIZE"],
    ),
    (Launcher::Pmi, "PMI_RANK", &["PMI_SIZE"]),
    (
        Launcher::Pmix,
        "PMIX_RANK",
        &["OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"],
    ),
    (
        Launcher::Slurm,
        "SLURM_PROCID",
        &["SLURM_NTASKS", "SLURM_NPROCS"],
    ),
];

/// Variables that name one job of each launcher, from which ranks started
/// together derive the same run ID when `DINAH_RUN_ID` is not set.
const JOB_IDS: [(Launcher, &[&str]); 4] = [
    (
        Launcher::OpenMpi,
        &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"],
    ),
    (Launcher::Pmi, &["PMI_KVSNAME"]),
    (Launcher::Pmix, &["PMIX_NAMESPACE"]),
    (Launcher::Slurm, &["SLURM_JOB_ID", "SLURM_STEP_ID"]),
];

/// The environment, read through a lookup function (the process's own, or
/// a table in tests).
pub(crate) struct Vars<F>(pub(crate) F);

impl<F: Fn(&str) -> Option<OsString>> Vars<F> {
    /// The value of `name`, `None` if it is not set.
    ///
    /// # Errors
    ///
    /// [`EnvProblem::NotUnicode`].
    pub(crate) fn get(&self, name: &'static str) -> Result<Option<String>, LaunchError> {
        match (self.0)(name) {
            None => Ok(None),
            Some(value) => value
                .into_string()
                .map(Some)
                .map_err(|_| env_error(name, EnvProblem::NotUnicode)),
        }
    }

    /// The value of `name`, parsed by `parse`; `None` if it is not set.
    pub(crate) fn parse<T>(
        &self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, LaunchError> {
        match self.get(name)? {
            None => Ok(None),
            Some(text) => parse(text.trim())
                .map(Some)
                .ok_or(env_error(name, EnvProblem::Invalid)),
        }
    }

    /// The value of `name`, which must be set.
    pub(crate) fn require<T>(
        &self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, LaunchError> {
        self.parse(name, parse)?
            .ok_or(env_error(name, EnvProblem::Missing))
    }

    /// The launcher, this rank and the world size, from the first source
    /// whose rank variable is set.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Env`] naming `DINAH_RANK` if no source is set, or
    /// the variable that is missing or invalid in the first source found
    /// (a rank outside the world is an invalid rank).
    pub(crate) fn placement(&self) -> Result<(Launcher, Rank, WorldSize), LaunchError> {
        for (launcher, rank_var, world_vars) in SOURCES {
            let Some(rank) = self.parse(rank_var, |s| s.parse::<u32>().ok())? else {
                continue;
            };
            let mut world = None;
            for &var in world_vars {
                world = self.parse(var, |s| {
                    s.parse()
                        .ok()
                        .filter(|&n| n <= MAX_RANKS)
                        .and_then(|n| WorldSize::new(n).ok())
                })?;
                if world.is_some() {
                    break;
                }
            }
            let world = world.ok_or(env_error(world_vars[0], EnvProblem::Missing))?;
            let rank = world
                .rank(rank)
                .map_err(|_| env_error(rank_var, EnvProblem::Invalid))?;
            return Ok((launcher, rank, world));
        }
        Err(env_error(ENV_RANK, EnvProblem::Missing))
    }

    /// The run ID: `DINAH_RUN_ID` if set; else a digest of the launcher's
    /// job identity (so that every rank of one job derives the same ID
    /// and another job another); else a digest of `fallback`, the text
    /// every rank shares (the coordinator's address, the hostfile).
    pub(crate) fn run_id(&self, launcher: Launcher, fallback: &str) -> Result<u64, LaunchError> {
        if let Some(id) = self.parse(ENV_RUN_ID, |s| s.parse().ok())? {
            return Ok(id);
        }
        let names = JOB_IDS
            .iter()
            .find(|(which, _)| *which == launcher)
            .map_or(&[][..], |(_, names)| *names);
        let mut job = String::new();
        for &name in names {
            if let Some(value) = self.get(name)? {
                job.push_str(name);
                job.push('=');
                job.push_str(&value);
                job.push(';');
                if launcher != Launcher::Slurm {
                    // One name is enough; Slurm's job and step go together.
                    break;
                }
            }
        }
        Ok(if job.is_empty() {
            digest("dinah run", fallback)
        } else {
            digest("dinah job", &job)
        })
    }
}

/// The first eight bytes of `SHA-256(label ‖ 0 ‖ text)`, little-endian.
fn digest(label: &str, text: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(label.as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    let bytes: [u8; 32] = hash.finalize().into();
    let mut head = [0; 8];
    head.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(head)
}

pub(crate) fn env_error(var: &'static str, problem: EnvProblem) -> LaunchError {
    LaunchError::Env { var, problem }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A lookup over `pairs`.
    pub(crate) fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn placement(pairs: &[(&str, &str)]) -> Result<(Launcher, u32, u32), LaunchError> {
        Vars(vars(pairs))
            .placement()
            .map(|(launcher, rank, world)| (launcher, rank.get(), world.get()))
    }

    fn problem(pairs: &[(&str, &str)]) -> (&'static str, EnvProblem) {
        match placement(pairs) {
            Err(LaunchError::Env { var, problem }) => (var, problem),
            other => panic!("expected an environment error, got {other:?}"),
        }
    }

    #[test]
    fn each_launcher_is_read() {
        let cases: [(&[(&str, &str)], Launcher); 6] = [
            (
                &[("DINAH_RANK", "1"), ("DINAH_WORLD_SIZE", "3")],
                Launcher::Manual,
            ),
            (
                &[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "3")],
                Launcher::OpenMpi,
            ),
            (&[("PMI_RANK", "1"), ("PMI_SIZE", "3")], Launcher::Pmi),
            (&[("PMIX_RANK", "1"), ("SLURM_NTASKS", "3")], Launcher::Pmix),
            (
                &[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "3")],
                Launcher::Slurm,
            ),
            (
                &[("SLURM_PROCID", "1"), ("SLURM_NPROCS", "3")],
                Launcher::Slurm,
            ),
        ];
        for (pairs, launcher) in cases {
            assert_eq!(placement(pairs).unwrap(), (launcher, 1, 3), "{pairs:?}");
        }
    }

    #[test]
    fn mpi_variables_win_over_the_allocations() {
        // `mpirun` inside a Slurm batch step: the step's own SLURM_PROCID
        // is 0 on every rank; OpenMPI's variables are the ranks'.
        let pairs = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ];
        assert_eq!(placement(&pairs).unwrap(), (Launcher::OpenMpi, 2, 4));
        let pairs = [
            ("DINAH_RANK", "3"),
            ("DINAH_WORLD_SIZE", "4"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "4"),
        ];
        assert_eq!(placement(&pairs).unwrap(), (Launcher::Manual, 3, 4));
    }

    #[test]
    fn a_bad_or_missing_variable_is_named() {
        assert_eq!(problem(&[]), (ENV_RANK, EnvProblem::Missing));
        assert_eq!(
            problem(&[("PMI_RANK", "1")]),
            ("PMI_SIZE", EnvProblem::Missing)
        );
        assert_eq!(
            problem(&[("PMIX_RANK", "1")]),
            ("OMPI_COMM_WORLD_SIZE", EnvProblem::Missing)
        );
        assert_eq!(
            problem(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")]),
            ("SLURM_PROCID", EnvProblem::Invalid),
            "outside the world"
        );
        assert_eq!(
            problem(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "4")]),
            ("SLURM_PROCID", EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&[("PMI_RANK", "0"), ("PMI_SIZE", "0")]),
            ("PMI_SIZE", EnvProblem::Invalid)
        );
        assert_eq!(
            problem(&[("PMI_RANK", "0"), ("PMI_SIZE", "5000")]),
            ("PMI_SIZE", EnvProblem::Invalid),
            "beyond MAX_RANKS"
        );
    }

    #[test]
    fn run_ids_follow_the_job() {
        let id =
            |pairs: &[(&str, &str)], launcher| Vars(vars(pairs)).run_id(launcher, "x").unwrap();
        assert_eq!(id(&[("DINAH_RUN_ID", "42")], Launcher::Slurm), 42);
        let job = |j: &'static str, s: &'static str| {
            id(
                &[("SLURM_JOB_ID", j), ("SLURM_STEP_ID", s)],
                Launcher::Slurm,
            )
        };
        assert_eq!(job("7", "0"), job("7", "0"), "every rank of a step agrees");
        assert_ne!(job("7", "0"), job("7", "1"), "another step is another run");
        assert_ne!(job("7", "0"), job("8", "0"));
        let ns = |n: &'static str| id(&[("PMIX_NAMESPACE", n)], Launcher::OpenMpi);
        assert_ne!(ns("1"), ns("2"));
        // Without a job: the shared text decides.
        let plain = |fallback| Vars(vars(&[])).run_id(Launcher::Manual, fallback).unwrap();
        assert_eq!(plain("10.0.0.1:7000"), plain("10.0.0.1:7000"));
        assert_ne!(plain("10.0.0.1:7000"), plain("10.0.0.1:7001"));
        assert!(matches!(
            Vars(vars(&[("DINAH_RUN_ID", "x")])).run_id(Launcher::Manual, ""),
            Err(LaunchError::Env {
                var: ENV_RUN_ID,
                problem: EnvProblem::Invalid
            })
        ));
    }
}
