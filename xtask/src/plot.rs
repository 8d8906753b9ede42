//! `cargo xtask plot FILE...`: charts of saved benchmark output for the docs.
//!
//! Each FILE is benchmark output as kept under `artifacts/benchmarks/`, in
//! one of two formats, told apart by their content:
//!
//! - criterion's text output of `benches/tcp.rs`, whose
//!   `tcp_payload/<series>/<bytes>` results (series `raw`, `transport`,
//!   `dinah`) give a round-trip time per payload size; the middle of
//!   criterion's three `time:` values is used;
//! - the markdown table `benches/mpi.rs` prints, whose
//!   `| payload 8 B: raw ping-pong / dinah echo | 1.38 us / 21.08 us | ...`
//!   rows give the `raw` and `dinah` round trips per size.
//!
//! The round trips become `docs/plots/<file stem>-payload.svg`: time against
//! payload size on log-log axes, one line per series (see [`crate::svg`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use crate::project_root;
use crate::svg::{Axis, LogLogChart, Series, Tick, Ticks};

/// Where the charts go, relative to the workspace root.
const PLOTS_DIR: &str = "docs/plots";

/// The criterion benchmark group of payload round trips.
const CRITERION_GROUP: &str = "tcp_payload/";

/// How criterion introduces a result's three time estimates.
const CRITERION_TIME: &str = "time:";

/// How the MPI table's payload rows start.
const MPI_ROW: &str = "| payload ";

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

/// The units chart labels use, largest first.
const DISPLAY_TIME_UNITS: &[(&str, f64)] = &[
    ("s", 1.0),
    ("ms", 1e-3),
    ("µs", 1e-6),
    ("ns", 1e-9),
    ("ps", 1e-12),
];

/// Bytes per size unit, as the MPI table prints them.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// Which benchmark wrote a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// criterion's output of `benches/tcp.rs`.
    Criterion,
    /// The table of `benches/mpi.rs`.
    MpiTable,
}

impl Format {
    /// The format of `text`, if it holds payload results of either kind.
    fn detect(text: &str) -> Option<Self> {
        let lines = || text.lines().map(str::trim_start);
        if lines().any(|line| line.starts_with(CRITERION_GROUP)) {
            Some(Self::Criterion)
        } else if lines().any(|line| line.starts_with(MPI_ROW)) {
            Some(Self::MpiTable)
        } else {
            None
        }
    }

    /// The transport the benchmark measures, for the chart title.
    fn transport(self) -> &'static str {
        match self {
            Self::Criterion => "TCP",
            Self::MpiTable => "MPI",
        }
    }

    /// The payload series in `text`, read as this format.
    fn parse(self, text: &str) -> Result<Vec<PayloadSeries>> {
        match self {
            Self::Criterion => parse_criterion(text),
            Self::MpiTable => parse_mpi_table(text),
        }
    }
}

/// The round trips of one series (`raw`, `dinah`, ...), smallest payload
/// first.
#[derive(Debug, PartialEq)]
struct PayloadSeries {
    /// The series as the benchmark names it: `raw`, `transport`, `dinah`.
    name: String,
    /// Its measurements, sorted by size once collected.
    points: Vec<RoundTrip>,
}

/// One measurement: a payload size and the time of its round trip.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RoundTrip {
    /// The payload size.
    bytes: u64,
    /// The round-trip time: criterion's middle estimate, or the MPI
    /// table's median.
    seconds: f64,
}

/// Gathers round trips into series, kept in the order they first appear.
#[derive(Debug, Default)]
struct Collector {
    series: Vec<PayloadSeries>,
}

impl Collector {
    /// Adds `round_trip` to `series`; an error if that series already has
    /// one for the same size.
    fn add(&mut self, series: &str, round_trip: RoundTrip) -> Result<()> {
        let index = self
            .series
            .iter()
            .position(|s| s.name == series)
            .unwrap_or_else(|| {
                self.series.push(PayloadSeries {
                    name: series.to_owned(),
                    points: Vec::new(),
                });
                self.series.len() - 1
            });
        let points = &mut self.series[index].points;
        ensure!(
            points.iter().all(|p| p.bytes != round_trip.bytes),
            "a second `{series}` result for {} bytes",
            round_trip.bytes
        );
        points.push(round_trip);
        Ok(())
    }

    /// The series with their points sorted by size; an error if there are
    /// none.
    fn finish(mut self) -> Result<Vec<PayloadSeries>> {
        ensure!(!self.series.is_empty(), "no payload results found");
        for series in &mut self.series {
            series.points.sort_by_key(|p| p.bytes);
        }
        Ok(self.series)
    }
}

