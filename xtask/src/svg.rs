//! A small log-log line chart written as plain SVG 1.1.
//!
//! [`LogLogChart`] holds a title, two [`Axis`] descriptions and any number
//! of [`Series`] of `(x, y)` points, and [`LogLogChart::render`] turns them
//! into an SVG document: one polyline with circle markers per series, grid
//! lines at the ticks, axis titles and a legend to the right of the plot.
//! The output uses no scripts, styles or external fonts (only the generic
//! `sans-serif` family), so it renders the same in a browser and in
//! GitHub's markdown viewer. Nothing here knows about benchmarks: callers
//! choose the tick values and how they are labelled.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail, ensure};

/// The width of the whole drawing, in pixels.
const WIDTH: f64 = 720.0;
/// The height of the whole drawing, in pixels.
const HEIGHT: f64 = 440.0;

/// The plot area: where the data is drawn. The rest holds the title, tick
/// labels, axis titles and the legend.
const PLOT: Frame = Frame {
    left: 84.0,
    right: 566.0,
    top: 48.0,
    bottom: 376.0,
};

/// The left edge of the legend, right of the plot area.
const LEGEND_LEFT: f64 = 586.0;
/// The centre line of the legend's first entry.
const LEGEND_TOP: f64 = 60.0;
/// The distance between two legend entries.
const LEGEND_STEP: f64 = 22.0;

/// Font size of the chart title, in pixels.
const TITLE_FONT: f64 = 16.0;
/// Font size of the axis titles.
const AXIS_TITLE_FONT: f64 = 13.0;
/// Font size of tick labels and legend entries.
const LABEL_FONT: f64 = 12.0;

/// The smallest gap, in pixels, between two tick labels on one axis.
const LABEL_GAP: f64 = 8.0;

/// A rough width of one character of `sans-serif` text, per pixel of font
/// size; enough to keep tick labels from running into each other.
const CHAR_WIDTH: f64 = 0.6;

/// The radius of a data point's circle.
const MARKER_RADIUS: f64 = 3.5;
/// The stroke width of a series' line.
const LINE_WIDTH: f64 = 2.0;

/// Series colours (the Okabe-Ito palette, distinct for colour-blind
/// readers too), used in order and repeated if there are more series.
const COLOURS: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// The plot area's border and the tick marks.
const FRAME_COLOUR: &str = "#333333";
/// Grid lines at labelled ticks.
const GRID_COLOUR: &str = "#d0d0d0";
/// Grid lines between labelled ticks.
const MINOR_GRID_COLOUR: &str = "#ececec";
/// All text.
const TEXT_COLOUR: &str = "#222222";

/// A log-log line chart.
#[derive(Debug)]
pub(crate) struct LogLogChart {
    /// The heading above the plot.
    pub(crate) title: String,
    /// The horizontal axis.
    pub(crate) x_axis: Axis,
    /// The vertical axis.
    pub(crate) y_axis: Axis,
    /// The lines, drawn and listed in the legend in this order.
    pub(crate) series: Vec<Series>,
}

/// One axis: its title and where its ticks go.
#[derive(Debug)]
pub(crate) struct Axis {
    /// The text along the axis.
    pub(crate) title: String,
    /// The tick rule, which also decides the axis range.
    pub(crate) ticks: Ticks,
}

/// Where an axis puts its ticks, and so how far it extends.
#[derive(Debug)]
pub(crate) enum Ticks {
    /// Ticks at these values (those outside the data are left out). The axis
    /// spans exactly the data, so the smallest and largest values sit on the
    /// edges of the plot area.
    At(Vec<Tick>),
    /// A tick at every power of ten, labelled by the function. The axis is
    /// widened to whole decades around the data.
    Decades(fn(f64) -> String),
}

/// A labelled position on an axis.
#[derive(Debug, Clone)]
pub(crate) struct Tick {
    /// Where the tick is, in data units.
    pub(crate) value: f64,
    /// What is written beside it.
    pub(crate) label: String,
}

