//! `cargo xtask bench --report [--from DIR]`: every benchmark once, in one
//! sitting, and `docs/benchmarks.md` with its charts written fresh from
//! that run.
//!
//! A run saves each benchmark's output as `<bench>.txt`, with
//! `machine.txt` (commit, date, CPU, toolchain, MPI), in
//! `artifacts/benchmarks/report-<date>-<commit>/`; `--from` that directory
//! writes the page and the charts again without measuring. The page holds
//! the goals, judged on the run's own floors (`report/goals.rs`), one
//! table per area (`report/page.rs`) and SVG charts drawn with `plotters`
//! (`report/charts.rs`) into `docs/plots/`.

mod charts;
mod goals;
mod page;
mod results;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::project_root;

const LANE: &str = "bench";

/// The benchmarks a report runs, in this order: the quick single-thread
/// ones first, the two-rank transports last.
const BENCHES: [&str; 9] = [
    "core_wire",
    "core_tables",
    "seed",
    "local",
    "alternate",
    "runtime",
    "instructions",
    "tcp",
    "mpi",
];

/// Where the charts go, relative to the workspace root.
const PLOTS_DIR: &str = "docs/plots";

/// The page, relative to the workspace root.
const PAGE: &str = "docs/benchmarks.md";

/// Runs every benchmark (or reads the run saved in `from`) and writes the
/// page and its charts.
pub(crate) fn run(from: Option<&str>) -> Result<()> {
    let root = project_root();
    let dir = match from {
        Some(dir) => root.join(dir),
        None => measure(&root)?,
    };
    let results =
        results::Results::read(&dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut drawn = Vec::new();
    for chart in charts::all(&results) {
        let path = charts::draw(&chart, &root.join(PLOTS_DIR))?;
        println!("wrote {}", path.display());
        drawn.push(chart.file.to_owned());
    }
    let outputs = format!("../{}", relative(&root, &dir)?);
    let page = page::render(
        &results,
        &page::Links {
            outputs: &outputs,
            charts: &drawn,
        },
    );
    let target = root.join(PAGE);
    std::fs::write(&target, page).with_context(|| format!("writing {}", target.display()))?;
    println!("wrote {}", target.display());
    Ok(())
}

/// `path` relative to `root`, with `/` separators.
fn relative(root: &Path, path: &Path) -> Result<String> {
    let relative = path
        .strip_prefix(root)
        .with_context(|| format!("{} is outside the workspace", path.display()))?;
    Ok(relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/"))
}

/// Runs every benchmark into a new directory; returns it.
fn measure(root: &Path) -> Result<PathBuf> {
    let commit = Cmd::new(LANE, "git")
        .args(["rev-parse", "--short", "HEAD"])
        .quiet()
        .read()?
        .trim()
        .to_owned();
    let dirty = !Cmd::new(LANE, "git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .quiet()
        .read()?
        .trim()
        .is_empty();
    let date = Cmd::new(LANE, "date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .quiet()
        .read()?
        .trim()
        .to_owned();
    let day = date.get(..10).unwrap_or(&date);
    let dir = root
        .join("artifacts/benchmarks")
        .join(format!("report-{day}-{commit}"));
    if dir.exists() {
        bail!(
            "{} exists already: move it away, or write the page from it with `--from`",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let commit = if dirty {
        format!("{commit} (with uncommitted changes)")
    } else {
        commit
    };
    std::fs::write(dir.join("machine.txt"), machine(&commit, &date))?;
    for bench in BENCHES {
        println!("xtask: report: running `{bench}`");
        let output = if bench == "mpi" {
            crate::bench::mpi_command()?.read()?
        } else {
            Cmd::new(LANE, "cargo")
                .args(["bench", "--bench", bench])
                .timeout(std::time::Duration::from_secs(3600))
                .read()?
        };
        std::fs::write(dir.join(format!("{bench}.txt")), output)?;
    }
    Ok(dir)
}

/// `machine.txt`: `key: value` lines.
fn machine(commit: &str, date: &str) -> String {
    let read = |program: &str, args: &[&str]| {
        Cmd::new(LANE, program)
            .args(args)
            .quiet()
            .read()
            .map(|out| out.lines().next().unwrap_or_default().trim().to_owned())
            .unwrap_or_else(|_| "?".into())
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
        .map_or("?", |(_, name)| name.trim());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|kib| kib.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .map_or_else(|| "?".into(), |kib| format!("{} GiB", kib >> 20));
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!(
        "commit: {commit}\ndate: {date}\ncpu: {cpu}\ncores: {cores}\nmemory: {memory}\n\
         kernel: {}\nrustc: {}\nmpi: {}\n",
        read("uname", &["-sr"]),
        read("rustc", &["--version"]),
        read(crate::mpi::launcher(), &["--version"]),
    )
}
