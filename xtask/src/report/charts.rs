//! The report's charts, drawn with `plotters` as SVG: log-log line charts,
//! one line per series.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use plotters::prelude::*;

use super::goals::{mpi_payload, mpi_raw_echo};
use super::results::Results;

/// One line of a chart: its name and its (x, y) points, x ascending.
pub(crate) type Series = (String, Vec<(f64, f64)>);

/// A chart to draw.
pub(crate) struct Chart<'a> {
    /// The file name under `docs/plots/`.
    pub(crate) file: &'a str,
    pub(crate) title: &'a str,
    pub(crate) x_desc: &'a str,
    pub(crate) y_desc: &'a str,
    pub(crate) series: Vec<Series>,
}

/// Line colours, one per series in order.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
];

/// Payload sizes as the MPI table prints them, with their byte counts.
const MPI_SIZES: [(&str, f64); 10] = [
    ("8 B", 8.0),
    ("64 B", 64.0),
    ("1 KiB", 1024.0),
    ("8 KiB", 8192.0),
    ("64 KiB", 65536.0),
    ("256 KiB", 262_144.0),
    ("512 KiB", 524_288.0),
    ("1 MiB", 1_048_576.0),
    ("2 MiB", 2_097_152.0),
    ("4 MiB", 4_194_304.0),
];

/// Every chart the results allow (a chart without data is left out).
pub(crate) fn all(r: &Results) -> Vec<Chart<'static>> {
    let charts = [
        Chart {
            file: "tcp-payload.svg",
            title: "TCP echo: bandwidth by payload (one in flight)",
            x_desc: "payload (bytes)",
            y_desc: "MB/s (both directions)",
            series: [
                "raw",
                "raw_spin",
                "transport",
                "dinah",
                "dinah_inline",
                "dinah_f64",
                "dinah_f64_pair",
            ]
            .iter()
            .map(|name| {
                let points = r
                    .times
                    .iter()
                    .filter_map(|(id, &t)| {
                        let bytes: f64 = id
                            .strip_prefix(&format!("tcp_payload/{name}/"))?
                            .parse()
                            .ok()?;
                        Some((bytes, 2.0 * bytes / t / 1e6))
                    })
                    .collect();
                (name.to_string(), points)
            })
            .collect(),
        },
        Chart {
            file: "mpi-payload.svg",
            title: "MPI echo: bandwidth by payload (one in flight)",
            x_desc: "payload (bytes)",
            y_desc: "MB/s (both directions)",
            // The `Vec<f64>` rows say so after the size.
            series: [
                ("raw ping-pong", 0usize, ""),
                ("raw echo", 2, ""),
                ("dinah", 1, ""),
                ("dinah_f64", 1, " as f64"),
                ("dinah_f64_pair", 1, " as two f64 vectors"),
            ]
            .iter()
            .map(|&(name, which, kind)| {
                let points = MPI_SIZES
                    .iter()
                    .filter_map(|&(label, bytes)| {
                        let t = match which {
                            0 => mpi_payload(r, &format!("{label}{kind}"))?.0,
                            1 => mpi_payload(r, &format!("{label}{kind}"))?.1,
                            _ => mpi_raw_echo(r, label)?,
                        };
                        Some((bytes, 2.0 * bytes / t / 1e6))
                    })
                    .collect();
                (name.to_owned(), points)
            })
            .collect(),
        },
        Chart {
            file: "in-flight.svg",
            title: "No-op actions per second by calls in flight",
            x_desc: "calls in flight",
            y_desc: "actions/s",
            series: in_flight(r),
        },
        Chart {
            file: "local.svg",
            title: "Local no-op batches, 2 workers: time per task",
            x_desc: "tasks in the batch",
            y_desc: "ns per task",
            series: [
                ("sequential", "sequential"),
                ("Rayon par_iter", "rayon-par-iter/2"),
                ("dinah domain batch", "dinah-domain-batch/2"),
                ("dinah run_parallel", "dinah-scheduler-run-parallel/2"),
            ]
            .iter()
            .map(|&(name, id)| {
                let points = [256.0, 10_000.0]
                    .iter()
                    .filter_map(|&n: &f64| {
                        let t = r.time(&format!("noop-{n}/{id}"))?;
                        Some((n, t / n * 1e9))
                    })
                    .collect();
                (name.to_owned(), points)
            })
            .collect(),
        },
    ];
    charts
        .into_iter()
        .map(|mut chart| {
            chart.series.retain(|(_, points)| !points.is_empty());
            chart
        })
        .filter(|chart| !chart.series.is_empty())
        .collect()
}

