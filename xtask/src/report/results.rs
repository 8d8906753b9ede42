//! Reading a report's saved benchmark outputs: criterion's text results
//! (any benchmark id) and the markdown tables the harness-less benchmarks
//! print.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// How criterion introduces a result's three time estimates.
const CRITERION_TIME: &str = "time:";

/// Seconds per time unit, as the benchmarks print them.
const TIME_UNITS: &[(&str, f64)] = &[
    ("ps", 1e-12),
    ("ns", 1e-9),
    ("µs", 1e-6), // U+00B5 MICRO SIGN, what criterion prints
    ("μs", 1e-6), // U+03BC GREEK SMALL LETTER MU
    ("us", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
];

/// Everything one report run measured, by benchmark.
#[derive(Debug, Default)]
pub(crate) struct Results {
    /// criterion results: benchmark id (`group/function[/parameter]`) to
    /// the middle of its three time estimates, in seconds.
    pub(crate) times: BTreeMap<String, f64>,
    /// The criterion ids in the order the benchmarks printed them.
    pub(crate) order: Vec<String>,
    /// Table rows of the harness-less benchmarks, by benchmark, in the
    /// order printed: each row's cells.
    pub(crate) rows: BTreeMap<String, Vec<Vec<String>>>,
    /// Each table's header cells, by benchmark.
    pub(crate) headers: BTreeMap<String, Vec<String>>,
    /// Other lines worth quoting, by benchmark: `runtime`'s allocation
    /// counts (`<id>: <n> allocations per action ...`).
    pub(crate) allocations: BTreeMap<String, f64>,
    /// `machine.txt`: what ran where (`key: value` lines).
    pub(crate) machine: Vec<(String, String)>,
}

impl Results {
    /// Reads every `<bench>.txt` and `machine.txt` in `dir`.
    pub(crate) fn read(dir: &Path) -> Result<Self> {
        let mut results = Self::default();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .collect::<Result<_, _>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path.extension().is_none_or(|ext| ext != "txt") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            if stem == "machine" {
                results.machine = key_values(&text);
                continue;
            }
            results
                .add(stem, &text)
                .with_context(|| format!("reading {}", path.display()))?;
        }
        if results.times.is_empty() && results.rows.is_empty() {
            bail!("no benchmark results in {}", dir.display());
        }
        Ok(results)
    }

    /// Adds the output `text` of benchmark `bench`.
    pub(crate) fn add(&mut self, bench: &str, text: &str) -> Result<()> {
        for (id, seconds) in criterion_times(text)? {
            if self.times.insert(id.clone(), seconds).is_none() {
                self.order.push(id);
            }
        }
        let mut header_seen = false;
        for line in text.lines() {
            if let Some(cells) = table_cells(line) {
                if cells.iter().all(|cell| cell.chars().all(|c| c == '-')) {
                    continue;
                }
                if !header_seen {
                    header_seen = true;
                    self.headers.insert(bench.to_owned(), cells);
                    continue;
                }
                self.rows.entry(bench.to_owned()).or_default().push(cells);
            } else if let Some((id, rest)) = line.split_once(": ") {
                if let Some(count) = rest.strip_suffix(" allocations per action (both ranks)") {
                    if let Ok(count) = count.parse() {
                        self.allocations.insert(id.to_owned(), count);
                    }
                }
            }
        }
        Ok(())
    }

    /// The time of criterion benchmark `id`, in seconds.
    pub(crate) fn time(&self, id: &str) -> Option<f64> {
        self.times.get(id).copied()
    }

    /// The cells after the first of `bench`'s first table row whose first
    /// cell is `first`.
    pub(crate) fn row(&self, bench: &str, first: &str) -> Option<&[String]> {
        self.rows_of(bench)
            .find(|row| row.first().is_some_and(|cell| cell == first))
            .map(|row| &row[1..])
    }

    /// `bench`'s table rows in the order printed, every cell.
    pub(crate) fn rows_of<'a>(&'a self, bench: &str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.rows
            .get(bench)
            .into_iter()
            .flatten()
            .map(Vec::as_slice)
    }

    /// The criterion results whose id starts with one of `prefixes`, in
    /// the order printed.
    pub(crate) fn times_under<'a>(
        &'a self,
        prefixes: &'a [&'a str],
    ) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.order
            .iter()
            .filter(move |id| prefixes.iter().any(|p| id.starts_with(p)))
            .map(|id| (id.as_str(), self.times[id]))
    }

    /// The value of `key` in `machine.txt`, or `"?"`.
    pub(crate) fn machine(&self, key: &str) -> &str {
        self.machine
            .iter()
            .find(|(k, _)| k == key)
            .map_or("?", |(_, v)| v.as_str())
    }
}

/// `key: value` lines.
fn key_values(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// The cells of a markdown table row, trimmed; `None` if `line` is not one.
fn table_cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(
        inner
            .split('|')
            .map(|cell| cell.trim().to_owned())
            .collect(),
    )
}

