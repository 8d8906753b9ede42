//! Running programs under an MPI launcher: OpenMPI's `mpirun`, or MPICH's
//! `mpiexec.mpich` (Hydra) installed beside it.
//!
//! MPI test targets are the root `tests/mpi_*.rs` files: `harness = false`
//! programs with their own `main` (one `MPI_Init` per process, every case in
//! order on every rank). The `mpi` lane (OpenMPI) and the `mpi-mpich` lane
//! (MPICH) build each against their [`Library`] and run it at the world
//! sizes in [`WORLD_SIZES`], then run the MPI example ([`EXAMPLE`]) at
//! [`EXAMPLE_RANKS`] ranks, as `cargo xtask demo --mpi` does under OpenMPI;
//! a non-zero exit of any rank makes the launcher exit non-zero and fails
//! the lane.
//!
//! A program started by the other library's launcher does not fail: each
//! process runs as a singleton (rank 0 of 1) and exits 0. So each lane
//! checks that its launcher is its library's, that the built programs link
//! its library (`ldd`), and that every run saw the world it launched: the
//! test programs compare their world size with [`EXPECT_WORLD`], and the
//! lane reads the world size the example reports.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cmd::{Cmd, on_path};
use crate::lanes::{LaneRun, rust_file_stems, target_dir};
use crate::project_root;
use crate::setup::{apt_hint, have_libclang, have_mpi, have_mpich, mpich_apt_hint};

/// The world sizes every MPI test runs at.
pub(crate) const WORLD_SIZES: &[u32] = &[1, 2, 4];

/// The MPI example: `examples/mpi_actions.rs`.
pub(crate) const EXAMPLE: &str = "mpi_actions";

/// The world size the MPI example runs at.
pub(crate) const EXAMPLE_RANKS: u32 = 4;

/// The limit for one launch of one program.
const PER_RUN_LIMIT: Duration = Duration::from_secs(180);

/// The variable through which the lanes tell each test program the world
/// size they launched it at; `tests/support/mpi_harness.rs` aborts the job
/// when `MPI_COMM_WORLD` has another size.
pub(crate) const EXPECT_WORLD: &str = "DINAH_EXPECT_WORLD";

/// An MPI library a lane builds against and launches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Library {
    /// Open MPI, the system's default `mpicc` and `mpirun`.
    OpenMpi,
    /// MPICH beside it, under its own names (`mpicc.mpich`,
    /// `mpiexec.mpich`).
    Mpich,
}

impl Library {
    /// The library's name as users know it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::OpenMpi => "Open MPI",
            Self::Mpich => "MPICH",
        }
    }

    /// The shared library (soname) its programs link.
    pub(crate) fn soname(self) -> &'static str {
        match self {
            Self::OpenMpi => "libmpi.so.40",
            Self::Mpich => "libmpich.so.12",
        }
    }

    /// The other library: what a program of this lane must not link.
    fn other(self) -> Self {
        match self {
            Self::OpenMpi => Self::Mpich,
            Self::Mpich => Self::OpenMpi,
        }
    }

    /// The launcher this library's programs run under.
    pub(crate) fn launcher(self) -> &'static str {
        match self {
            Self::OpenMpi => launcher(),
            Self::Mpich => "mpiexec.mpich",
        }
    }

    /// `cmd`, a cargo command, set up to build against this library.
    ///
    /// MPICH builds in its own target directory (`<target>/mpich`) with its
    /// compiler wrapper in `MPICC`: the `mpi-sys` build script does not
    /// watch `MPICC`, so in OpenMPI's target directory it would stay fresh
    /// and the programs would go on linking OpenMPI.
    fn cargo_env(self, cmd: Cmd) -> Cmd {
        match self {
            Self::OpenMpi => cmd,
            Self::Mpich => cmd
                .env("MPICC", "mpicc.mpich")
                .env("CARGO_TARGET_DIR", target_dir().join("mpich")),
        }
    }

    /// A command that starts `ranks` processes of a program under this
    /// library's launcher.
    fn launch(self, lane: &str, ranks: u32) -> Cmd {
        match self {
            Self::OpenMpi => mpirun(lane, ranks),
            // Hydra needs no flags here: it runs as root, oversubscribes
            // and binds nothing by default.
            Self::Mpich => Cmd::new(lane, self.launcher()).args(["-n", &ranks.to_string()]),
        }
    }
}