/// One line of the chart.
#[derive(Debug)]
pub(crate) struct Series {
    /// The legend entry.
    pub(crate) name: String,
    /// The `(x, y)` points, joined in this order; every value must be
    /// positive and finite.
    pub(crate) points: Vec<(f64, f64)>,
}

/// A rectangle in pixels.
#[derive(Debug, Clone, Copy)]
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// A logarithmic mapping from a range of data values onto a pixel span.
#[derive(Debug, Clone, Copy)]
struct LogScale {
    domain: (f64, f64),
    pixel_low: f64,
    pixel_high: f64,
}

impl LogScale {
    /// Maps `domain.0` to `pixels.0` and `domain.1` to `pixels.1`; both
    /// domain ends must be positive and distinct.
    fn new(domain: (f64, f64), pixels: (f64, f64)) -> Self {
        Self {
            domain,
            pixel_low: pixels.0,
            pixel_high: pixels.1,
        }
    }

    /// The pixel position of `value`.
    fn map(&self, value: f64) -> f64 {
        let (low, high) = (self.domain.0.log10(), self.domain.1.log10());
        let fraction = (value.log10() - low) / (high - low);
        self.pixel_low + fraction * (self.pixel_high - self.pixel_low)
    }

    /// The data range this scale covers, smallest first.
    fn domain(&self) -> (f64, f64) {
        self.domain
    }
}

/// A tick ready to draw: where it goes and whether its label fits.
#[derive(Debug)]
struct PlacedTick {
    pixel: f64,
    label: Option<String>,
}