/// Every criterion result in `text`: (benchmark id, seconds).
///
/// criterion prints a result as the benchmark id padded to 24 columns and
/// `time:   [low mid high]`; a longer id stands alone on its line and the
/// `time:` line follows, indented. Indented lines that follow `change:`
/// compare with an earlier run and carry no `time:`.
pub(crate) fn criterion_times(text: &str) -> Result<Vec<(String, f64)>> {
    let mut found = Vec::new();
    let mut waiting: Option<&str> = None;
    for (index, line) in text.lines().enumerate() {
        let result = if line.starts_with(char::is_whitespace) {
            waiting.take().and_then(|id| {
                line.trim_start()
                    .strip_prefix(CRITERION_TIME)
                    .map(|time| (id, time))
            })
        } else {
            waiting = None;
            let id = line.split_whitespace().next().unwrap_or_default();
            let rest = line[id.len()..].trim_start();
            if id.contains('/') && rest.is_empty() {
                waiting = Some(id);
                None
            } else {
                rest.strip_prefix(CRITERION_TIME).map(|time| (id, time))
            }
        };
        if let Some((id, time)) = result {
            let seconds = middle_time(time)
                .with_context(|| format!("line {}: `{}`", index + 1, line.trim()))?;
            found.push((id.to_owned(), seconds));
        }
    }
    Ok(found)
}

/// The middle of criterion's `[low mid high]` estimates, in seconds.
fn middle_time(times: &str) -> Result<f64> {
    let inner = times
        .trim()
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map(|(inner, _)| inner)
        .context("expected `[low mid high]` after `time:`")?;
    let words: Vec<&str> = inner.split_whitespace().collect();
    let [_, _, number, unit, _, _] = words[..] else {
        bail!("expected three values with units in `[{inner}]`");
    };
    parse_time(number, unit)
}

/// `number` `unit` (as the benchmarks print times) in seconds.
pub(crate) fn parse_time(number: &str, unit: &str) -> Result<f64> {
    let value: f64 = number
        .parse()
        .with_context(|| format!("`{number}` is not a number"))?;
    let Some(&(_, scale)) = TIME_UNITS.iter().find(|(name, _)| *name == unit) else {
        bail!("unknown time unit `{unit}`");
    };
    Ok(value * scale)
}

/// A time cell such as `2.60 us` in seconds.
pub(crate) fn time_cell(cell: &str) -> Option<f64> {
    let (number, unit) = cell.trim().split_once(' ')?;
    parse_time(number, unit.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRITERION: &str = "\
Benchmarking tcp_payload/raw/8: Analyzing
tcp_payload/raw/8       time:   [27.1 µs 27.5 µs 28.0 µs]
                        thrpt:  [558 KiB/s 568 KiB/s 577 KiB/s]
tcp_round_trip/raw_spin_ping_pong_8b
                        time:   [7.8986 µs 7.9464 µs 7.9965 µs]
                        change: [-1.0% +0.2% +1.1%] (p = 0.5 > 0.05)
seed/executor-noop      time:   [785.1 ps 786.0 ps 790.2 ps]
";

    #[test]
    fn criterion_results_in_both_layouts() {
        let times = criterion_times(CRITERION).unwrap();
        let ids: Vec<&str> = times.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tcp_payload/raw/8",
                "tcp_round_trip/raw_spin_ping_pong_8b",
                "seed/executor-noop"
            ]
        );
        assert!((times[0].1 - 27.5e-6).abs() < 1e-12);
        assert!((times[1].1 - 7.9464e-6).abs() < 1e-12);
        assert!((times[2].1 - 786.0e-12).abs() < 1e-15);
    }

    #[test]
    fn tables_and_allocation_lines() {
        let mut results = Results::default();
        let text = "\
| measurement | value | goal / note |
| --- | --- | --- |
| raw mpi 8 B ping-pong (immediate + test) | 0.58 us | floor |
| twice | 1 | first |
| twice | 2 | second |
runtime_round_trip/dinah_noop_memory/1: 6.0 allocations per action (both ranks)
";
        results.add("mpi", text).unwrap();
        let row = results
            .row("mpi", "raw mpi 8 B ping-pong (immediate + test)")
            .unwrap();
        assert_eq!(row[0], "0.58 us");
        assert_eq!(time_cell(&row[0]), Some(0.58e-6));
        assert_eq!(results.headers["mpi"][1], "value");
        // Rows keep their order, and a repeated first cell finds the first.
        assert_eq!(results.row("mpi", "twice").unwrap()[1], "first");
        assert_eq!(results.rows_of("mpi").count(), 3);
        assert_eq!(
            results.allocations["runtime_round_trip/dinah_noop_memory/1"],
            6.0
        );
    }

    #[test]
    fn a_malformed_time_is_an_error() {
        assert!(criterion_times("a/b  time:   [1 2 3]").is_err());
        assert!(parse_time("1.0", "fortnights").is_err());
    }
}
