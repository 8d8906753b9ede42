//! The performance goals the report checks, each read from the results of
//! the same run as a ratio against its floor.

use std::fmt::Write as _;

use super::results::{Results, time_cell};

/// One goal and where it stands.
#[derive(Debug)]
pub(crate) struct Goal {
    /// The area (`local`, `runtime`, `TCP`, `MPI`).
    pub(crate) area: &'static str,
    /// What is asked, in words.
    pub(crate) goal: &'static str,
    /// The figures it was judged on.
    pub(crate) figure: String,
    /// Met, not met, or not measured in this run (`None`).
    pub(crate) met: Option<bool>,
}

impl Goal {
    /// The status cell.
    pub(crate) fn status(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        }
    }
}

/// A figure and whether it passes, for goals judged on several.
struct Check {
    label: String,
    value: f64,
    /// The value it is judged against, in the value's unit.
    limit: f64,
    pass: bool,
}

impl Check {
    /// `value` passing at or below `limit`.
    fn at_most(label: impl Into<String>, value: f64, limit: f64) -> Self {
        let pass = value <= limit;
        Self {
            label: label.into(),
            value,
            limit,
            pass,
        }
    }

    /// `value` passing at or above `limit`.
    fn at_least(label: impl Into<String>, value: f64, limit: f64) -> Self {
        let pass = value >= limit;
        Self {
            label: label.into(),
            value,
            limit,
            pass,
        }
    }
}

/// Builds a goal from checks; `None` values make it unmeasured.
fn goal(
    area: &'static str,
    text: &'static str,
    checks: impl IntoIterator<Item = Option<Check>>,
    unit: &str,
) -> Goal {
    let checks: Option<Vec<Check>> = checks.into_iter().collect();
    match checks {
        Some(checks) if !checks.is_empty() => Goal {
            area,
            goal: text,
            figure: checks
                .iter()
                .map(|c| {
                    // A value that rounds to its limit gets a third
                    // decimal: "1.30x" beside "not met" would read as a
                    // pass.
                    let close = format!("{:.2}", c.value) == format!("{:.2}", c.limit);
                    let digits = if close { 3 } else { 2 };
                    format!("{} {:.*}{unit}", c.label, digits, c.value)
                })
                .collect::<Vec<_>>()
                .join(", "),
            met: Some(checks.iter().all(|c| c.pass)),
        },
        _ => Goal {
            area,
            goal: text,
            figure: "no result".into(),
            met: None,
        },
    }
}

/// `numerator / denominator` of two criterion times, passing at or below
/// `limit`.
fn time_ratio(r: &Results, label: &str, num: &str, den: &str, limit: f64) -> Option<Check> {
    let value = r.time(num)? / r.time(den)?;
    Some(Check::at_most(label, value, limit))
}

/// Actions per second of a criterion row timed per action, passing at or
/// above `floor`; the value is reported in millions.
fn rate_at_least(r: &Results, label: &str, id: &str, floor: f64) -> Option<Check> {
    let rate = 1.0 / r.time(id)?;
    Some(Check::at_least(label, rate / 1e6, floor / 1e6))
}

/// The rate of criterion row `id` as a share of row `floor`'s rate (both
/// timed per item), passing at or above `at_least`.
fn rate_share(r: &Results, label: &str, id: &str, floor: &str, at_least: f64) -> Option<Check> {
    let value = r.time(floor)? / r.time(id)?;
    Some(Check::at_least(label, value, at_least))
}

/// A time from the MPI table's row `first` (its first value cell).
fn mpi_time(r: &Results, first: &str) -> Option<f64> {
    time_cell(r.row("mpi", first)?.first()?)
}

/// The MPI payload row of `size` (as the table prints it): (raw, dinah).
pub(crate) fn mpi_payload(r: &Results, size: &str) -> Option<(f64, f64)> {
    let cell = r
        .row(
            "mpi",
            &format!("payload {size}: raw ping-pong / dinah echo"),
        )?
        .first()?;
    let (raw, dinah) = cell.split_once(" / ")?;
    Some((time_cell(raw)?, time_cell(dinah)?))
}

