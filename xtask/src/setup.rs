//! `cargo xtask setup`: install what a fresh Debian/Ubuntu machine lacks.
//!
//! Idempotent: every step first checks whether its tool is there. Rust
//! toolchains, targets and components come from rustup; MPI (OpenMPI, and
//! MPICH beside it) and libclang come from apt when running as root, and otherwise the exact commands are
//! printed (the lanes that need them then fail with the same hint).

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::cmd::{Cmd, on_path};
use crate::lanes::{MSRV, NOSTD_TARGET, PORTABILITY_TARGETS};
use crate::mpi::{self, Library};
use crate::project_root;

const LANE: &str = "setup";

/// The nightly toolchain used by the miri and fuzz lanes.
pub(crate) const NIGHTLY: &str = "nightly";

/// The apt packages the MPI lanes need: OpenMPI, the default MPI that
/// every lane but `mpi-mpich` builds against, and libclang for the `mpi`
/// crate's bindgen.
pub(crate) const APT_PACKAGES: &[&str] =
    &["libopenmpi-dev", "openmpi-bin", "libclang-dev", "clang"];

/// The apt packages of MPICH, for the `mpi-mpich` lane. Installed beside
/// OpenMPI, they leave it the default `mpicc` and `mpirun` (Debian's
/// alternatives rank OpenMPI higher); MPICH keeps its own names
/// (`mpicc.mpich`, `mpiexec.mpich`).
pub(crate) const MPICH_APT_PACKAGES: &[&str] = &["mpich", "libmpich-dev"];

pub(crate) fn run() -> Result<()> {
    println!("===== setup =====");
    let pinned = pinned_toolchain()?;
    ensure_toolchain(MSRV, &[])?;
    ensure_target(&pinned, NOSTD_TARGET)?;
    ensure_target(MSRV, NOSTD_TARGET)?;
    for target in PORTABILITY_TARGETS {
        ensure_target(&pinned, target)?;
    }
    ensure_toolchain(NIGHTLY, &["miri", "rust-src"])?;
    ensure_mpi()?;
    ensure_mpich()?;
    ensure_qemu()?;
    ensure_cargo_fuzz()?;
    println!("setup: done");
    Ok(())
}

/// The channel named in `rust-toolchain.toml`.
pub(crate) fn pinned_toolchain() -> Result<String> {
    let path = project_root().join("rust-toolchain.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_owned())
        .next()
        .with_context(|| format!("no `channel = \"...\"` in {}", path.display()))
}

fn rustup(args: &[&str]) -> Cmd {
    Cmd::new(LANE, "rustup").args(args)
}

fn installed_toolchains() -> Result<Vec<String>> {
    let list = rustup(&["toolchain", "list"]).quiet().read()?;
    Ok(list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

fn has_toolchain(installed: &[String], name: &str) -> bool {
    installed.iter().any(|t| {
        t == name
            || t.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('-'))
    })
}

fn ensure_toolchain(name: &str, components: &[&str]) -> Result<()> {
    if !has_toolchain(&installed_toolchains()?, name) {
        let mut args = vec!["toolchain", "install", name, "--profile", "minimal"];
        let joined = components.join(",");
        if !components.is_empty() {
            // A nightly without one of the components is passed over for
            // the newest one that has them all.
            args.extend(["--component", joined.as_str(), "--allow-downgrade"]);
        }
        return rustup(&args).run();
    }
    if components.is_empty() {
        return Ok(());
    }
    let have = rustup(&["component", "list", "--installed", "--toolchain", name])
        .quiet()
        .read()?;
    let missing: Vec<&str> = components
        .iter()
        .copied()
        .filter(|component| {
            !have
                .lines()
                .any(|line| line.starts_with(&format!("{component}-")) || line == *component)
        })
        .collect();
    if missing.is_empty() {
        println!(
            "setup: toolchain {name} with {} present",
            components.join(", ")
        );
        return Ok(());
    }
    let mut args = vec!["component", "add", "--toolchain", name];
    args.extend(missing);
    rustup(&args).run()
}

fn ensure_target(toolchain: &str, target: &str) -> Result<()> {
    if !has_toolchain(&installed_toolchains()?, toolchain) {
        rustup(&["toolchain", "install", toolchain, "--profile", "minimal"]).run()?;
    }
    let installed = rustup(&["target", "list", "--installed", "--toolchain", toolchain])
        .quiet()
        .read()?;
    if installed.lines().any(|line| line.trim() == target) {
        println!("setup: target {target} for {toolchain} present");
        return Ok(());
    }
    rustup(&["target", "add", target, "--toolchain", toolchain]).run()
}

/// Is a libclang shared library installed where bindgen looks?
pub(crate) fn have_libclang() -> bool {
    let mut dirs = vec![
        Path::new("/usr/lib/x86_64-linux-gnu").to_path_buf(),
        Path::new("/usr/lib").to_path_buf(),
    ];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("llvm-") {
                dirs.push(entry.path().join("lib"));
            }
        }
    }
    dirs.iter().any(|dir| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("libclang")
                    && name.contains(".so")
                    && !name.starts_with("libclang-cpp")
            })
        })
    })
}

