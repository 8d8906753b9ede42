//! `cargo xtask bench [NAME]...`: the full benchmarks.
//!
//! Benchmarks live in the root `benches/` (criterion or the bench harness
//! there) and compare dinah with its peer (Rayon, raw TCP, raw MPI) in the
//! same run. Results are recorded in `docs/benchmarks.md`.

use anyhow::{Result, bail};

use crate::cmd::Cmd;
use crate::lanes::rust_file_stems;
use crate::project_root;

const LANE: &str = "bench";

/// The benchmark targets: the root `benches/*.rs` files.
pub(crate) fn bench_names() -> Result<Vec<String>> {
    rust_file_stems(&project_root().join("benches"))
}

pub(crate) fn run(names: &[String]) -> Result<()> {
    let available = bench_names()?;
    if available.is_empty() {
        bail!("no benchmarks have landed yet (benches/ is empty)");
    }
    let selected: Vec<&String> = if names.is_empty() {
        available.iter().collect()
    } else {
        names.iter().collect()
    };
    for name in &selected {
        if !available.contains(name) {
            bail!(
                "no benchmark named `{name}`; available: {}",
                available.join(", ")
            );
        }
    }
    for name in selected {
        Cmd::new(LANE, "cargo")
            .args(["bench", "--bench", name])
            .timeout(std::time::Duration::from_secs(3600))
            .run()?;
    }
    Ok(())
}
