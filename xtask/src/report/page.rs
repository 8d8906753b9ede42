//! The text of `docs/benchmarks.md`, written fresh from one run's results.

use std::fmt::Write as _;

use super::goals::{self, Goal};
use super::results::Results;

/// Where the page links its run's raw outputs and the charts.
pub(crate) struct Links<'a> {
    /// The run's directory, relative to `docs/`.
    pub(crate) outputs: &'a str,
    /// The charts drawn, as file names under `docs/plots/`.
    pub(crate) charts: &'a [String],
}

/// The whole page.
pub(crate) fn render(r: &Results, links: &Links<'_>) -> String {
    let mut page = String::new();
    let goals = goals::all(r);
    header(&mut page, r, links);
    goal_table(&mut page, &goals);
    core(&mut page, r);
    seed(&mut page, r);
    local(&mut page, r, links);
    runtime(&mut page, r);
    instructions(&mut page, r);
    tcp(&mut page, r, links);
    mpi(&mut page, r, links);
    history(&mut page);
    page
}

/// `seconds` with a unit that keeps three significant digits.
pub(crate) fn fmt_time(seconds: f64) -> String {
    let (value, unit) = match seconds {
        s if s >= 1.0 => (s, "s"),
        s if s >= 1e-3 => (s * 1e3, "ms"),
        s if s >= 1e-6 => (s * 1e6, "µs"),
        s if s >= 1e-9 => (s * 1e9, "ns"),
        s => (s * 1e12, "ps"),
    };
    match value {
        v if v >= 100.0 => format!("{v:.0} {unit}"),
        v if v >= 10.0 => format!("{v:.1} {unit}"),
        v => format!("{v:.2} {unit}"),
    }
}

/// A per-action time as a rate.
fn fmt_rate(seconds: f64) -> String {
    let rate = 1.0 / seconds;
    if rate >= 1e6 {
        format!("{:.2} M/s", rate / 1e6)
    } else {
        format!("{:.0} k/s", rate / 1e3)
    }
}

/// `id`'s time, or a dash.
fn time_or_dash(r: &Results, id: &str) -> String {
    r.time(id).map_or_else(|| "-".into(), fmt_time)
}

/// `id`'s time and its ratio to `floor`'s, or a dash.
fn vs(r: &Results, id: &str, floor: &str) -> String {
    match (r.time(id), r.time(floor)) {
        (Some(t), Some(f)) => format!("{} ({:.2}x)", fmt_time(t), t / f),
        (Some(t), None) => fmt_time(t),
        _ => "-".into(),
    }
}

fn header(page: &mut String, r: &Results, links: &Links<'_>) {
    let _ = write!(
        page,
        "# Benchmarks\n\n\
         Written by `cargo xtask bench --report` from one run of every benchmark \
         in `benches/`, in one sitting; do not edit it by hand. Every ratio is \
         taken against a floor measured in the same run. The raw outputs are in \
         [`{outputs}`]({outputs}); `cargo xtask bench --report --from <that \
         directory>` writes this page again from them.\n\n\
         | | |\n| --- | --- |\n\
         | commit | {commit} |\n| date | {date} |\n| CPU | {cpu} |\n\
         | cores | {cores} |\n| memory | {memory} |\n| kernel | {kernel} |\n\
         | rustc | {rustc} |\n| MPI | {mpi} |\n\n",
        outputs = links.outputs,
        commit = r.machine("commit"),
        date = r.machine("date"),
        cpu = r.machine("cpu"),
        cores = r.machine("cores"),
        memory = r.machine("memory"),
        kernel = r.machine("kernel"),
        rustc = r.machine("rustc"),
        mpi = r.machine("mpi"),
    );
    page.push_str(
        "Method: criterion's middle estimate for the criterion benchmarks; the \
         median of several batches for `benches/mpi.rs` (two ranks under \
         `mpirun`); callgrind's exact counts for `benches/instructions.rs`. \
         Two-rank benchmarks share the machine's cores between both ranks.\n\n",
    );
}

fn goal_table(page: &mut String, goals: &[Goal]) {
    page.push_str("## Where the goals stand\n\n| area | goal | this run | status |\n| --- | --- | --- | --- |\n");
    for goal in goals {
        let _ = writeln!(
            page,
            "| {} | {} | {} | {} |",
            goal.area,
            goal.goal,
            goal.figure,
            goal.status()
        );
    }
    page.push('\n');
}

/// A table of every criterion result whose id starts with one of
/// `prefixes`.
fn id_table(page: &mut String, r: &Results, prefixes: &[&str]) {
    page.push_str("| benchmark | time |\n| --- | --- |\n");
    for (id, t) in r.times_under(prefixes) {
        let _ = writeln!(page, "| `{id}` | {} |", fmt_time(t));
    }
    page.push('\n');
}