/// Is an MPI compiler wrapper and launcher installed?
pub(crate) fn have_mpi() -> bool {
    on_path("mpicc") && (on_path("mpirun") || on_path("mpiexec"))
}

/// Is MPICH's compiler wrapper and launcher installed under their own
/// names?
pub(crate) fn have_mpich() -> bool {
    on_path("mpicc.mpich") && on_path("mpiexec.mpich")
}

/// The commands that install MPI and libclang, for hints.
pub(crate) fn apt_hint() -> String {
    install_hint(APT_PACKAGES)
}

/// The commands that install MPICH, for hints.
pub(crate) fn mpich_apt_hint() -> String {
    install_hint(MPICH_APT_PACKAGES)
}

fn install_hint(packages: &[&str]) -> String {
    format!(
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    )
}

fn is_root() -> bool {
    Cmd::new(LANE, "id")
        .arg("-u")
        .quiet()
        .read()
        .is_ok_and(|uid| uid.trim() == "0")
}

fn ensure_mpi() -> Result<()> {
    if have_mpi() && have_libclang() {
        println!("setup: MPI and libclang present");
        return Ok(());
    }
    if is_root() && on_path("apt-get") {
        return apt_install(APT_PACKAGES);
    }
    println!("setup: MPI or libclang is missing and this is not a root shell with apt-get.");
    println!("setup: install them with:\n    {}", apt_hint());
    println!("setup: the clippy, doc, msrv and mpi lanes fail until they are installed.");
    Ok(())
}

/// MPICH beside OpenMPI, for the `mpi-mpich` lane. After installing it,
/// checks that `mpirun` is still OpenMPI's: the `mpi` lane and every other
/// MPI build rely on OpenMPI being the default.
fn ensure_mpich() -> Result<()> {
    if have_mpich() {
        println!("setup: MPICH present");
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        println!("setup: MPICH is missing and this is not a root shell with apt-get.");
        println!("setup: install it with:\n    {}", mpich_apt_hint());
        println!("setup: the mpi-mpich lane fails until it is installed.");
        return Ok(());
    }
    apt_install(MPICH_APT_PACKAGES)?;
    if have_mpi() && !mpi::launcher_is(LANE, Library::OpenMpi) {
        bail!(
            "installing MPICH made `{}` another library's; make OpenMPI the default again with \
             `update-alternatives --config mpirun` and `update-alternatives --config mpi`",
            mpi::launcher()
        );
    }
    Ok(())
}

/// `apt-get update`, then installs `packages` without the recommended
/// extras.
fn apt_install(packages: &[&str]) -> Result<()> {
    Cmd::new(LANE, "apt-get")
        .arg("update")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()?;
    Cmd::new(LANE, "apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()
}

/// The apt package of the emulator the `embedded` lane runs the firmware
/// on.
pub(crate) const QEMU_PACKAGE: &str = "qemu-system-arm";

/// QEMU's Arm system emulator, for the `embedded` lane.
fn ensure_qemu() -> Result<()> {
    if on_path(QEMU_PACKAGE) {
        println!("setup: {QEMU_PACKAGE} present");
        return Ok(());
    }
    if is_root() && on_path("apt-get") {
        return apt_install(&[QEMU_PACKAGE]);
    }
    println!("setup: {QEMU_PACKAGE} is missing and this is not a root shell with apt-get.");
    println!(
        "setup: install it with:\n    sudo apt-get install -y --no-install-recommends {QEMU_PACKAGE}"
    );
    println!("setup: the embedded lane fails until it is installed.");
    Ok(())
}

/// cargo-fuzz, for the `fuzz` lane (built from crates.io once).
fn ensure_cargo_fuzz() -> Result<()> {
    let installed = Cmd::new(LANE, "cargo")
        .args(["fuzz", "--version"])
        .quiet()
        .read()
        .is_ok();
    if installed {
        println!("setup: cargo-fuzz present");
        return Ok(());
    }
    Cmd::new(LANE, "cargo")
        .args(["install", "cargo-fuzz", "--locked"])
        .timeout(std::time::Duration::from_secs(900))
        .run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolchain_names_match_with_host_suffix() {
        let installed = vec![
            "1.85.0-x86_64-unknown-linux-gnu".to_owned(),
            "nightly-x86_64-unknown-linux-gnu".to_owned(),
        ];
        assert!(has_toolchain(&installed, "1.85.0"));
        assert!(has_toolchain(&installed, "nightly"));
        assert!(!has_toolchain(&installed, "1.85"));
        assert!(!has_toolchain(&installed, "stable"));
    }

    #[test]
    fn pinned_toolchain_is_read_from_the_file() {
        let pinned = pinned_toolchain().unwrap();
        assert!(
            pinned.chars().next().is_some_and(|c| c.is_ascii_digit()),
            "pin a numbered release, got {pinned}"
        );
    }
}