/// Actions per second at 1 and at many calls in flight, per transport and
/// handler kind.
fn in_flight(r: &Results) -> Vec<Series> {
    let criterion = |one: &str, many: &str, n: f64| {
        [(1.0, one), (n, many)]
            .iter()
            .filter_map(|&(x, id)| Some((x, 1.0 / r.time(id)?)))
            .collect::<Vec<_>>()
    };
    // The 1-in-flight criterion rows time one round trip; the many rows
    // time one action of the window, so both read as actions per second.
    let mpi = |kind: &str| {
        let one = super::results::time_cell(
            r.row(
                "mpi",
                &format!("dinah no-op round trip, 1 in flight, {kind}"),
            )?
            .first()?,
        )?;
        let many: f64 = r
            .row("mpi", &format!("dinah no-op, 1024 in flight, {kind}"))?
            .first()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(vec![(1.0, 1.0 / one), (1024.0, many)])
    };
    vec![
        (
            "memory, inline".into(),
            criterion(
                "runtime_round_trip/dinah_noop_inline_memory/1",
                "runtime_round_trip/dinah_noop_inline_memory/256",
                256.0,
            ),
        ),
        (
            "memory, pooled".into(),
            criterion(
                "runtime_round_trip/dinah_noop_memory/1",
                "runtime_round_trip/dinah_noop_memory/256",
                256.0,
            ),
        ),
        (
            "TCP, inline".into(),
            criterion(
                "tcp_round_trip/dinah_noop_inline/1",
                "tcp_throughput/dinah_noop_inline/1024",
                1024.0,
            ),
        ),
        (
            "TCP, pooled".into(),
            criterion(
                "tcp_round_trip/dinah_noop/1",
                "tcp_throughput/dinah_noop/1024",
                1024.0,
            ),
        ),
        ("MPI, inline".into(), mpi("inline").unwrap_or_default()),
        ("MPI, pooled".into(), mpi("pooled").unwrap_or_default()),
    ]
}

/// Draws `chart` into `dir`; returns the SVG's path.
pub(crate) fn draw(chart: &Chart<'_>, dir: &Path) -> Result<std::path::PathBuf> {
    let svg = render(chart)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(chart.file);
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The SVG text of `chart`.
pub(crate) fn render(chart: &Chart<'_>) -> Result<String> {
    let points = || chart.series.iter().flat_map(|(_, p)| p.iter().copied());
    ensure!(points().next().is_some(), "`{}` has no points", chart.file);
    let bounds = |pick: fn((f64, f64)) -> f64| {
        let (lo, hi) = points()
            .map(pick)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        // Half a decade of room either side, and never an empty range.
        (lo / 2.0, (hi * 2.0).max(lo * 4.0))
    };
    let (x_lo, x_hi) = bounds(|p| p.0);
    let (y_lo, y_hi) = bounds(|p| p.1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut context = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(78)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(plot_error)?;
        context
            .configure_mesh()
            .x_desc(chart.x_desc)
            .y_desc(chart.y_desc)
            .x_label_formatter(&|v| short_number(*v))
            .y_label_formatter(&|v| short_number(*v))
            .draw()
            .map_err(plot_error)?;
        for ((name, points), colour) in chart.series.iter().zip(COLOURS.iter().cycle()) {
            let style = colour.stroke_width(2);
            context
                .draw_series(LineSeries::new(points.iter().copied(), style))
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            context
                .draw_series(
                    points
                        .iter()
                        .map(|&point| Circle::new(point, 3, colour.filled())),
                )
                .map_err(plot_error)?;
        }
        context
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// A drawing error as an `anyhow` error (plotters' errors borrow the
/// backend).
fn plot_error(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {error}")
}

/// `v` with a k/M/G suffix, for axis labels.
fn short_number(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    if scaled.fract().abs() < 1e-9 || scaled >= 100.0 {
        format!("{scaled:.0}{suffix}")
    } else {
        format!("{scaled:.1}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_renders_its_series_and_labels() {
        let chart = Chart {
            file: "t.svg",
            title: "title",
            x_desc: "x",
            y_desc: "y",
            series: vec![
                ("raw".into(), vec![(8.0, 1.0), (1024.0, 100.0)]),
                ("dinah".into(), vec![(8.0, 0.5), (1024.0, 80.0)]),
            ],
        };
        let svg = render(&chart).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        // plotters writes each text on its own line.
        for text in ["title", "raw", "dinah", "1k"] {
            assert!(svg.contains(&format!("\n{text}\n")), "{text}");
        }
        assert!(svg.matches("<polyline").count() >= 2);
    }

    #[test]
    fn an_empty_chart_is_an_error() {
        let chart = Chart {
            file: "t.svg",
            title: "",
            x_desc: "",
            y_desc: "",
            series: vec![],
        };
        assert!(render(&chart).is_err());
    }

    #[test]
    fn numbers_are_shortened() {
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(short_number(256.0), "256");
        assert_eq!(short_number(10_000.0), "10k");
    }
}