/// Fails with an install hint unless `library` and libclang are present and
/// `library`'s launcher reports that library.
pub(crate) fn require_toolchain(lane: &str, library: Library) -> Result<()> {
    let (installed, hint) = match library {
        Library::OpenMpi => (have_mpi(), apt_hint()),
        Library::Mpich => (have_mpich(), mpich_apt_hint()),
    };
    if !installed {
        bail!(
            "lane `{lane}`: {} is not installed (no {} and {} on PATH); install it with:\n    {hint}",
            library.name(),
            match library {
                Library::OpenMpi => "mpicc",
                Library::Mpich => "mpicc.mpich",
            },
            library.launcher(),
        );
    }
    if !have_libclang() {
        bail!(
            "lane `{lane}`: libclang is missing (the `mpi` crate's bindgen needs it); install it with:\n    {}",
            apt_hint()
        );
    }
    if !launcher_is(lane, library) {
        bail!(
            "lane `{lane}`: `{} --version` does not report {}, the library this lane tests \
             (a program started by another library's launcher runs as singletons and passes \
             falsely).{}\n    {hint}",
            library.launcher(),
            library.name(),
            match library {
                Library::OpenMpi => {
                    " Make OpenMPI the default again with `update-alternatives --config mpirun` \
                     and `update-alternatives --config mpi`, or install it with:"
                }
                Library::Mpich => " Install MPICH with:",
            }
        );
    }
    Ok(())
}

/// Does `library`'s launcher say it is that library's? OpenMPI's `mpirun`
/// names Open MPI (or OpenRTE), MPICH's is Hydra.
pub(crate) fn launcher_is(lane: &str, library: Library) -> bool {
    let version = Cmd::new(lane, library.launcher())
        .arg("--version")
        .quiet()
        .read()
        .unwrap_or_default();
    match library {
        Library::OpenMpi => version.contains("Open MPI") || version.contains("OpenRTE"),
        Library::Mpich => version.contains("HYDRA"),
    }
}

/// `mpirun` if present, else `mpiexec`.
pub(crate) fn launcher() -> &'static str {
    if on_path("mpirun") {
        "mpirun"
    } else {
        "mpiexec"
    }
}

/// An `mpirun -n ranks` command for `lane` with the environment OpenMPI
/// needs here: running as root, 4 ranks on 2 cores (oversubscription, no
/// core binding) and no cross-memory-attach (often denied in containers).
pub(crate) fn mpirun(lane: &str, ranks: u32) -> Cmd {
    Cmd::new(lane, launcher())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
        .env("OMPI_MCA_hwloc_base_binding_policy", "none")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .args(["-n", &ranks.to_string(), "--oversubscribe"])
}

/// The MPI test programs: root `tests/mpi_*.rs`.
pub(crate) fn test_names() -> Result<Vec<String>> {
    Ok(rust_file_stems(&project_root().join("tests"))?
        .into_iter()
        .filter(|name| name.starts_with("mpi_"))
        .collect())
}

/// Builds one test target of the root package with the `mpi` feature and
/// the MPI transport's test hooks (`mpi-testing`) against `library`, and
/// returns its executable.
fn build_test(lane: &LaneRun, library: Library, name: &str) -> Result<PathBuf> {
    let json = library
        .cargo_env(lane.cargo([
            "test",
            "--no-run",
            "--features",
            "mpi-testing",
            "--message-format=json",
            "--test",
            name,
        ]))
        .read()?;
    executable_from_json(&json, name)
}

/// Picks the `"executable"` of the artifact for test `name` out of cargo's
/// JSON messages (no JSON parser needed: cargo escapes paths as JSON
/// strings and ours contain no quotes).
pub(crate) fn executable_from_json(json: &str, name: &str) -> Result<PathBuf> {
    let target_marker = format!("\"name\":\"{name}\"");
    json.lines()
        .filter(|line| {
            line.contains("\"reason\":\"compiler-artifact\"") && line.contains(&target_marker)
        })
        .find_map(|line| {
            let start = line.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + line[start..].find('"')?;
            Some(PathBuf::from(&line[start..end]))
        })
        .with_context(|| format!("cargo reported no executable for test `{name}`"))
}