fn core(page: &mut String, r: &Results) {
    page.push_str(
        "## Core: wire codec and tables (`core_wire`, `core_tables`)\n\n\
         One operation each, on the owner thread.\n\n",
    );
    id_table(page, r, &["wire/", "pending/", "dedup/"]);
}

fn seed(page: &mut String, r: &Results) {
    page.push_str(
        "## The v0.1 harness's cases (`seed`)\n\n\
         The cases the seed design's benchmark harness reported, each with a \
         row: a direct `Executor` call, an immediate `Scheduler` submission, \
         a sequential drain, and a parallel drain of no-op tasks. The \
         1,000,000-iteration CPU case is the `cpu-1m-x256` row of the next \
         section.\n\n",
    );
    id_table(page, r, &["seed/"]);
}

fn local(page: &mut String, r: &Results, links: &Links<'_>) {
    page.push_str(
        "## Local execution (`local`)\n\n\
         The same task sets on dedicated pools; ratios to Rayon's `par_iter` \
         with as many workers.\n\n\
         | workload | workers | sequential | Rayon | dinah domain | dinah run_parallel | v0.1 barrier |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for group in ["noop-256", "noop-10000", "cpu-100k-x256", "cpu-1m-x256"] {
        for workers in [2, 4] {
            let rayon = format!("{group}/rayon-par-iter/{workers}");
            let sequential = if workers == 2 {
                time_or_dash(r, &format!("{group}/sequential"))
            } else {
                String::new()
            };
            let _ = writeln!(
                page,
                "| {group} | {workers} | {sequential} | {} | {} | {} | {} |",
                time_or_dash(r, &rayon),
                vs(r, &format!("{group}/dinah-domain-batch/{workers}"), &rayon),
                vs(
                    r,
                    &format!("{group}/dinah-scheduler-run-parallel/{workers}"),
                    &rayon
                ),
                vs(r, &format!("{group}/v01-batch-barrier/{workers}"), &rayon),
            );
        }
    }
    page.push_str(
        "\n| single no-op job, submit to result | dinah domain | Rayon `spawn` + channel |\n| --- | --- | --- |\n",
    );
    for (group, what) in [
        ("latency-hot", "workers hot"),
        ("latency-idle", "after 1 ms idle"),
    ] {
        let rayon = format!("{group}/rayon-spawn-oneshot");
        let _ = writeln!(
            page,
            "| {what} | {} | {} |",
            vs(r, &format!("{group}/dinah-domain-submit-join"), &rayon),
            time_or_dash(r, &rayon),
        );
    }
    page.push('\n');
    page.push_str(
        "The same cases in a fresh process per case and variant, Rayon and \
         dinah alternating for several rounds (`alternate`: the median of the \
         children's medians; on a small VM where the scheduler places a pool's \
         threads decides a whole criterion run, and this settles it):\n\n",
    );
    // The children's own medians stay in the saved output.
    copied_table(page, r, "alternate", 4);
    chart_link(page, links, "local.svg", "Local no-op batches");
}

fn runtime(page: &mut String, r: &Results) {
    page.push_str(
        "## The runtime in memory (`runtime`)\n\n\
         A no-op action between two ranks of one process over the in-memory \
         transport, against the same request and response frames pushed \
         through the same transport by hand (the floor), and against those \
         frames with the no-op run on a Rayon pool (a pooled handler's floor). \
         With 256 in flight the times are per action.\n\n\
         | in flight | raw frames | raw frames + Rayon hop | dinah inline | dinah pooled | allocations per action (inline / pooled) |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for n in [1, 256] {
        let id = |name: &str| format!("runtime_round_trip/{name}/{n}");
        let allocations = |name: &str| {
            r.allocations
                .get(&id(name))
                .map_or_else(|| "-".into(), |a| format!("{a:.1}"))
        };
        let _ = writeln!(
            page,
            "| {n} | {} | {} | {} | {} | {} / {} |",
            time_or_dash(r, &id("raw_frames_memory")),
            time_or_dash(r, &id("raw_frames_rayon_memory")),
            vs(r, &id("dinah_noop_inline_memory"), &id("raw_frames_memory")),
            vs(r, &id("dinah_noop_memory"), &id("raw_frames_rayon_memory")),
            allocations("dinah_noop_inline_memory"),
            allocations("dinah_noop_memory"),
        );
    }
    page.push('\n');
}

/// Copies `bench`'s own table, if it printed one: its first `columns`
/// columns (all of them for `usize::MAX`).
fn copied_table(page: &mut String, r: &Results, bench: &str, columns: usize) {
    let Some(header) = r.headers.get(bench) else {
        page.push_str("Not measured in this run.\n\n");
        return;
    };
    let cut = |cells: &[String]| cells[..columns.min(cells.len())].join(" | ");
    let _ = writeln!(page, "| {} |", cut(header));
    let _ = writeln!(page, "|{}", " --- |".repeat(columns.min(header.len())));
    for row in r.rows_of(bench) {
        let _ = writeln!(page, "| {} |", cut(row));
    }
    page.push('\n');
}