impl LogLogChart {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> Result<String> {
        let (x_scale, y_scale) = self.scales()?;
        let x_ticks = place_ticks(&self.x_axis.ticks, &x_scale, |label| {
            text_width(label, LABEL_FONT) / 2.0
        });
        let y_ticks = place_ticks(&self.y_axis.ticks, &y_scale, |_| LABEL_FONT / 2.0);
        let mut svg = String::new();
        writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" fill="{TEXT_COLOUR}">"#
        )?;
        writeln!(
            svg,
            r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        )?;
        self.write_title(&mut svg)?;
        write_minor_y_grid(&mut svg, &self.y_axis.ticks, &y_scale)?;
        write_x_grid(&mut svg, &x_ticks)?;
        write_y_grid(&mut svg, &y_ticks)?;
        writeln!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="{FRAME_COLOUR}"/>"#,
            PLOT.left,
            PLOT.top,
            PLOT.right - PLOT.left,
            PLOT.bottom - PLOT.top
        )?;
        write_x_labels(&mut svg, &x_ticks)?;
        write_y_labels(&mut svg, &y_ticks)?;
        self.write_axis_titles(&mut svg)?;
        self.write_series(&mut svg, &x_scale, &y_scale)?;
        self.write_legend(&mut svg)?;
        writeln!(svg, "</svg>")?;
        Ok(svg)
    }

    /// The x and y scales, after checking there is something to draw.
    fn scales(&self) -> Result<(LogScale, LogScale)> {
        ensure!(!self.series.is_empty(), "a chart needs at least one series");
        for series in &self.series {
            ensure!(
                !series.points.is_empty(),
                "series `{}` has no points",
                series.name
            );
            for &(x, y) in &series.points {
                ensure!(
                    is_positive(x) && is_positive(y),
                    "series `{}` has the point ({x}, {y}); a log-log chart needs positive, finite values",
                    series.name
                );
            }
        }
        let xs = self.values(|&(x, _)| x);
        let ys = self.values(|&(_, y)| y);
        let x_domain = axis_domain(&self.x_axis.ticks, &xs).context("the x axis")?;
        let y_domain = axis_domain(&self.y_axis.ticks, &ys).context("the y axis")?;
        Ok((
            LogScale::new(x_domain, (PLOT.left, PLOT.right)),
            LogScale::new(y_domain, (PLOT.bottom, PLOT.top)),
        ))
    }

    /// One coordinate of every point of every series.
    fn values(&self, coordinate: impl Fn(&(f64, f64)) -> f64) -> Vec<f64> {
        self.series
            .iter()
            .flat_map(|series| series.points.iter().map(&coordinate))
            .collect()
    }

    /// The heading, centred above the plot.
    fn write_title(&self, svg: &mut String) -> Result<()> {
        writeln!(
            svg,
            r#"<text x="{:.1}" y="28" font-size="{TITLE_FONT}" font-weight="bold" text-anchor="middle">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        )?;
        Ok(())
    }

    /// The x title below the tick labels, the y title turned up the left.
    fn write_axis_titles(&self, svg: &mut String) -> Result<()> {
        let centre_x = f64::midpoint(PLOT.left, PLOT.right);
        let centre_y = f64::midpoint(PLOT.top, PLOT.bottom);
        writeln!(
            svg,
            r#"<text x="{centre_x:.1}" y="{:.1}" font-size="{AXIS_TITLE_FONT}" text-anchor="middle">{}</text>"#,
            PLOT.bottom + 44.0,
            escape(&self.x_axis.title)
        )?;
        writeln!(
            svg,
            r#"<text x="22" y="{centre_y:.1}" font-size="{AXIS_TITLE_FONT}" text-anchor="middle" transform="rotate(-90 22 {centre_y:.1})">{}</text>"#,
            escape(&self.y_axis.title)
        )?;
        Ok(())
    }

    /// Each series as a group of one polyline and a circle per point.
    fn write_series(&self, svg: &mut String, x_scale: &LogScale, y_scale: &LogScale) -> Result<()> {
        for (series, colour) in self.series.iter().zip(colours()) {
            let pixels: Vec<(f64, f64)> = series
                .points
                .iter()
                .map(|&(x, y)| (x_scale.map(x), y_scale.map(y)))
                .collect();
            let points: Vec<String> = pixels
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            writeln!(svg, r#"<g fill="{colour}">"#)?;
            writeln!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="{LINE_WIDTH}" stroke-linejoin="round" points="{}"/>"#,
                points.join(" ")
            )?;
            for (x, y) in pixels {
                writeln!(
                    svg,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="{MARKER_RADIUS}"/>"#
                )?;
            }
            writeln!(svg, "</g>")?;
        }
        Ok(())
    }

    /// A line, marker and name per series, right of the plot.
    fn write_legend(&self, svg: &mut String) -> Result<()> {
        let line_end = LEGEND_LEFT + 24.0;
        let marker_x = f64::midpoint(LEGEND_LEFT, line_end);
        let mut y = LEGEND_TOP;
        for (series, colour) in self.series.iter().zip(colours()) {
            writeln!(
                svg,
                r#"<line x1="{LEGEND_LEFT:.1}" y1="{y:.1}" x2="{line_end:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="{LINE_WIDTH}"/>"#
            )?;
            writeln!(
                svg,
                r#"<circle cx="{marker_x:.1}" cy="{y:.1}" r="{MARKER_RADIUS}" fill="{colour}"/>"#
            )?;
            writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="{LABEL_FONT}">{}</text>"#,
                line_end + 6.0,
                y + LABEL_FONT / 3.0,
                escape(&series.name)
            )?;
            y += LEGEND_STEP;
        }
        Ok(())
    }
}

/// The series colours, repeating.
fn colours() -> impl Iterator<Item = &'static str> {
    COLOURS.iter().copied().cycle()
}

