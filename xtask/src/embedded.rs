//! The `embedded` lane: dinah-core on a Cortex-M4F under QEMU.
//!
//! Builds `ci/firmware` (its own workspace, no allocator, `cortex-m-rt`) in
//! release for `thumbv7em-none-eabihf`, runs it on QEMU's MPS2 AN386 board
//! with semihosting, and fails unless QEMU exits with status 0, which the
//! firmware gives only when every one of its checks passed. Then it prints
//! the firmware's sections, and what each part of the core costs: the
//! firmware is built again without each part (a feature each) and the
//! difference is that part's flash and RAM.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSection};

use crate::cmd::on_path;
use crate::lanes::{LaneRun, NOSTD_TARGET, target_dir};
use crate::project_root;
use crate::setup::QEMU_PACKAGE;

/// The firmware's parts, each a cargo feature of `ci/firmware`.
const PARTS: [(&str, &str); 4] = [
    (
        "states",
        "task queue, task and runtime states, metrics, trace buffer",
    ),
    ("interrupt", "cancellation from an interrupt handler"),
    ("wire", "header codec, stream decoder, hello, fingerprint"),
    ("tables", "pending, deadline and dedup tables"),
];

/// How long QEMU may run the firmware.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The sizes of a firmware image, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) text: u64,
    pub(crate) rodata: u64,
    pub(crate) data: u64,
    pub(crate) bss: u64,
}

impl Sizes {
    /// Flash: code, constants, and the initial values of `.data` (the
    /// vector table counts as code).
    pub(crate) fn flash(self) -> u64 {
        self.text + self.rodata + self.data
    }

    /// RAM: `.data` and `.bss` (the stack comes on top).
    pub(crate) fn ram(self) -> u64 {
        self.data + self.bss
    }

    fn minus(self, other: Self) -> Self {
        Self {
            text: self.text.saturating_sub(other.text),
            rodata: self.rodata.saturating_sub(other.rodata),
            data: self.data.saturating_sub(other.data),
            bss: self.bss.saturating_sub(other.bss),
        }
    }
}

pub(crate) fn run(lane: &LaneRun) -> Result<()> {
    if !on_path(QEMU_PACKAGE) {
        bail!(
            "lane `{}`: {QEMU_PACKAGE} is not installed; install it with:\n    sudo apt-get install -y --no-install-recommends {QEMU_PACKAGE}",
            lane.name()
        );
    }
    let firmware = build(lane, None)?;
    lane.cmd_within(QEMU_PACKAGE, RUN_LIMIT)
        .args([
            "-cpu",
            "cortex-m4",
            "-machine",
            "mps2-an386",
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ])
        .arg(&firmware)
        .run()
        .context("the firmware failed a check on QEMU (its lines above say which)")?;
    let full = sizes(&firmware)?;
    println!(
        "{}: firmware sections: .text {} B, .rodata {} B, .data {} B, .bss {} B: flash {} B, RAM {} B",
        lane.name(),
        full.text,
        full.rodata,
        full.data,
        full.bss,
        full.flash(),
        full.ram()
    );
    let harness = sizes(&build(lane, Some(&[]))?)?;
    println!(
        "{}: what each part costs (the full firmware minus the firmware without it):",
        lane.name()
    );
    println!("| part | what | flash (B) | RAM (B) |");
    println!("| --- | --- | --- | --- |");
    for (part, what) in PARTS {
        let others: Vec<&str> = PARTS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| *name != part)
            .collect();
        let without = sizes(&build(lane, Some(&others))?)?;
        let cost = full.minus(without);
        println!("| `{part}` | {what} | {} | {} |", cost.flash(), cost.ram());
    }
    println!(
        "| harness | cortex-m-rt, semihosting, the check report | {} | {} |",
        harness.flash(),
        harness.ram()
    );
    println!(
        "| all | the whole firmware | {} | {} |",
        full.flash(),
        full.ram()
    );
    Ok(())
}

/// Builds the firmware in release with `features` (`None`: the default
/// ones) and returns the ELF's path.
fn build(lane: &LaneRun, features: Option<&[&str]>) -> Result<PathBuf> {
    let manifest = project_root().join("ci/firmware/Cargo.toml");
    let dir = target_dir().join("firmware");
    let mut cmd = lane
        .cargo(["build", "--release", "--manifest-path"])
        .arg(&manifest)
        .args(["--target", NOSTD_TARGET])
        .env("CARGO_TARGET_DIR", &dir);
    if let Some(features) = features {
        cmd = cmd.arg("--no-default-features");
        if !features.is_empty() {
            cmd = cmd.arg("--features").arg(features.join(","));
        }
    }
    cmd.run()?;
    Ok(dir.join(NOSTD_TARGET).join("release/dinah-firmware"))
}

/// The sizes of the ELF at `path`, by section name.
pub(crate) fn sizes(path: &Path) -> Result<Sizes> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let elf =
        object::File::parse(&*bytes).with_context(|| format!("parsing {}", path.display()))?;
    let mut sizes = Sizes::default();
    for section in elf.sections() {
        let size = section.size();
        match section.name().unwrap_or("") {
            ".vector_table" | ".text" => sizes.text += size,
            ".rodata" => sizes.rodata += size,
            ".data" => sizes.data += size,
            ".bss" | ".uninit" => sizes.bss += size,
            _ => {}
        }
    }
    if sizes.text == 0 {
        bail!("{} has no .text section", path.display());
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flash_holds_code_constants_and_initial_data() {
        let sizes = Sizes {
            text: 100,
            rodata: 20,
            data: 8,
            bss: 50,
        };
        assert_eq!(sizes.flash(), 128);
        assert_eq!(sizes.ram(), 58);
        assert_eq!(sizes.minus(Sizes::default()), sizes);
    }

    #[test]
    fn every_part_is_a_feature_of_the_firmware() {
        let manifest =
            std::fs::read_to_string(project_root().join("ci/firmware/Cargo.toml")).unwrap();
        for (part, _) in PARTS {
            assert!(manifest.contains(&format!("{part} = []")), "{part}");
        }
    }
}