/// The MPI raw echo of `size` (as the table prints it).
pub(crate) fn mpi_raw_echo(r: &Results, size: &str) -> Option<f64> {
    mpi_time(r, &format!("payload {size}: raw echo"))
}

/// The MPI actions-per-second row of `kind` (`pooled`, `inline`).
fn mpi_rate(r: &Results, kind: &str) -> Option<f64> {
    let cell = r
        .row("mpi", &format!("dinah no-op, 1024 in flight, {kind}"))?
        .first()?;
    cell.split_whitespace().next()?.parse().ok()
}

/// Every goal, judged on `r`.
pub(crate) fn all(r: &Results) -> Vec<Goal> {
    let mut goals = local(r);
    goals.extend(runtime(r));
    goals.extend(tcp(r));
    goals.extend(mpi(r));
    goals
}

fn local(r: &Results) -> Vec<Goal> {
    let batch = |group: &str, w: u32| {
        time_ratio(
            r,
            &format!("{group}, {w} workers"),
            &format!("{group}/dinah-domain-batch/{w}"),
            &format!("{group}/rayon-par-iter/{w}"),
            1.0,
        )
    };
    let cores: f64 = r.machine("cores").parse().unwrap_or(2.0);
    let efficiency = |w: u32| {
        let sequential = r.time("cpu-1m-x256/sequential")?;
        let time = r.time(&format!("cpu-1m-x256/dinah-domain-batch/{w}"))?;
        let value = sequential / (f64::from(w).min(cores) * time);
        Some(Check::at_least(format!("{w} workers"), value, 0.95))
    };
    vec![
        goal(
            "local",
            "a domain batch of no-ops no slower than Rayon's `par_iter` (256 and 10,000 tasks)",
            [
                batch("noop-256", 2),
                batch("noop-256", 4),
                batch("noop-10000", 2),
                batch("noop-10000", 4),
            ],
            "x",
        ),
        goal(
            "local",
            "`Scheduler::run_parallel` of 10,000 no-ops within 1.5x Rayon",
            [2, 4].map(|w| {
                time_ratio(
                    r,
                    &format!("{w} workers"),
                    &format!("noop-10000/dinah-scheduler-run-parallel/{w}"),
                    &format!("noop-10000/rayon-par-iter/{w}"),
                    1.5,
                )
            }),
            "x",
        ),
        goal(
            "local",
            "CPU efficiency of a domain batch (1M-step tasks) at least 0.95",
            [efficiency(2), efficiency(4)],
            "",
        ),
        goal(
            "local",
            "single-job submit-to-result latency no slower than Rayon, hot and idle",
            ["latency-hot", "latency-idle"].map(|group| {
                time_ratio(
                    r,
                    group,
                    &format!("{group}/dinah-domain-submit-join"),
                    &format!("{group}/rayon-spawn-oneshot"),
                    1.0,
                )
            }),
            "x",
        ),
    ]
}

fn runtime(r: &Results) -> Vec<Goal> {
    let row = |kind: &str, floor: &str, n: u32| {
        time_ratio(
            r,
            &format!("{kind}, {n} in flight"),
            &format!(
                "runtime_round_trip/dinah_noop{kind_id}_memory/{n}",
                kind_id = if kind == "inline" { "_inline" } else { "" }
            ),
            &format!("runtime_round_trip/{floor}/{n}"),
            2.0,
        )
    };
    vec![goal(
        "runtime",
        "in memory, a no-op within 2x its floor (inline: the raw frames; pooled: the raw frames with the no-op on a Rayon pool)",
        [
            row("inline", "raw_frames_memory", 1),
            row("inline", "raw_frames_memory", 256),
            row("pooled", "raw_frames_rayon_memory", 1),
            row("pooled", "raw_frames_rayon_memory", 256),
        ],
        "x",
    )]
}