/// Plots every file in `files` (relative to the workspace root, or
/// absolute), calling `wrote` with each chart's path as it is written.
pub(crate) fn run(files: &[String], mut wrote: impl FnMut(&Path)) -> Result<()> {
    for file in files {
        let chart =
            plot_file(&project_root().join(file)).with_context(|| format!("plotting `{file}`"))?;
        wrote(&chart);
    }
    Ok(())
}

/// Reads one benchmark output file and writes its chart; returns the
/// chart's path relative to the workspace root.
fn plot_file(source: &Path) -> Result<PathBuf> {
    let text =
        std::fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
    let (format, series) = parse_payloads(&text)?;
    let file_name = source
        .file_name()
        .context("the path names no file")?
        .to_string_lossy();
    let stem = source
        .file_stem()
        .context("the path names no file")?
        .to_string_lossy();
    let svg = payload_chart(format, &file_name, &series).render()?;
    let chart = Path::new(PLOTS_DIR).join(format!("{stem}-payload.svg"));
    let dir = project_root().join(PLOTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = project_root().join(&chart);
    std::fs::write(&target, svg).with_context(|| format!("writing {}", target.display()))?;
    Ok(chart)
}

/// The payload round trips in `text`, and which format held them.
fn parse_payloads(text: &str) -> Result<(Format, Vec<PayloadSeries>)> {
    let Some(format) = Format::detect(text) else {
        bail!(
            "found neither criterion `{CRITERION_GROUP}` results nor MPI table \
             `{}` rows",
            MPI_ROW.trim_end()
        );
    };
    let series = format
        .parse(text)
        .with_context(|| format!("reading it as {} benchmark output", format.transport()))?;
    Ok((format, series))
}

/// The `tcp_payload/<series>/<bytes>` results of criterion's output.
///
/// criterion prints a result as the benchmark id padded to 24 columns and
/// `time:   [low mid high]`; a longer id stands alone on its line and the
/// `time:` line follows, indented. Indented `time:` lines after `change:`
/// are comparisons with an earlier run and are skipped.
fn parse_criterion(text: &str) -> Result<Vec<PayloadSeries>> {
    let mut collector = Collector::default();
    // An id alone on its line, waiting for its `time:` line.
    let mut waiting: Option<&str> = None;
    for (index, line) in text.lines().enumerate() {
        criterion_result(line, &mut waiting)
            .and_then(|found| match found {
                Some((id, time)) => record_criterion(&mut collector, id, time),
                None => Ok(()),
            })
            .with_context(|| format!("line {}: `{}`", index + 1, line.trim()))?;
    }
    collector.finish()
}

/// The benchmark id and `time:` text of the result `line` completes, if
/// any; `waiting` carries an id alone on its line to the next line.
fn criterion_result<'a>(
    line: &'a str,
    waiting: &mut Option<&'a str>,
) -> Result<Option<(&'a str, &'a str)>> {
    if line.starts_with(char::is_whitespace) {
        let Some(id) = waiting.take() else {
            return Ok(None);
        };
        return Ok(line
            .trim_start()
            .strip_prefix(CRITERION_TIME)
            .map(|time| (id, time)));
    }
    *waiting = None;
    let Some(id) = line.split_whitespace().next() else {
        return Ok(None);
    };
    if !id.starts_with(CRITERION_GROUP) {
        return Ok(None);
    }
    let rest = line[id.len()..].trim_start();
    if rest.is_empty() {
        *waiting = Some(id);
        return Ok(None);
    }
    match rest.strip_prefix(CRITERION_TIME) {
        Some(time) => Ok(Some((id, time))),
        None => bail!("expected `{CRITERION_TIME}` after the benchmark id"),
    }
}

/// Adds the result `tcp_payload/<series>/<bytes>` with times
/// `[low mid high]` to `collector`.
fn record_criterion(collector: &mut Collector, id: &str, times: &str) -> Result<()> {
    let parts: Vec<&str> = id.split('/').collect();
    let [_, series, bytes] = parts[..] else {
        bail!("expected a benchmark id `{CRITERION_GROUP}<series>/<bytes>`, got `{id}`");
    };
    ensure!(
        !series.is_empty(),
        "the benchmark id `{id}` names no series"
    );
    let bytes = bytes
        .parse()
        .with_context(|| format!("`{bytes}` in `{id}` is not a byte count"))?;
    let seconds = criterion_middle_time(times)?;
    collector.add(series, RoundTrip { bytes, seconds })
}