/// Whether `value` can go on a log axis.
fn is_positive(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

/// The data range an axis shows: the values' extent for [`Ticks::At`],
/// widened to whole decades for [`Ticks::Decades`]. A single value gets a
/// decade either side so the scale has a width.
fn axis_domain(ticks: &Ticks, values: &[f64]) -> Result<(f64, f64)> {
    let Some(low) = values.iter().copied().reduce(f64::min) else {
        bail!("no values");
    };
    let high = values.iter().copied().fold(low, f64::max);
    let (low, high) = match ticks {
        Ticks::At(_) => (low, high),
        Ticks::Decades(_) => (
            10f64.powi(decade_exponent(low, f64::floor)),
            10f64.powi(decade_exponent(high, f64::ceil)),
        ),
    };
    if low < high {
        Ok((low, high))
    } else {
        Ok((low / 10.0, high * 10.0))
    }
}

/// The powers of ten from `low` to `high` (both ends included when they
/// are powers of ten themselves).
fn decades(low: f64, high: f64) -> Vec<f64> {
    (decade_exponent(low, f64::floor)..=decade_exponent(high, f64::ceil))
        .map(|exponent| 10f64.powi(exponent))
        .filter(|&decade| decade >= low * (1.0 - 1e-9) && decade <= high * (1.0 + 1e-9))
        .collect()
}

/// The exponent of the power of ten next to `value` (positive and finite),
/// rounded by `round` (`f64::floor` for the one below, `f64::ceil` above).
#[allow(
    clippy::cast_possible_truncation,
    reason = "log10 of a positive finite f64 lies within -324..=309"
)]
fn decade_exponent(value: f64, round: fn(f64) -> f64) -> i32 {
    round(value.log10()) as i32
}

/// The ticks of an axis inside its scale's range, in pixels, with the
/// labels that would overlap a neighbour's removed. `half_extent` is how
/// far a label reaches along the axis from its tick.
fn place_ticks(
    ticks: &Ticks,
    scale: &LogScale,
    half_extent: impl Fn(&str) -> f64,
) -> Vec<PlacedTick> {
    let (low, high) = scale.domain();
    let inside = |value: f64| value >= low * (1.0 - 1e-9) && value <= high * (1.0 + 1e-9);
    let mut wanted: Vec<Tick> = match ticks {
        Ticks::At(ticks) => ticks.iter().filter(|t| inside(t.value)).cloned().collect(),
        Ticks::Decades(label) => decades(low, high)
            .into_iter()
            .map(|value| Tick {
                value,
                label: label(value),
            })
            .collect(),
    };
    wanted.sort_by(|a, b| a.value.total_cmp(&b.value));
    let spans: Vec<(f64, f64)> = wanted
        .iter()
        .map(|tick| (scale.map(tick.value), half_extent(&tick.label)))
        .collect();
    let keep = labels_that_fit(&spans);
    wanted
        .into_iter()
        .zip(spans)
        .zip(keep)
        .map(|((tick, (pixel, _)), fits)| PlacedTick {
            pixel,
            label: fits.then_some(tick.label),
        })
        .collect()
}

/// Which labels to draw so that none overlap, given each label's centre
/// and half extent along the axis, in axis order. The first and last are
/// kept when they fit beside each other; the ones between are taken
/// greedily.
fn labels_that_fit(spans: &[(f64, f64)]) -> Vec<bool> {
    let mut keep = vec![false; spans.len()];
    let Some(last) = spans.len().checked_sub(1) else {
        return keep;
    };
    let apart =
        |a: usize, b: usize| (spans[a].0 - spans[b].0).abs() >= spans[a].1 + spans[b].1 + LABEL_GAP;
    keep[last] = true;
    if last == 0 || !apart(0, last) {
        return keep;
    }
    keep[0] = true;
    let mut previous = 0;
    for (index, kept) in keep.iter_mut().enumerate().take(last).skip(1) {
        if apart(index, previous) && apart(index, last) {
            *kept = true;
            previous = index;
        }
    }
    keep
}

/// Vertical grid lines at the x ticks, darker where there is a label.
fn write_x_grid(svg: &mut String, ticks: &[PlacedTick]) -> Result<()> {
    for tick in ticks {
        let colour = grid_colour(tick);
        writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{colour}"/>"#,
            PLOT.top,
            PLOT.bottom,
            x = tick.pixel
        )?;
    }
    Ok(())
}

/// Horizontal grid lines at the y ticks, darker where there is a label.
fn write_y_grid(svg: &mut String, ticks: &[PlacedTick]) -> Result<()> {
    for tick in ticks {
        let colour = grid_colour(tick);
        writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}"/>"#,
            PLOT.left,
            PLOT.right,
            y = tick.pixel
        )?;
    }
    Ok(())
}

/// The grid line colour for `tick`.
fn grid_colour(tick: &PlacedTick) -> &'static str {
    if tick.label.is_some() {
        GRID_COLOUR
    } else {
        MINOR_GRID_COLOUR
    }
}