/// Fails unless `exe` links `library` and not the other MPI library, as
/// `ldd` reports it.
fn require_linked(lane: &str, library: Library, exe: &Path) -> Result<()> {
    let ldd = Cmd::new(lane, "ldd").arg(exe).quiet().read()?;
    check_linked(&ldd, library)
        .with_context(|| format!("lane `{lane}`: {} links the wrong MPI", exe.display()))?;
    println!(
        "==> [{lane}] {} links {}",
        exe.file_name().map_or_else(
            || exe.display().to_string(),
            |name| name.to_string_lossy().into_owned()
        ),
        library.soname()
    );
    Ok(())
}

/// Checks `ldd`'s output: `library`'s soname is there and the other
/// library's is not.
fn check_linked(ldd: &str, library: Library) -> Result<()> {
    // Each line starts with the soname: `libmpich.so.12 => /usr/lib/...`.
    let linked: Vec<&str> = ldd
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    let other = library.other();
    if linked.contains(&other.soname()) {
        bail!(
            "it links {}'s {} (built in a target directory whose mpi-sys was built against {0}?)",
            other.name(),
            other.soname()
        );
    }
    if !linked.contains(&library.soname()) {
        bail!(
            "it does not link {}'s {}; ldd reports:\n{ldd}",
            library.name(),
            library.soname()
        );
    }
    Ok(())
}

/// The cargo profile the MPI example is built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `dev`: the profile of the test programs, whose dependencies' builds
    /// it reuses.
    Dev,
    /// `release`: what a user runs.
    Release,
}

/// Builds [`EXAMPLE`] with the `mpi` feature in `profile` against
/// `library` and runs it under its launcher at [`EXAMPLE_RANKS`] ranks. The
/// example checks its own answers and exits non-zero on a wrong one or a
/// failed call; that exit, a run longer than the per-run limit, or a run
/// in which the example saw another world size is an error.
pub(crate) fn run_example(lane: &LaneRun, library: Library, profile: Profile) -> Result<()> {
    require_toolchain(lane.name(), library)?;
    let mut build = library.cargo_env(lane.cargo([
        "build",
        "--features",
        "mpi",
        "--example",
        EXAMPLE,
        "--message-format=json",
    ]));
    if profile == Profile::Release {
        build = build.arg("--release");
    }
    // Cargo names the executable (it honours CARGO_TARGET_DIR).
    let exe = executable_from_json(&build.read()?, EXAMPLE)?;
    require_linked(lane.name(), library, &exe)?;
    println!("--- {EXAMPLE} at {EXAMPLE_RANKS} ranks");
    let output = library
        .launch(lane.name(), EXAMPLE_RANKS)
        .arg(exe)
        .timeout(PER_RUN_LIMIT)
        .echo_output()
        .read()?;
    check_example_world(&output, EXAMPLE_RANKS)
        .with_context(|| format!("lane `{}`: {EXAMPLE}", lane.name()))
}

/// Checks the example's report of its world size (`mpi_actions: N
/// rank(s)`, printed by rank 0): there is one, and it says `ranks`. A run
/// as singletons prints one line per process, each saying 1.
fn check_example_world(output: &str, ranks: u32) -> Result<()> {
    let seen: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("mpi_actions: "))
        .filter_map(|rest| rest.strip_suffix(" rank(s)"))
        .collect();
    let expected = ranks.to_string();
    if seen.len() != 1 || seen[0] != expected {
        bail!(
            "launched at {ranks} ranks, but its reports of its world size were {seen:?} \
             (one `{expected}` expected; a launcher of another MPI library starts singletons)"
        );
    }
    Ok(())
}

/// The TCP example that the MPI lanes start under their MPI launcher.
pub(crate) const TCP_EXAMPLE: &str = "tcp_hello";

/// The ranks [`TCP_EXAMPLE`] runs at under an MPI launcher.
pub(crate) const TCP_EXAMPLE_RANKS: u32 = 4;

/// "Host" `rank` of the TCP runs: 127.0.0.(2 + `rank`), one loopback
/// address per rank, as if each ran on a host of its own.
fn tcp_host(rank: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(127, 0, 0, 2)) + rank)
}

/// Sets `DINAH_BIND` to the rank's own host from the launcher's rank
/// variable, then runs the program (`$0`): what a job script does to put
/// ranks on distinct addresses of one machine.
const BIND_PER_RANK: &str =
    r#"r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; DINAH_BIND=127.0.0.$((r + 2)) exec "$0""#;