/// The middle of criterion's `[low mid high]` estimates, in seconds.
fn criterion_middle_time(times: &str) -> Result<f64> {
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

/// The `| payload <size>: <series> / <series> | <time> / <time> | ... |`
/// rows of the MPI benchmark table. A series is named by the first word of
/// its label: `raw ping-pong` is `raw`.
fn parse_mpi_table(text: &str) -> Result<Vec<PayloadSeries>> {
    let mut collector = Collector::default();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with(MPI_ROW) {
            continue;
        }
        record_mpi_row(&mut collector, line)
            .with_context(|| format!("line {}: `{line}`", index + 1))?;
    }
    collector.finish()
}

/// Adds the round trips of one `| payload ...` row to `collector`.
fn record_mpi_row(collector: &mut Collector, row: &str) -> Result<()> {
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let [_, what, times, ..] = cells[..] else {
        bail!("expected `| payload <size>: <series> / ... | <time> / ... |`");
    };
    let (size, labels) = what
        .strip_prefix("payload ")
        .and_then(|rest| rest.split_once(':'))
        .context("expected `payload <size>: <series> / ...` in the first cell")?;
    let bytes = parse_size(size.trim())?;
    let labels: Vec<&str> = labels.split('/').map(str::trim).collect();
    let times: Vec<&str> = times.split('/').map(str::trim).collect();
    ensure!(
        labels.len() == times.len(),
        "{} series but {} times",
        labels.len(),
        times.len()
    );
    for (label, time) in labels.into_iter().zip(times) {
        let series = label
            .split_whitespace()
            .next()
            .context("a series without a name")?;
        let (number, unit) = time
            .split_once(' ')
            .with_context(|| format!("expected `<number> <unit>`, got `{time}`"))?;
        let seconds = parse_time(number, unit.trim())?;
        collector.add(series, RoundTrip { bytes, seconds })?;
    }
    Ok(())
}

/// A time such as `296.60` `µs`, in seconds.
fn parse_time(number: &str, unit: &str) -> Result<f64> {
    let value: f64 = number
        .parse()
        .with_context(|| format!("`{number}` is not a number"))?;
    let Some(&(_, scale)) = TIME_UNITS.iter().find(|(name, _)| *name == unit) else {
        bail!("unknown time unit `{unit}`");
    };
    let seconds = value * scale;
    ensure!(
        seconds.is_finite() && seconds > 0.0,
        "the time `{number} {unit}` is not positive"
    );
    Ok(seconds)
}

/// A size such as `8 B`, `512 KiB` or `1 MiB`, in bytes.
fn parse_size(size: &str) -> Result<u64> {
    let (number, unit) = size
        .split_once(' ')
        .with_context(|| format!("expected `<count> <unit>` for the size, got `{size}`"))?;
    let count: u64 = number
        .parse()
        .with_context(|| format!("`{number}` is not a whole number"))?;
    let Some(&(_, scale)) = SIZE_UNITS.iter().find(|(name, _)| *name == unit.trim()) else {
        bail!("unknown size unit `{unit}`");
    };
    let bytes = count
        .checked_mul(scale)
        .with_context(|| format!("`{size}` is too large"))?;
    ensure!(bytes > 0, "a payload of `{size}`");
    Ok(bytes)
}

/// The chart of `series`: round-trip time against payload size, with a
/// tick at every size measured.
fn payload_chart(format: Format, source_name: &str, series: &[PayloadSeries]) -> LogLogChart {
    let mut sizes: Vec<u64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.bytes))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    LogLogChart {
        title: format!(
            "{} echo round trip by payload ({source_name})",
            format.transport()
        ),
        x_axis: Axis {
            title: "payload size".to_owned(),
            ticks: Ticks::At(
                sizes
                    .into_iter()
                    .map(|bytes| Tick {
                        value: bytes_as_f64(bytes),
                        label: format_size(bytes),
                    })
                    .collect(),
            ),
        },
        y_axis: Axis {
            title: "round-trip time".to_owned(),
            ticks: Ticks::Decades(format_time),
        },
        series: series
            .iter()
            .map(|s| Series {
                name: s.name.clone(),
                points: s
                    .points
                    .iter()
                    .map(|p| (bytes_as_f64(p.bytes), p.seconds))
                    .collect(),
            })
            .collect(),
    }
}

/// A byte count as a chart coordinate.
#[allow(
    clippy::cast_precision_loss,
    reason = "payload sizes are far below 2^53 bytes"
)]
fn bytes_as_f64(bytes: u64) -> f64 {
    bytes as f64
}

/// `bytes` in the largest binary unit that divides it: `8 B`, `64 KiB`,
/// `1 MiB`.
fn format_size(bytes: u64) -> String {
    let (unit, scale) = SIZE_UNITS
        .iter()
        .rev()
        .find(|&&(_, scale)| bytes % scale == 0)
        .copied()
        .unwrap_or(SIZE_UNITS[0]);
    format!("{} {unit}", bytes / scale)
}