/// Faint horizontal lines at 2 to 9 times each decade of a decade axis.
fn write_minor_y_grid(svg: &mut String, ticks: &Ticks, scale: &LogScale) -> Result<()> {
    let Ticks::Decades(_) = ticks else {
        return Ok(());
    };
    let (low, high) = scale.domain();
    for decade in decades(low, high) {
        for multiple in 2..=9 {
            let value = decade * f64::from(multiple);
            if value >= high {
                break;
            }
            writeln!(
                svg,
                r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{MINOR_GRID_COLOUR}"/>"#,
                PLOT.left,
                PLOT.right,
                y = scale.map(value)
            )?;
        }
    }
    Ok(())
}

/// Tick marks and labels below the plot.
fn write_x_labels(svg: &mut String, ticks: &[PlacedTick]) -> Result<()> {
    for tick in ticks {
        let Some(label) = &tick.label else { continue };
        writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{FRAME_COLOUR}"/>"#,
            PLOT.bottom,
            PLOT.bottom + 5.0,
            x = tick.pixel
        )?;
        writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="{LABEL_FONT}" text-anchor="middle">{}</text>"#,
            tick.pixel,
            PLOT.bottom + 20.0,
            escape(label)
        )?;
    }
    Ok(())
}

/// Tick marks and labels left of the plot.
fn write_y_labels(svg: &mut String, ticks: &[PlacedTick]) -> Result<()> {
    for tick in ticks {
        let Some(label) = &tick.label else { continue };
        writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{FRAME_COLOUR}"/>"#,
            PLOT.left - 5.0,
            PLOT.left,
            y = tick.pixel
        )?;
        writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="{LABEL_FONT}" text-anchor="end">{}</text>"#,
            PLOT.left - 8.0,
            tick.pixel + LABEL_FONT / 3.0,
            escape(label)
        )?;
    }
    Ok(())
}

/// The estimated width of `text` in pixels at `font_size`.
fn text_width(text: &str, font_size: f64) -> f64 {
    let chars = u32::try_from(text.chars().count()).unwrap_or(u32::MAX);
    f64::from(chars) * font_size * CHAR_WIDTH
}