fn tcp(r: &Results) -> Vec<Goal> {
    const TRANSPORT: &str = "tcp_throughput/transport_frames/1024";
    const RAW: &str = "tcp_throughput/raw_pipelined_64b/1024";
    let mib = 1u64 << 20;
    let floor = ["raw", "raw_spin"]
        .iter()
        .filter_map(|series| r.time(&format!("tcp_payload/{series}/{mib}")))
        .reduce(f64::min);
    // Both placements of the echo's handler are judged: the floors charge
    // no pool hop, and the pooled echo is the row the goal was set on.
    let bandwidth = |label: &str, series: &str| {
        let value = floor? / r.time(&format!("tcp_payload/{series}/{mib}"))?;
        Some(Check::at_least(format!("1 MiB, {label}"), value, 0.9))
    };
    vec![
        goal(
            "TCP",
            "inline no-op round trip within 1.3x the busy-polling raw ping-pong",
            [time_ratio(
                r,
                "inline",
                "tcp_round_trip/dinah_noop_inline/1",
                "tcp_round_trip/raw_spin_ping_pong_8b",
                1.3,
            )],
            "x",
        ),
        goal(
            "TCP",
            "at least 500,000 actions/s with 1,024 in flight (millions/s)",
            [
                rate_at_least(r, "inline", "tcp_throughput/dinah_noop_inline/1024", 5e5),
                rate_at_least(r, "pooled", "tcp_throughput/dinah_noop/1024", 5e5),
            ],
            "",
        ),
        goal(
            "TCP",
            "with 1,024 in flight, at least a third of the transport-alone rate",
            [
                rate_share(
                    r,
                    "inline",
                    "tcp_throughput/dinah_noop_inline/1024",
                    TRANSPORT,
                    1.0 / 3.0,
                ),
                rate_share(
                    r,
                    "pooled",
                    "tcp_throughput/dinah_noop/1024",
                    TRANSPORT,
                    1.0 / 3.0,
                ),
            ],
            "",
        ),
        goal(
            "TCP",
            "with 1,024 in flight, at least half the raw pipelined echo's rate",
            [
                rate_share(
                    r,
                    "inline",
                    "tcp_throughput/dinah_noop_inline/1024",
                    RAW,
                    0.5,
                ),
                rate_share(r, "pooled", "tcp_throughput/dinah_noop/1024", RAW, 0.5),
            ],
            "",
        ),
        goal(
            "TCP",
            "a 1 MiB echo at 0.9x or more of the faster raw floor's bandwidth",
            [
                bandwidth("pooled", "dinah"),
                bandwidth("inline", "dinah_inline"),
            ],
            "x",
        ),
    ]
}