fn instructions(page: &mut String, r: &Results) {
    page.push_str(
        "## The runtime's own cost in instructions (`instructions`)\n\n\
         Instructions per action, both ranks, counted by callgrind over the \
         in-memory transport driven by one thread (inline handlers only), \
         against the raw frames through the same transport.\n\n",
    );
    copied_table(page, r, "instructions", usize::MAX);
}

fn tcp(page: &mut String, r: &Results, links: &Links<'_>) {
    let id = |s: &str| format!("tcp_round_trip/{s}");
    let floor = id("raw_spin_ping_pong_8b");
    let _ = write!(
        page,
        "## TCP (`tcp`)\n\n\
         Two ranks over loopback as two threads of one process. The floor for a \
         round trip is a ping-pong over non-blocking sockets that both sides \
         poll without sleeping, as dinah's owner thread does while it waits; \
         the blocking ping-pong is context, and so is the pool-hop reference, \
         the polling ping-pong with a pooled handler's two hand-offs added \
         (beside the pooled row: not a floor, its cost varies widely from \
         run to run).\n\n\
         | round trip, 1 in flight | time (ratio to the polling floor) |\n| --- | --- |\n\
         | raw ping-pong, polling (floor) | {} |\n\
         | raw ping-pong, blocking | {} |\n\
         | raw ping-pong, polling, each reply after a no-op on a Rayon pool (pool-hop reference) | {} |\n\
         | transport alone, no runtime | {} |\n\
         | dinah no-op, inline | {} |\n\
         | dinah no-op, pooled | {} |\n\n",
        time_or_dash(r, &floor),
        vs(r, &id("raw_ping_pong_8b"), &floor),
        vs(r, &id("raw_spin_pool_hop_8b"), &floor),
        vs(r, &id("transport_frames"), &floor),
        vs(r, &id("dinah_noop_inline/1"), &floor),
        vs(r, &id("dinah_noop/1"), &floor),
    );
    let rate = |s: &str| {
        r.time(&format!("tcp_throughput/{s}"))
            .map_or_else(|| "-".into(), fmt_rate)
    };
    let _ = write!(
        page,
        "Every 1,024-in-flight row keeps a sliding window (each answer lets the \
         next request go), except the two batch rows, context: there, 1,024 \
         calls are spawned at once and all waited for before the next batch, \
         so the window empties between batches.\n\n\
         | 1,024 in flight | rate |\n| --- | --- |\n\
         | raw pipelined 64-byte echo | {} |\n| transport alone | {} |\n\
         | dinah no-op, inline | {} |\n| dinah no-op, pooled | {} |\n\
         | dinah no-op, inline, batches of 1,024 | {} |\n\
         | dinah no-op, pooled, batches of 1,024 | {} |\n\n",
        rate("raw_pipelined_64b/1024"),
        rate("transport_frames/1024"),
        rate("dinah_noop_inline/1024"),
        rate("dinah_noop/1024"),
        rate("dinah_noop_inline_batches/1024"),
        rate("dinah_noop_batches/1024"),
    );
    page.push_str(
        "The payload rows echo one buffer back and forth: the raw ping-pongs \
         send the buffer they have just read into, and dinah's `Echo` \
         sends the vector the previous echo returned, its handler on a worker \
         (pooled) or on the serving owner thread (inline); the floors charge \
         no pool hop, and the transport-alone row copies its frame each time. \
         The pooled `EchoF64` echoes the same bytes as a `Vec<f64>`, and \
         `EchoF64Pair` as two `Vec<f64>` of half of them each (the first \
         travels as a middle part of its frame).\n\n\
         | payload, one echo in flight | raw, blocking | raw, polling | transport alone | dinah, pooled | pooled / faster raw | dinah, inline | inline / faster raw | dinah, `Vec<f64>` | `Vec<f64>` / faster raw | dinah, two `Vec<f64>` | two / faster raw |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut sizes: Vec<u64> = r
        .times
        .keys()
        .filter_map(|id| id.strip_prefix("tcp_payload/dinah/")?.parse().ok())
        .collect();
    sizes.sort_unstable();
    for size in sizes {
        let t = |series: &str| r.time(&format!("tcp_payload/{series}/{size}"));
        let floor = [t("raw"), t("raw_spin")]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let ratio = |series: &str| match (t(series), floor) {
            (Some(d), Some(f)) => format!("{:.2}x", d / f),
            _ => "-".into(),
        };
        let cell = |series: &str| t(series).map_or_else(|| "-".into(), fmt_time);
        let _ = writeln!(
            page,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_bytes(size),
            cell("raw"),
            cell("raw_spin"),
            cell("transport"),
            cell("dinah"),
            ratio("dinah"),
            cell("dinah_inline"),
            ratio("dinah_inline"),
            cell("dinah_f64"),
            ratio("dinah_f64"),
            cell("dinah_f64_pair"),
            ratio("dinah_f64_pair"),
        );
    }
    page.push('\n');
    chart_link(
        page,
        links,
        "tcp-payload.svg",
        "TCP echo bandwidth by payload",
    );
    chart_link(
        page,
        links,
        "in-flight.svg",
        "Actions per second by calls in flight",
    );
}

fn mpi(page: &mut String, r: &Results, links: &Links<'_>) {
    page.push_str(
        "## MPI (`mpi`)\n\n\
         Two ranks under `mpirun -n 2`, as the benchmark prints its table \
         (the raw rows use the `mpi` crate directly). The transport-alone \
         row sends a no-op's request and result frames through dinah's MPI \
         driver with no runtime, so the driver's share of a round trip and \
         the runtime's can be told apart. In a payload row dinah's echo \
         (pooled) sends the vector the previous echo returned, while the \
         raw ping-pong sends a buffer it never writes; the raw echo row \
         below it sends back the buffer it has just received into, as \
         dinah does. The ranks run as `cargo xtask bench mpi` starts \
         them, with Open MPI's single-copy transfers off (containers often \
         deny them) and unbound; with single copy on, the ping-pong takes \
         about half the echo's time from 64 KiB to 1 MiB, and dinah's \
         1 MiB echo reads about 1.9x the ping-pong and 1.1x to 1.2x the \
         echo. Unbound, the small pooled echoes read about 4.8 µs or 12 µs \
         depending on where Linux places the serving rank's worker, \
         which the rows run before them can tip ([`mpi.md`](mpi.md), \
         Measured). The 1 MiB goal is judged against the ping-pong, the \
         echo is context.\n\n",
    );
    copied_table(page, r, "mpi", usize::MAX);
    chart_link(
        page,
        links,
        "mpi-payload.svg",
        "MPI echo bandwidth by payload",
    );
}

fn history(page: &mut String) {
    page.push_str(
        "## History\n\n\
         Earlier sittings, the optimisations that got here and the \
         alternated comparisons of commits are kept with their dates and \
         commits in [`artifacts/benchmarks/`](../artifacts/benchmarks/): \
         [the runtime's optimisations](../artifacts/benchmarks/history-runtime-optimisations.md) \
         and [every section of this page before it was generated](../artifacts/benchmarks/history-benchmarks-to-2026-12-04.md).\n",
    );
}

/// An image line for `file` if it was drawn.
fn chart_link(page: &mut String, links: &Links<'_>, file: &str, alt: &str) {
    if links.charts.iter().any(|c| c == file) {
        let _ = writeln!(page, "![{alt}](plots/{file})\n");
    }
}

/// A byte count as the benchmarks label payloads.
fn fmt_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_three_digits() {
        assert_eq!(fmt_time(7.9464e-6), "7.95 µs");
        assert_eq!(fmt_time(0.534), "534 ms");
        assert_eq!(fmt_time(786e-12), "786 ps");
        assert_eq!(fmt_time(14.1e-6), "14.1 µs");
    }

    #[test]
    fn a_page_from_a_few_results_has_every_section_and_no_panics() {
        let mut r = Results::default();
        r.add(
            "tcp",
            "tcp_round_trip/raw_spin_ping_pong_8b time:   [7 µs 8 µs 9 µs]\n\
             tcp_payload/dinah/1048576 time:   [1 ms 2 ms 3 ms]\n\
             tcp_payload/dinah_inline/1048576 time:   [1 ms 1.5 ms 2 ms]\n\
             tcp_payload/raw/1048576 time:   [1 ms 1 ms 1 ms]\n",
        )
        .unwrap();
        let page = render(
            &r,
            &Links {
                outputs: "../artifacts/benchmarks/x",
                charts: &["tcp-payload.svg".into()],
            },
        );
        for section in ["## Where the goals stand", "## TCP", "## MPI", "## History"] {
            assert!(page.contains(section), "{section}");
        }
        assert!(
            page.contains(
                "| 1 MiB | 1.00 ms | - | - | 2.00 ms | 2.00x | 1.50 ms | 1.50x | - | - | - | - |\n"
            ),
            "{page}"
        );
        assert!(page.contains("plots/tcp-payload.svg"));
        // A benchmark that printed nothing says so.
        assert!(page.contains("`alternate`"));
        assert!(page.contains("Not measured in this run."));
        assert!(!page.contains("plots/mpi-payload.svg"));
    }
}