/// `text` with the characters that are special in XML replaced by entities.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal to within rounding, for pixel positions.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// A chart of `series` with text that needs escaping, ticks at 8 and
    /// 1024 on x and decades on y.
    fn chart(series: Vec<Series>) -> LogLogChart {
        LogLogChart {
            title: "round trip <fast> & slow".to_owned(),
            x_axis: Axis {
                title: "bytes".to_owned(),
                ticks: Ticks::At(vec![
                    Tick {
                        value: 8.0,
                        label: "8 B".to_owned(),
                    },
                    Tick {
                        value: 1024.0,
                        label: "1 KiB".to_owned(),
                    },
                ]),
            },
            y_axis: Axis {
                title: "time".to_owned(),
                ticks: Ticks::Decades(|value| format!("{value}")),
            },
            series,
        }
    }

    /// Three points from 8 to 65536, two from 8 to 1048576; y from 20 µs
    /// to 1.3 ms.
    fn two_series() -> Vec<Series> {
        vec![
            Series {
                name: "raw".to_owned(),
                points: vec![(8.0, 2.0e-5), (1024.0, 3.0e-5), (65536.0, 5.0e-5)],
            },
            Series {
                name: "a<b & c".to_owned(),
                points: vec![(8.0, 6.0e-5), (1_048_576.0, 1.3e-3)],
            },
        ]
    }

    /// The `points` attribute of every polyline in `svg`.
    fn polyline_points(svg: &str) -> Vec<Vec<&str>> {
        svg.lines()
            .filter(|line| line.starts_with("<polyline"))
            .map(|line| {
                let start = line.find("points=\"").expect("polyline has points") + 8;
                let end = start + line[start..].find('"').expect("points attribute ends");
                line[start..end].split(' ').collect()
            })
            .collect()
    }

    #[test]
    fn smallest_and_largest_x_land_on_the_plot_edges() {
        let (x_scale, _) = chart(two_series()).scales().expect("chart is valid");
        assert!(close(x_scale.map(8.0), PLOT.left));
        assert!(close(x_scale.map(1_048_576.0), PLOT.right));
        // Logarithmic: the geometric mean of the ends is in the middle.
        let middle = (8.0f64 * 1_048_576.0).sqrt();
        assert!(close(
            x_scale.map(middle),
            f64::midpoint(PLOT.left, PLOT.right)
        ));
    }

    #[test]
    fn decade_axis_widens_to_whole_decades_with_the_top_up() {
        let (_, y_scale) = chart(two_series()).scales().expect("chart is valid");
        // Data from 20 µs to 1.3 ms: the axis runs from 10 µs to 10 ms.
        assert!(close(y_scale.map(1.0e-5), PLOT.bottom));
        assert!(close(y_scale.map(1.0e-2), PLOT.top));
        assert!(y_scale.map(1.0e-3) < y_scale.map(1.0e-4));
    }

    #[test]
    fn one_polyline_per_series_with_a_point_per_datum() {
        let svg = chart(two_series()).render().expect("chart renders");
        let lines = polyline_points(&svg);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), 3);
        assert_eq!(lines[1].len(), 2);
        assert_eq!(
            svg.matches("<circle").count(),
            3 + 2 + 2,
            "markers and legend"
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn first_point_sits_on_the_left_edge() {
        let svg = chart(two_series()).render().expect("chart renders");
        let first = polyline_points(&svg)[0][0];
        let x = first.split(',').next().expect("x coordinate");
        assert_eq!(x, format!("{:.1}", PLOT.left));
    }

    #[test]
    fn text_is_escaped() {
        let svg = chart(two_series()).render().expect("chart renders");
        assert!(svg.contains("round trip &lt;fast&gt; &amp; slow"));
        assert!(svg.contains(">a&lt;b &amp; c</text>"));
        assert!(!svg.contains("<fast>"));
        assert!(!svg.contains("a<b"));
        assert_eq!(escape(r#"'x' "y""#), "&apos;x&apos; &quot;y&quot;");
    }

    #[test]
    fn decade_labels_come_from_the_label_function() {
        let svg = chart(two_series()).render().expect("chart renders");
        for decade in ["0.00001", "0.0001", "0.001", "0.01"] {
            assert!(svg.contains(&format!(">{decade}</text>")), "{decade}");
        }
        assert!(!svg.contains(">0.1</text>"));
    }

    #[test]
    fn overlapping_labels_are_dropped_but_the_ends_kept() {
        // (centre, half width): the label at 10 runs into the first, the one
        // at 55 into the last; the one at 35 fits between.
        let spans = [
            (0.0, 10.0),
            (10.0, 10.0),
            (35.0, 5.0),
            (55.0, 5.0),
            (70.0, 10.0),
        ];
        assert_eq!(labels_that_fit(&spans), [true, false, true, false, true]);
        // Two that collide: the last is kept.
        assert_eq!(labels_that_fit(&[(0.0, 10.0), (5.0, 10.0)]), [false, true]);
        assert_eq!(labels_that_fit(&[(0.0, 10.0)]), [true]);
        assert!(labels_that_fit(&[]).is_empty());
    }

    #[test]
    fn bad_data_is_rejected() {
        let empty = chart(Vec::new()).render().expect_err("no series");
        assert!(empty.to_string().contains("at least one series"));
        let zero = chart(vec![Series {
            name: "zero".to_owned(),
            points: vec![(0.0, 1.0)],
        }])
        .render()
        .expect_err("zero on a log axis");
        assert!(format!("{zero:#}").contains("series `zero`"));
    }

    #[test]
    fn a_single_point_still_gets_a_scale() {
        let svg = chart(vec![Series {
            name: "one".to_owned(),
            points: vec![(64.0, 100.0)],
        }])
        .render()
        .expect("chart renders");
        assert_eq!(polyline_points(&svg), [["325.0,212.0"]]);
    }
}