/// `seconds` in the largest unit that keeps the number at least 1, rounded
/// to three decimals: `10 µs`, `100 µs`, `1 ms`.
fn format_time(seconds: f64) -> String {
    let (unit, scale) = DISPLAY_TIME_UNITS
        .iter()
        .copied()
        .find(|&(_, scale)| seconds >= scale * (1.0 - 1e-9))
        .unwrap_or(("ps", 1e-12));
    let value = (seconds / scale * 1000.0).round() / 1000.0;
    format!("{value} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Excerpt of criterion's output of `benches/tcp.rs`: both result
    /// layouts, a `change:` comparison with its own `time:` line, and a
    /// result of another group.
    const CRITERION: &str = "\
Benchmarking tcp_round_trip/transport_frames: Analyzing
tcp_round_trip/transport_frames
                        time:   [35.608 µs 36.804 µs 37.734 µs]
Benchmarking tcp_payload/raw/8: Analyzing
tcp_payload/raw/8       time:   [26.698 µs 27.509 µs 28.643 µs]
                        thrpt:  [545.52 KiB/s 567.99 KiB/s 585.25 KiB/s]
                 change:
                        time:   [−35.502% −14.437% +3.0887%] (p = 0.59 > 0.05)
                        thrpt:  [−2.9962% +16.872% +55.044%]
Benchmarking tcp_payload/transport/1024: Analyzing
tcp_payload/transport/1024
                        time:   [38.698 µs 40.434 µs 42.171 µs]
                        thrpt:  [46.315 MiB/s 48.304 MiB/s 50.470 MiB/s]
tcp_payload/raw/1024    time:   [900.00 ns 950.00 ns 1.0100 µs]
tcp_payload/dinah/1048576
                        time:   [1.2132 ms 1.3481 ms 1.4926 ms]
tcp_payload/raw/64      time:   [20.000 us 21.500 us 22.000 us]

# load average at end: 2.75 2.39 1.90
";

    /// Excerpt of the table `benches/mpi.rs` prints.
    const MPI: &str = "\
benches/mpi (2 ranks, median of 5 batches)

| measurement | value | goal / note |
| --- | --- | --- |
| raw mpi 8 B ping-pong (immediate + test) | 1.37 us | floor |
| dinah no-op round trip, 1 in flight, pooled | 21.38 us | <= 2x raw: 15.6x, not met |
| payload 8 B: raw ping-pong / dinah echo | 1.26 us / 21.52 us | dinah 1 MB/s, 17.0x raw |
| payload 1 MiB: raw ping-pong / dinah echo | 781.55 us / 13269.04 us | dinah 158 MB/s, 17.0x raw |
| payload 512 KiB: raw ping-pong / dinah echo | 409.30 us / 3026.53 us | dinah 346 MB/s, 7.4x raw |
";

    /// Equal up to floating-point rounding.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 1e-12
    }

    /// The series' points as `(bytes, seconds)`.
    fn points(series: &PayloadSeries) -> Vec<(u64, f64)> {
        series.points.iter().map(|p| (p.bytes, p.seconds)).collect()
    }

    /// Asserts `series` holds exactly `expected`, in order.
    fn assert_points(series: &PayloadSeries, expected: &[(u64, f64)]) {
        let found = points(series);
        assert_eq!(found.len(), expected.len(), "{}: {found:?}", series.name);
        for (&(bytes, seconds), &(want_bytes, want_seconds)) in found.iter().zip(expected) {
            assert_eq!(bytes, want_bytes, "{}", series.name);
            assert!(
                close(seconds, want_seconds),
                "{} at {bytes} B: {seconds} s, expected {want_seconds} s",
                series.name
            );
        }
    }

    #[test]
    fn criterion_results_in_both_layouts_and_all_units() {
        let (format, series) = parse_payloads(CRITERION).expect("criterion output parses");
        assert_eq!(format, Format::Criterion);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["raw", "transport", "dinah"]);
        // One-line results in µs, `us` and ns, sorted by size; the
        // `change:` line's percentages are not taken for a result.
        assert_points(
            &series[0],
            &[(8, 27.509e-6), (64, 21.5e-6), (1024, 950.0e-9)],
        );
        // Two-line results in µs and ms.
        assert_points(&series[1], &[(1024, 40.434e-6)]);
        assert_points(&series[2], &[(1_048_576, 1.3481e-3)]);
    }

    #[test]
    fn criterion_errors_name_the_line() {
        let broken = "tcp_payload/raw/8       time:   [26.698 µs 27.509 fortnights 28.643 µs]\n";
        let error = parse_payloads(broken).expect_err("unknown unit");
        let message = format!("{error:#}");
        assert!(message.contains("line 1"), "{message}");
        assert!(
            message.contains("unknown time unit `fortnights`"),
            "{message}"
        );

        let bad_id = "tcp_payload/raw       time:   [1 µs 2 µs 3 µs]\n";
        let message = format!("{:#}", parse_payloads(bad_id).expect_err("no size"));
        assert!(message.contains("<series>/<bytes>"), "{message}");

        let twice =
            "tcp_payload/raw/8 time: [1 µs 2 µs 3 µs]\ntcp_payload/raw/8 time: [1 µs 2 µs 3 µs]\n";
        let message = format!("{:#}", parse_payloads(twice).expect_err("duplicate"));
        assert!(
            message.contains("line 2") && message.contains("second `raw`"),
            "{message}"
        );
    }

    #[test]
    fn mpi_rows_with_binary_sizes() {
        let (format, series) = parse_payloads(MPI).expect("MPI table parses");
        assert_eq!(format, Format::MpiTable);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["raw", "dinah"]);
        assert_points(
            &series[0],
            &[(8, 1.26e-6), (524_288, 409.30e-6), (1_048_576, 781.55e-6)],
        );
        assert_points(
            &series[1],
            &[
                (8, 21.52e-6),
                (524_288, 3026.53e-6),
                (1_048_576, 13269.04e-6),
            ],
        );
    }

    #[test]
    fn sizes_parse_in_every_unit() {
        assert_eq!(parse_size("8 B").expect("size"), 8);
        assert_eq!(parse_size("64 KiB").expect("size"), 65_536);
        assert_eq!(parse_size("256 KiB").expect("size"), 262_144);
        assert_eq!(parse_size("1 MiB").expect("size"), 1_048_576);
        assert!(parse_size("1 MB").is_err());
        assert!(parse_size("0 B").is_err());
    }

    #[test]
    fn malformed_mpi_row_names_its_line() {
        let row = "header\n| payload 8 B: raw ping-pong / dinah echo | 1.26 us | x |\n";
        let message = format!(
            "{:#}",
            parse_payloads(row).expect_err("one time for two series")
        );
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains("2 series but 1 times"), "{message}");
    }

    #[test]
    fn unrelated_text_is_neither_format() {
        let other_group =
            "tcp_round_trip/transport_frames\n    time:   [35.608 µs 36.804 µs 37.734 µs]\n";
        let message = parse_payloads(other_group)
            .expect_err("no payload results")
            .to_string();
        assert!(
            message.contains("neither criterion `tcp_payload/`"),
            "{message}"
        );
        assert!(message.contains("`| payload` rows"), "{message}");
    }

    #[test]
    fn unrelated_file_is_reported_with_its_name() {
        let files = ["xtask/Cargo.toml".to_owned()];
        let mut written = Vec::new();
        let error = run(&files, |path| written.push(path.to_owned()))
            .expect_err("a manifest holds no benchmark results");
        let message = format!("{error:#}");
        assert!(message.contains("plotting `xtask/Cargo.toml`"), "{message}");
        assert!(message.contains("found neither"), "{message}");
        assert!(written.is_empty());
    }

    #[test]
    fn chart_has_a_tick_per_size_and_a_line_per_series() {
        let (format, series) = parse_payloads(MPI).expect("MPI table parses");
        let chart = payload_chart(format, "mpi-x.txt", &series);
        assert_eq!(chart.title, "MPI echo round trip by payload (mpi-x.txt)");
        let Ticks::At(ticks) = &chart.x_axis.ticks else {
            panic!("the size axis has ticks at the sizes measured");
        };
        let labels: Vec<&str> = ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["8 B", "512 KiB", "1 MiB"]);
        let svg = chart.render().expect("chart renders");
        assert_eq!(svg.matches("<polyline").count(), 2);
    }

    #[test]
    fn sizes_and_times_read_as_people_write_them() {
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(65_536), "64 KiB");
        assert_eq!(format_size(1_048_576), "1 MiB");
        assert_eq!(format_size(1500), "1500 B");
        assert_eq!(format_time(1e-5), "10 µs");
        assert_eq!(format_time(1e-4), "100 µs");
        assert_eq!(format_time(1e-3), "1 ms");
        assert_eq!(format_time(1e-8), "10 ns");
        assert_eq!(format_time(10.0), "10 s");
        assert_eq!(format_time(2.5e-6), "2.5 µs");
    }
}