fn mpi(r: &Results) -> Vec<Goal> {
    let raw = mpi_time(r, "raw mpi 8 B ping-pong (immediate + test)");
    let round_trip = |kind: &str, limit: f64| {
        let raw = raw?;
        let value = mpi_time(r, &format!("dinah no-op round trip, 1 in flight, {kind}"))? / raw;
        Some(Check::at_most(kind, value, limit))
    };
    let rate = |kind: &str| {
        let value = mpi_rate(r, kind)?;
        Some(Check::at_least(kind, value / 1e6, 1.0))
    };
    let mib =
        mpi_payload(r, "1 MiB").map(|(raw, dinah)| Check::at_most("1 MiB", dinah / raw, 1.25));
    let mut payload = goal(
        "MPI",
        "a 1 MiB echo within 1.25x the raw ping-pong",
        [mib],
        "x",
    );
    // Context, not the goal's floor: the raw echo sends back what it
    // received, as dinah's echo does; the ping-pong's buffer is never
    // written.
    let echo = mpi_payload(r, "1 MiB").zip(mpi_raw_echo(r, "1 MiB"));
    if let (Some(_), Some(((_, dinah), echo))) = (payload.met, echo) {
        let _ = write!(
            payload.figure,
            " (against a raw echo {:.2}x, context)",
            dinah / echo
        );
    }
    vec![
        goal(
            "MPI",
            "inline no-op round trip within 2x the raw ping-pong",
            [round_trip("inline", 2.0)],
            "x",
        ),
        goal(
            "MPI",
            "pooled no-op round trip within 4x the raw ping-pong",
            [round_trip("pooled", 4.0)],
            "x",
        ),
        goal(
            "MPI",
            "at least 1,000,000 actions/s with 1,024 in flight (millions/s)",
            [rate("inline"), rate("pooled")],
            "",
        ),
        payload,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_is_met_only_when_every_check_passes_and_unmeasured_without_data() {
        let mut r = Results::default();
        r.add(
            "tcp",
            "tcp_round_trip/raw_spin_ping_pong_8b time:   [7 µs 8 µs 9 µs]\n\
             tcp_round_trip/dinah_noop_inline/1 time:   [13 µs 14 µs 15 µs]\n",
        )
        .unwrap();
        let goals = tcp(&r);
        assert_eq!(goals[0].met, Some(false));
        assert!(goals[0].figure.contains("1.75x"), "{}", goals[0].figure);
        assert_eq!(goals[1].met, None);
        assert_eq!(goals[1].status(), "not measured");
    }

    /// The 1 MiB echo is judged with its handler pooled and inline: one
    /// placement passing is not enough, and a missing one is no result.
    #[test]
    fn the_tcp_echo_goal_needs_both_placements() {
        let bandwidth = |inline: &str| {
            let mut r = Results::default();
            r.add(
                "tcp",
                &format!(
                    "tcp_payload/raw/1048576 time:   [1 ms 1 ms 1 ms]\n\
                     tcp_payload/raw_spin/1048576 time:   [800 µs 900 µs 1 ms]\n\
                     tcp_payload/dinah/1048576 time:   [1 ms 1.2 ms 2 ms]\n{inline}"
                ),
            )
            .unwrap();
            tcp(&r).pop().unwrap()
        };
        let goal = bandwidth("tcp_payload/dinah_inline/1048576 time:   [900 µs 950 µs 1 ms]\n");
        assert_eq!(goal.met, Some(false), "{}", goal.figure);
        assert_eq!(goal.figure, "1 MiB, pooled 0.75x, 1 MiB, inline 0.95x");
        assert_eq!(bandwidth("").met, None);
    }

    #[test]
    fn a_figure_that_rounds_to_its_limit_shows_a_third_decimal() {
        let judged = |inline: &str| {
            let mut r = Results::default();
            let text = format!(
                "tcp_round_trip/raw_spin_ping_pong_8b time:   [6 µs 6.0478 µs 7 µs]\n\
                 tcp_round_trip/dinah_noop_inline/1 time:   [7 µs {inline} µs 8 µs]\n"
            );
            r.add("tcp", &text).unwrap();
            tcp(&r).remove(0)
        };
        let missed = judged("7.88");
        assert_eq!(
            (missed.figure.as_str(), missed.met),
            ("inline 1.303x", Some(false))
        );
        let passed = judged("7.86");
        assert_eq!(
            (passed.figure.as_str(), passed.met),
            ("inline 1.300x", Some(true))
        );
        let far = judged("9.07");
        assert_eq!(
            (far.figure.as_str(), far.met),
            ("inline 1.50x", Some(false))
        );
    }

    #[test]
    fn mpi_rows_are_read_from_the_table() {
        let mut r = Results::default();
        r.add(
            "mpi",
            "| measurement | value | goal / note |\n| --- | --- | --- |\n\
             | raw mpi 8 B ping-pong (immediate + test) | 0.50 us | floor |\n\
             | dinah no-op round trip, 1 in flight, inline | 0.90 us | x |\n\
             | dinah no-op, 1024 in flight, inline | 2900000 actions/s | x |\n\
             | payload 1 MiB: raw ping-pong / dinah echo | 100.00 us / 120.00 us | x |\n\
             | payload 1 MiB: raw echo | 80.00 us | x |\n",
        )
        .unwrap();
        let goals = mpi(&r);
        assert_eq!(goals[0].met, Some(true));
        assert_eq!(goals[1].met, None);
        assert_eq!(goals[2].met, None, "pooled missing");
        assert_eq!(goals[3].met, Some(true));
        assert_eq!(
            goals[3].figure, "1 MiB 1.20x (against a raw echo 1.50x, context)",
            "judged on the ping-pong, the echo beside it"
        );
    }
}