/// Starts [`TCP_EXAMPLE`], a program of the TCP transport that knows
/// nothing of MPI, under `library`'s launcher at [`TCP_EXAMPLE_RANKS`]
/// ranks, each on its own loopback address, twice: meeting through rank 0
/// as coordinator (`DINAH_COORDINATOR`), then through a hostfile
/// (`DINAH_HOSTFILE`), with a fresh run key (`DINAH_KEY`). Each rank reads
/// its rank from the launcher's variables. Fails unless every rank says it
/// shut down cleanly.
pub(crate) fn run_tcp_example(lane: &LaneRun, library: Library) -> Result<()> {
    require_toolchain(lane.name(), library)?;
    let build = lane.cargo(["build", "--example", TCP_EXAMPLE, "--message-format=json"]);
    let exe = executable_from_json(&build.read()?, TCP_EXAMPLE)?;
    let key = run_key().context("making a run key")?;
    let coordinator = free_addr(tcp_host(0))?;
    run_tcp(
        lane,
        library,
        &exe,
        &[
            ("DINAH_COORDINATOR", coordinator.to_string()),
            ("DINAH_KEY", key.clone()),
        ],
        true,
    )?;
    let mut hosts = String::new();
    for rank in 0..TCP_EXAMPLE_RANKS {
        hosts.push_str(&format!("{rank} {}\n", free_addr(tcp_host(rank))?));
    }
    let hostfile = target_dir().join(format!("{TCP_EXAMPLE}-hosts-{}", std::process::id()));
    std::fs::write(&hostfile, hosts).with_context(|| format!("writing {}", hostfile.display()))?;
    let ran = run_tcp(
        lane,
        library,
        &exe,
        &[
            ("DINAH_HOSTFILE", hostfile.display().to_string()),
            ("DINAH_KEY", key),
        ],
        false,
    );
    let _ = std::fs::remove_file(&hostfile);
    ran
}

/// Where [`free_addr`] looks for ports: below Linux's default ephemeral
/// range (32768 and up), from which the launcher's own listeners take
/// theirs. A port picked there and freed again could be taken by the
/// launcher before the rank binds it, and a rank would then send its
/// hello to the launcher (Hydra failed the run on it).
const FREE_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// An address on `ip` whose port is free now, outside the ephemeral range
/// (see [`FREE_PORTS`]); the search starts at a place set by this
/// process's ID, so that concurrent runs start apart.
fn free_addr(ip: std::net::Ipv4Addr) -> Result<std::net::SocketAddr> {
    let span = u32::from(FREE_PORTS.end - FREE_PORTS.start);
    let start = std::process::id() % span;
    (0..span)
        .map(|step| FREE_PORTS.start + ((start + step) % span) as u16)
        .find_map(|port| {
            std::net::TcpListener::bind((ip, port))
                .and_then(|listener| listener.local_addr())
                .ok()
        })
        .with_context(|| format!("finding a free port on {ip} in {FREE_PORTS:?}"))
}

/// One run of [`TCP_EXAMPLE`] with `vars` in every rank's environment
/// (and, with `bind_per_rank`, each rank on its own host).
fn run_tcp(
    lane: &LaneRun,
    library: Library,
    exe: &Path,
    vars: &[(&str, String)],
    bind_per_rank: bool,
) -> Result<()> {
    let how = vars.first().map_or("", |(name, _)| *name);
    println!(
        "--- {TCP_EXAMPLE} under {} at {TCP_EXAMPLE_RANKS} ranks, {how}",
        library.launcher()
    );
    let mut launch = library.launch(lane.name(), TCP_EXAMPLE_RANKS);
    for (name, value) in vars {
        launch = launch.env(name, value);
        if library == Library::OpenMpi {
            // Handed to the ranks explicitly, as on a cluster.
            launch = launch.args(["-x", name]);
        }
    }
    if bind_per_rank {
        launch = launch.args(["sh", "-c", BIND_PER_RANK]);
    }
    let output = launch
        .arg(exe)
        .timeout(PER_RUN_LIMIT)
        .echo_output()
        .read()?;
    let clean = output
        .lines()
        .filter(|line| line.trim_end() == "shut down cleanly")
        .count();
    if clean != TCP_EXAMPLE_RANKS as usize {
        bail!(
            "lane `{}`: {TCP_EXAMPLE} under {} with {how}: {clean} rank(s) of {TCP_EXAMPLE_RANKS} shut down cleanly",
            lane.name(),
            library.launcher()
        );
    }
    Ok(())
}

/// A fresh run key: 32 bytes from the system's generator, in hex.
fn run_key() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0_u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Builds and runs the MPI tests against `library`: `cargo test -p
/// dinah-mpi`, then every test program at every size in [`WORLD_SIZES`],
/// each told the size it was launched at ([`EXPECT_WORLD`]).
pub(crate) fn run_tests(lane: &LaneRun, library: Library) -> Result<()> {
    require_toolchain(lane.name(), library)?;
    let names = test_names()?;
    if names.is_empty() {
        bail!(
            "lane `{}`: no MPI test programs (tests/mpi_*.rs) found",
            lane.name()
        );
    }
    // The transport crate's own tests: unit tests of its MPI-free logic and
    // doctests (among them the compile-fail proof that its driver is not
    // `Send`).
    library
        .cargo_env(lane.cargo(["test", "--package", "dinah-mpi"]))
        .run()?;
    for name in &names {
        let exe = build_test(lane, library, name)?;
        require_linked(lane.name(), library, &exe)?;
        for &ranks in WORLD_SIZES {
            println!("--- {name} at {ranks} rank(s)");
            library
                .launch(lane.name(), ranks)
                .env(EXPECT_WORLD, ranks.to_string())
                .arg(&exe)
                .timeout(PER_RUN_LIMIT)
                .run()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_executable_of_the_named_test() {
        let json = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"other"},"executable":"/t/other-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"mpi_smoke"},"executable":"/t/mpi_smoke-2"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            executable_from_json(json, "mpi_smoke").unwrap(),
            PathBuf::from("/t/mpi_smoke-2")
        );
        assert!(executable_from_json(json, "missing").is_err());
    }

    #[test]
    fn the_mpi_example_exists() {
        let path = project_root()
            .join("examples")
            .join(format!("{EXAMPLE}.rs"));
        assert!(path.is_file(), "{} is missing", path.display());
    }

    #[test]
    fn mpirun_sets_root_and_oversubscription() {
        let line = mpirun("mpi", 4).arg("prog").display();
        assert!(line.contains("OMPI_ALLOW_RUN_AS_ROOT=1"));
        assert!(line.contains("-n 4 --oversubscribe prog"));
    }

    #[test]
    fn mpich_builds_apart_with_its_wrapper_and_launches_with_hydra() {
        let build = Library::Mpich
            .cargo_env(Cmd::new("mpi-mpich", "cargo"))
            .display();
        assert!(build.contains("MPICC=mpicc.mpich"), "{build}");
        let target = format!("CARGO_TARGET_DIR={}", target_dir().join("mpich").display());
        assert!(build.contains(&target), "{build}");
        let launch = Library::Mpich.launch("mpi-mpich", 2).arg("prog").display();
        assert_eq!(launch, "mpiexec.mpich -n 2 prog");
    }

    /// `ldd` of a test program built against OpenMPI and against MPICH
    /// (abridged).
    const LDD_OPENMPI: &str = "\tlinux-vdso.so.1 (0x00007ffd)\n\
        \tlibmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f01)\n\
        \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n";
    const LDD_MPICH: &str = "\tlinux-vdso.so.1 (0x00007ffd)\n\
        \tlibmpich.so.12 => /lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f01)\n\
        \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n";

    #[test]
    fn the_link_check_accepts_the_lanes_library_only() {
        check_linked(LDD_OPENMPI, Library::OpenMpi).unwrap();
        check_linked(LDD_MPICH, Library::Mpich).unwrap();
        let wrong = format!(
            "{:#}",
            check_linked(LDD_OPENMPI, Library::Mpich).unwrap_err()
        );
        assert!(wrong.contains("libmpi.so.40"), "{wrong}");
        let wrong = format!(
            "{:#}",
            check_linked(LDD_MPICH, Library::OpenMpi).unwrap_err()
        );
        assert!(wrong.contains("libmpich.so.12"), "{wrong}");
        assert!(check_linked("\tlibc.so.6 => /lib/libc.so.6\n", Library::Mpich).is_err());
    }

    #[test]
    fn the_example_must_report_the_world_it_was_launched_at() {
        let run = "mpi_actions: 4 rank(s)\nrank 0 stats: ...\nrank 1 stats: ...\n";
        check_example_world(run, 4).unwrap();
        let singletons = "mpi_actions: 1 rank(s)\n".repeat(4);
        assert!(check_example_world(&singletons, 4).is_err());
        assert!(check_example_world("rank 0 stats: ...\n", 4).is_err());
        assert!(check_example_world("mpi_actions: 2 rank(s)\n", 4).is_err());
    }
}
