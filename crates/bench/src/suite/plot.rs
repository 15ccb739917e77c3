//! The report's plots, drawn with `plotters`: one SVG and one PNG per chart.
//!
//! [`charts`] turns a test's rows into a [`Chart`] (value against message size on a log
//! axis with power-of-two ticks — log–log for times, a linear value axis for rates;
//! barrier against the rank count — one line per rank count and runtime) and, when Open
//! MPI ran, a ratio chart (phalanx / Open MPI per size, a reference line at 1). Two tests
//! have charts of their own: `applications` is the speed-up over 1 rank against p, one
//! line per example and the ideal (speed-up = p) dashed, log–log so that the ideal is the
//! diagonal; `allgather_k` is the time against k (log axis, a tick at each k; time from
//! zero) with the default algorithm's time as a dashed level line. [`render`] writes
//! `<stem>.svg` and `<stem>.png`.
//!
//! Text needs a TrueType font for its metrics, in both formats: [`load_font`] finds one
//! (`$PHALANX_REPORT_FONT`, else DejaVu Sans or Liberation Sans where Linux distributions
//! put them, else any `*Sans*.ttf` under /usr/share/fonts) and registers it for
//! `sans-serif`; without one it returns an error saying what to install, and the report
//! stops before measuring anything. Drawing returns errors, it does not panic.

use super::plan::{variant_k, Kind, Spec, APPS, DEFAULT_VARIANT};
use super::results::{runtime_name, Row, OPENMPI, PHALANX, PHALANX_C, RUNTIME_ORDER, SPEEDUP};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::ComposedElement;
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Pixel size of every plot.
pub const SIZE: (u32, u32) = (1100, 650);
/// Font family the text uses (registered by [`load_font`]).
const FAMILY: &str = "sans-serif";

/// Where distributions keep a sans-serif TrueType font, most likely first.
const FONT_PATHS: [&str; 6] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Finds a font (see the module docs), registers it for the plots and returns its path.
pub fn load_font() -> Result<PathBuf, String> {
    let path = match std::env::var_os("PHALANX_REPORT_FONT") {
        Some(p) => PathBuf::from(p),
        None => find_font().ok_or_else(|| {
            "no TrueType font found for the plots' text: install one (Debian/Ubuntu: \
             apt-get install fonts-dejavu-core), set PHALANX_REPORT_FONT=/path/to/font.ttf, \
             or pass --no-plots"
                .to_string()
        })?,
    };
    let bytes = std::fs::read(&path)
        .map_err(|e| format!("cannot read the font {}: {e}", path.display()))?;
    // The font table wants 'static bytes; one font per process, so leaking is bounded.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| format!("{} is not a TrueType/OpenType font", path.display()))?;
    Ok(path)
}

fn find_font() -> Option<PathBuf> {
    if let Some(p) = FONT_PATHS.iter().map(PathBuf::from).find(|p| p.is_file()) {
        return Some(p);
    }
    let mut found = Vec::new();
    collect_fonts(Path::new("/usr/share/fonts"), 4, &mut found);
    found.sort();
    found.into_iter().next()
}

fn collect_fonts(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && depth > 0 {
            collect_fonts(&path, depth - 1, found);
        } else if path.extension().is_some_and(|e| e == "ttf")
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains("Sans"))
        {
            found.push(path);
        }
    }
}

/// How points are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Triangle,
    Square,
    /// A line alone (the ideal, a reference level).
    None,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    label: String,
    color: RGBColor,
    dashed: bool,
    marker: Marker,
    points: Vec<(f64, f64)>,
}

/// What the horizontal axis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XAxis {
    /// Bytes: power-of-two ticks labelled 1, 4, 16, ..., 1K, ..., 1M.
    Bytes,
    /// Counts (ranks, k): a tick at each value, labelled as an integer.
    Counts,
}

/// One chart, ready to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File-name stem (`allreduce`, `allreduce-ratio`).
    pub stem: String,
    /// Caption.
    pub title: String,
    x_label: String,
    y_label: String,
    x_axis: XAxis,
    y_log: bool,
    series: Vec<Series>,
    reference: Option<f64>,
}

impl Chart {
    /// True when there is at least one point to draw.
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }
}

/// Tableau's ten colours.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn style_of(runtime: &str) -> (bool, Marker) {
    match runtime {
        OPENMPI => (true, Marker::Square),
        PHALANX_C => (false, Marker::Triangle),
        _ => (false, Marker::Circle),
    }
}

/// The chart of one test and, when Open MPI ran it, its ratio chart.
/// `quick`: the rows come from the quick suite (the applications' problems are smaller).
pub fn charts(spec: &Spec, rows: &[Row], quick: bool) -> Vec<Chart> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.test == spec.name).collect();
    match spec.kind {
        Kind::Speedup => return vec![speedup_chart(spec, &rows, quick)],
        Kind::AgainstK => return vec![k_chart(spec, &rows)],
        _ => {}
    }
    let ps: Vec<usize> = rows
        .iter()
        .map(|r| r.p)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let runtimes: Vec<&str> = RUNTIME_ORDER
        .iter()
        .copied()
        .filter(|rt| rows.iter().any(|r| r.runtime == *rt))
        .collect();
    let unit = rows.first().map_or("", |r| r.unit.as_str());
    let barrier = spec.kind == Kind::Barrier;
    let x_axis = if barrier { XAxis::Counts } else { XAxis::Bytes };
    let y_log = spec.kind != Kind::Rate;
    let color = |p_index: usize, rt_index: usize| {
        PALETTE[if ps.len() > 1 { p_index } else { rt_index } % PALETTE.len()]
    };
    let mut series = Vec::new();
    for (ri, rt) in runtimes.iter().enumerate() {
        let (dashed, marker) = style_of(rt);
        if barrier {
            let points = rows
                .iter()
                .filter(|r| r.runtime == *rt)
                .map(|r| (r.p as f64, r.value))
                .collect();
            series.push(Series {
                label: runtime_name(rt).to_string(),
                color: PALETTE[ri % PALETTE.len()],
                dashed,
                marker,
                points,
            });
            continue;
        }
        for (pi, &p) in ps.iter().enumerate() {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.runtime == *rt && r.p == p && r.size > 0)
                .map(|r| (r.size as f64, r.value))
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    label: format!("{}, p = {p}", runtime_name(rt)),
                    color: color(pi, ri),
                    dashed,
                    marker,
                    points,
                });
            }
        }
    }
    let scale = if y_log { ", log scale" } else { "" };
    let mut out = vec![Chart {
        stem: spec.name.to_string(),
        title: format!("{} — phalanx-bench {}", spec.title, spec.name),
        x_label: x_label(spec),
        y_label: format!("{} ({}{scale})", spec.quantity, display_unit(unit)),
        x_axis,
        y_log,
        series,
        reference: None,
    }];
    if let Some(ratio) = ratio_chart(spec, &rows, &ps, x_axis) {
        out.push(ratio);
    }
    out
}

/// Gray of the ideal and of reference levels.
const REFERENCE_GRAY: RGBColor = RGBColor(90, 90, 90);

/// Markers of the lines of a chart, in turn.
const MARKERS: [Marker; 3] = [Marker::Circle, Marker::Triangle, Marker::Square];

/// `applications`: speed-up against p per example (in [`APPS`] order), the ideal dashed.
fn speedup_chart(spec: &Spec, rows: &[&Row], quick: bool) -> Chart {
    let rows: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.unit == SPEEDUP && r.runtime == PHALANX)
        .collect();
    let mut series = Vec::new();
    for (i, app) in APPS.iter().enumerate() {
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.variant == app.name && r.value > 0.0)
            .map(|r| (r.p as f64, r.value))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if points.is_empty() {
            continue;
        }
        series.push(Series {
            label: format!("{} ({})", app.name, app.problem(quick)),
            color: PALETTE[i % PALETTE.len()],
            dashed: false,
            marker: MARKERS[i % MARKERS.len()],
            points,
        });
    }
    let ps: BTreeSet<usize> = rows.iter().map(|r| r.p).collect();
    if !series.is_empty() {
        series.push(Series {
            label: "ideal (speed-up = p)".into(),
            color: REFERENCE_GRAY,
            dashed: true,
            marker: Marker::None,
            points: ps.iter().map(|&p| (p as f64, p as f64)).collect(),
        });
    }
    Chart {
        stem: spec.name.to_string(),
        title: format!("{} — {}", spec.title, spec.name),
        x_label: "Processes (ranks, log scale)".into(),
        y_label: format!(
            "{} (sequential time / parallel time, log scale)",
            spec.quantity
        ),
        x_axis: XAxis::Counts,
        y_log: true,
        series,
        reference: None,
    }
}

/// `allgather_k`: time against k, the default algorithm's time as a dashed level.
fn k_chart(spec: &Spec, rows: &[&Row]) -> Chart {
    let rows: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.runtime == PHALANX)
        .collect();
    let unit = rows.first().map_or("", |r| r.unit.as_str());
    let mut points: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((f64::from(variant_k(&r.variant)?), r.value)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let default = rows.iter().find(|r| r.variant == DEFAULT_VARIANT);
    let (lo, hi) = (
        points.first().map_or(1.0, |p| p.0),
        points.last().map_or(1.0, |p| p.0),
    );
    let mut series = Vec::new();
    if !points.is_empty() {
        series.push(Series {
            label: "mcast2 (k-concurrency multicast)".into(),
            color: PALETTE[0],
            dashed: false,
            marker: Marker::Circle,
            points,
        });
    }
    if let Some(d) = default {
        series.push(Series {
            label: "default algorithm (variables unset)".into(),
            color: REFERENCE_GRAY,
            dashed: true,
            marker: Marker::None,
            points: vec![(lo, d.value), (hi, d.value)],
        });
    }
    let (size, p) = rows.first().map_or((0, 0), |r| (r.size, r.p));
    Chart {
        stem: spec.name.to_string(),
        title: format!(
            "All-gather of {} per rank at p = {p} against k — {}",
            bytes_text(size),
            spec.name
        ),
        x_label: "k: ranks multicasting at once (PHALANX_COLL_ALLGATHER_K, log scale)".into(),
        y_label: format!("{} ({})", spec.quantity, display_unit(unit)),
        x_axis: XAxis::Counts,
        y_log: false,
        series,
        reference: None,
    }
}

/// phalanx / Open MPI per size and p: the C program's medians (same source on both
/// runtimes) when there are some, else phalanx-bench's figures.
fn ratio_chart(spec: &Spec, rows: &[&Row], ps: &[usize], x_axis: XAxis) -> Option<Chart> {
    if !rows.iter().any(|r| r.runtime == OPENMPI) {
        return None;
    }
    let numerator = if rows.iter().any(|r| r.runtime == PHALANX_C) {
        PHALANX_C
    } else {
        PHALANX
    };
    let value = |rt: &str, p: usize, size: usize| {
        rows.iter()
            .find(|r| r.runtime == rt && r.p == p && r.size == size)
            .map(|r| r.value)
    };
    let mut series = Vec::new();
    let mut barrier_points = Vec::new();
    for (pi, &p) in ps.iter().enumerate() {
        let mut points = Vec::new();
        for r in rows.iter().filter(|r| r.runtime == OPENMPI && r.p == p) {
            if let Some(num) = value(numerator, p, r.size) {
                if r.value > 0.0 {
                    let ratio = num / r.value;
                    match x_axis {
                        XAxis::Counts => barrier_points.push((p as f64, ratio)),
                        XAxis::Bytes if r.size > 0 => points.push((r.size as f64, ratio)),
                        XAxis::Bytes => {}
                    }
                }
            }
        }
        if !points.is_empty() {
            series.push(Series {
                label: format!("p = {p}"),
                color: PALETTE[pi % PALETTE.len()],
                dashed: false,
                marker: Marker::Circle,
                points,
            });
        }
    }
    if !barrier_points.is_empty() {
        series.push(Series {
            label: "all p".into(),
            color: PALETTE[0],
            dashed: false,
            marker: Marker::Circle,
            points: barrier_points,
        });
    }
    let better = if spec.kind == Kind::Rate {
        "above 1: phalanx faster"
    } else {
        "below 1: phalanx faster"
    };
    let what = if numerator == PHALANX_C {
        "same C source, medians"
    } else {
        "Rust API vs C"
    };
    Some(Chart {
        stem: format!("{}-ratio", spec.name),
        title: format!("{}: phalanx / Open MPI ({what}; {better})", spec.name),
        x_label: x_label(spec),
        y_label: format!("{} ratio, phalanx / Open MPI", spec.quantity),
        x_axis,
        y_log: false,
        series,
        reference: Some(1.0),
    })
}

fn x_label(spec: &Spec) -> String {
    match (spec.kind, spec.name) {
        (Kind::Barrier, _) => "Processes (ranks, log scale)".into(),
        (_, "ring" | "chain") => "Payload per message (bytes = 8 × words, log scale)".into(),
        (_, "flood") => "Fragment size (bytes = 8 × words, log scale)".into(),
        _ => "Message size (bytes, log scale)".into(),
    }
}

fn display_unit(unit: &str) -> String {
    match unit {
        "us" => "µs".into(),
        "Messages/s" => "messages/s".into(),
        other => other.into(),
    }
}

/// Writes `<stem>.svg` and `<stem>.png` of `chart` into `dir`; returns the file names.
pub fn render(chart: &Chart, dir: &Path) -> Result<[String; 2], String> {
    let svg = format!("{}.svg", chart.stem);
    let png = format!("{}.png", chart.stem);
    draw(
        SVGBackend::new(&dir.join(&svg), SIZE).into_drawing_area(),
        chart,
    )
    .map_err(|e| format!("{svg}: {e}"))?;
    draw(
        BitMapBackend::new(&dir.join(&png), SIZE).into_drawing_area(),
        chart,
    )
    .map_err(|e| format!("{png}: {e}"))?;
    Ok([svg, png])
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| *x > 0.0)
        .collect();
    let ys: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite() && (!chart.y_log || *y > 0.0))
        .chain(chart.reference)
        .collect();
    let (Some(x_lo), Some(x_hi), Some(y_lo), Some(y_hi)) = (min(&xs), max(&xs), min(&ys), max(&ys))
    else {
        return Err("nothing to plot".into());
    };
    let (x0, x1) = (x_lo / 1.4, x_hi * 1.4);
    let x_keys = match chart.x_axis {
        XAxis::Bytes => power_of_two_keys(x0, x1),
        XAxis::Counts => xs
            .iter()
            .map(|x| *x as u64)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|x| x as f64)
            .collect(),
    };
    let x = (x0..x1).log_scale().with_key_points(x_keys);
    let frame = if chart.y_log {
        Frame {
            x: (x0, x1),
            y: (y_lo / 1.3, y_hi * 1.3),
            y_log: true,
        }
    } else {
        // Rates from zero.
        let lo = if y_lo >= 0.0 { 0.0 } else { y_lo * 1.1 };
        Frame {
            x: (x0, x1),
            y: (lo, y_hi * 1.1),
            y_log: false,
        }
    };
    let (corner, frame) = place_legend(chart, frame);
    if chart.y_log {
        let (lo, hi) = frame.y;
        let y = (lo..hi).log_scale().with_key_points(log_keys(lo, hi));
        draw_in(&root, chart, x, y, corner)?;
    } else {
        draw_in(&root, chart, x, frame.y.0..frame.y.1, corner)?;
    }
    root.present().map_err(err)
}

/// The value ranges of a chart, for placing its legend.
#[derive(Debug, Clone, Copy)]
struct Frame {
    x: (f64, f64),
    y: (f64, f64),
    y_log: bool,
}

impl Frame {
    /// Where `(x, y)` falls in the plotting area, 0..1 on each axis (x always log).
    fn unit(&self, (x, y): (f64, f64)) -> (f64, f64) {
        let ux = (x / self.x.0).ln() / (self.x.1 / self.x.0).ln();
        let uy = if self.y_log {
            (y / self.y.0).ln() / (self.y.1 / self.y.0).ln()
        } else {
            (y - self.y.0) / (self.y.1 - self.y.0)
        };
        (ux, uy)
    }
}

/// The legend's corners, in the order tried.
const CORNERS: [SeriesLabelPosition; 4] = [
    SeriesLabelPosition::UpperLeft,
    SeriesLabelPosition::UpperRight,
    SeriesLabelPosition::LowerRight,
    SeriesLabelPosition::LowerLeft,
];

/// A corner where the legend covers no line or point; when every corner is taken, the
/// upper left with the value axis extended so that the lines stay below the legend.
fn place_legend(chart: &Chart, frame: Frame) -> (SeriesLabelPosition, Frame) {
    // The legend's size as a share of the plotting area (about 970 × 510 pixels at 17 px
    // text: 9.6 px per character, 21 px per line, margins and the sample line).
    let chars = chart
        .series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    let w = (24.0 + f64::from(LEGEND_SAMPLE + 10) + 9.6 * chars as f64 + 12.0) / 970.0;
    let h = (21.0 * chart.series.len() as f64 + 24.0 + 12.0) / 510.0;
    // Points along every line (straight in plotting-area space), and the reference line.
    let mut samples = Vec::new();
    let reference = chart
        .reference
        .map(|r| vec![(frame.x.0, r), (frame.x.1, r)]);
    for line in chart
        .series
        .iter()
        .map(|s| &s.points)
        .chain(reference.as_ref())
    {
        let unit: Vec<(f64, f64)> = line.iter().map(|&p| frame.unit(p)).collect();
        samples.extend(unit.iter().copied());
        for pair in unit.windows(2) {
            let ((ax, ay), (bx, by)) = (pair[0], pair[1]);
            samples.extend((1..16).map(|i| {
                let t = f64::from(i) / 16.0;
                (ax + (bx - ax) * t, ay + (by - ay) * t)
            }));
        }
    }
    let covers = |corner: &SeriesLabelPosition, (x, y): (f64, f64)| {
        let left = x <= w;
        let right = x >= 1.0 - w;
        let top = y >= 1.0 - h;
        let bottom = y <= h;
        match corner {
            SeriesLabelPosition::UpperLeft => left && top,
            SeriesLabelPosition::UpperRight => right && top,
            SeriesLabelPosition::LowerRight => right && bottom,
            _ => left && bottom,
        }
    };
    for corner in CORNERS {
        if !samples.iter().any(|&p| covers(&corner, p)) {
            return (corner, frame);
        }
    }
    // Every corner is crossed: raise the top so the highest sample sits under the legend.
    let top = samples.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let share = (1.0 - h).max(0.3) / top;
    let (y0, y1) = frame.y;
    let y = if frame.y_log {
        (y0, y0 * (y1 / y0).powf(1.0 / share))
    } else {
        (y0, y0 + (y1 - y0) / share)
    };
    (SeriesLabelPosition::UpperLeft, Frame { y, ..frame })
}

fn draw_in<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    c: &Chart,
    x: X,
    y: Y,
    legend: SeriesLabelPosition,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FAMILY, 24))
        .margin(18)
        .x_label_area_size(62)
        .y_label_area_size(96)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let x_fmt = |v: &f64| match c.x_axis {
        XAxis::Bytes => bytes_label(*v),
        XAxis::Counts => format!("{}", v.round()),
    };
    let y_fmt = |v: &f64| number_label(*v);
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FAMILY, 17))
        .axis_desc_style((FAMILY, 20))
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.05))
        .draw()
        .map_err(err)?;
    if let Some(r) = c.reference {
        let (x0, x1) = (chart.x_range().start, chart.x_range().end);
        let style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(vec![(x0, r), (x1, r)], 8, 6, style))
            .map_err(err)?;
    }
    for s in &c.series {
        let color = s.color;
        // References (no markers) are thinner than measurements.
        let width = if s.marker == Marker::None { 2 } else { 3 };
        let line = ShapeStyle::from(&color).stroke_width(width);
        let points = s.points.clone();
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(points, 12, 7, line))
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(points, line))
                .map_err(err)?;
        }
        let fill = ShapeStyle::from(&color).filled();
        let pts = s.points.iter().copied();
        let anno = match s.marker {
            Marker::Circle => chart.draw_series(pts.map(|p| Circle::new(p, 5, fill))),
            Marker::Triangle => chart.draw_series(pts.map(|p| TriangleMarker::new(p, 7, fill))),
            Marker::Square => chart.draw_series(
                pts.map(|p| EmptyElement::at(p) + Rectangle::new([(-5, -5), (5, 5)], fill)),
            ),
            // No element: a legend entry for the line alone.
            Marker::None => chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>()),
        }
        .map_err(err)?;
        anno.label(s.label.as_str());
        let dashed = s.dashed;
        match s.marker {
            Marker::Circle => {
                anno.legend(move |at| legend_line(at, dashed, line) + Circle::new((0, 0), 5, fill))
            }
            Marker::Triangle => anno.legend(move |at| {
                legend_line(at, dashed, line) + TriangleMarker::new((0, 0), 7, fill)
            }),
            Marker::Square => anno.legend(move |at| {
                legend_line(at, dashed, line) + Rectangle::new([(-5, -5), (5, 5)], fill)
            }),
            Marker::None => anno.legend(move |at| legend_line(at, dashed, line)),
        };
    }
    chart
        .configure_series_labels()
        .position(legend)
        .label_font((FAMILY, 17))
        .legend_area_size(LEGEND_SAMPLE + 10)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .margin(12)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// A legend sample's line: an anchor with two path pieces, in pixels.
type LegendLine<DB> =
    ComposedElement<(i32, i32), DB, PathElement<(i32, i32)>, PathElement<(i32, i32)>>;

/// Width of a legend sample in pixels (the label starts after it and a gap).
const LEGEND_SAMPLE: i32 = 40;

/// A legend sample's line, centred right of `(x, y)`: two dashes when `dashed`, else a
/// line drawn in two pieces (so both kinds have one type); the marker goes on top.
fn legend_line<DB: DrawingBackend>(
    (x, y): (i32, i32),
    dashed: bool,
    line: ShapeStyle,
) -> LegendLine<DB> {
    let gap = if dashed { 7 } else { -7 };
    EmptyElement::at((x + LEGEND_SAMPLE / 2, y))
        + PathElement::new(vec![(-LEGEND_SAMPLE / 2, 0), (-7, 0)], line)
        + PathElement::new(vec![(gap, 0), (LEGEND_SAMPLE / 2, 0)], line)
}

fn min(v: &[f64]) -> Option<f64> {
    v.iter().copied().reduce(f64::min)
}

fn max(v: &[f64]) -> Option<f64> {
    v.iter().copied().reduce(f64::max)
}

/// Powers of two from `lo` to `hi`, every second or fourth one on wide ranges (at most
/// about a dozen ticks).
fn power_of_two_keys(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log2().floor() as i32, hi.log2().ceil() as i32);
    let stride = ((b - a) / 12 + 1).max(1);
    // Even exponents read best (1, 4, 16, 64, ...): start on one when striding.
    let start = if stride > 1 && a % 2 != 0 { a - 1 } else { a };
    (start..=b)
        .step_by(stride as usize)
        .map(|e| 2f64.powi(e))
        .filter(|v| *v >= lo * 0.99 && *v <= hi * 1.01)
        .collect()
}

/// Round ticks inside `lo..hi`: 1-2-5 per decade, denser on narrow ranges, 1 alone on
/// ranges over five decades.
fn log_keys(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades <= 1.2 {
        &[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    } else if decades <= 2.5 {
        &[1.0, 2.0, 3.0, 5.0]
    } else if decades <= 5.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let keys: Vec<f64> = (a..=b)
        .flat_map(|e| mantissas.iter().map(move |m| scale10(*m, e)))
        .filter(|v| *v >= lo && *v <= hi)
        .collect();
    if keys.len() >= 2 {
        keys
    } else {
        vec![lo, (lo * hi).sqrt(), hi]
    }
}

/// `m` × 10^`e`, dividing for negative `e` so that 0.6 comes out as 0.6 (a label).
fn scale10(m: f64, e: i32) -> f64 {
    if e < 0 {
        m / 10f64.powi(-e)
    } else {
        m * 10f64.powi(e)
    }
}

/// 1 B, 512 B, 64 KiB, 1 MiB.
fn bytes_text(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// 1, 512, 1K, 64K, 1M, 4M.
fn bytes_label(v: f64) -> String {
    let v = v.round() as u64;
    match v {
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

/// Three significant digits at most, `k` and `M` for large values: 0.05, 2.5, 400, 20k, 1.5M.
fn number_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = if scaled == 0.0 {
        0
    } else {
        (2 - scaled.abs().log10().floor() as i32).clamp(0, 6) as usize
    };
    let s = format!("{scaled:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_labels() {
        assert_eq!(
            power_of_two_keys(1.0, 4096.0),
            [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0]
        );
        let wide = power_of_two_keys(1.0, (1 << 20) as f64);
        assert_eq!(wide.first(), Some(&1.0));
        assert!(wide.len() <= 12 && wide.contains(&1024.0), "{wide:?}");
        assert_eq!(
            log_keys(0.5, 300.0),
            [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0]
        );
        assert_eq!(log_keys(0.38, 0.95), [0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
        assert_eq!(bytes_label(1.0), "1");
        assert_eq!(bytes_label(65536.0), "64K");
        assert_eq!(bytes_label(4194304.0), "4M");
        assert_eq!(number_label(0.05), "0.05");
        assert_eq!(number_label(2.5), "2.5");
        assert_eq!(number_label(400.0), "400");
        assert_eq!(number_label(20000.0), "20k");
        assert_eq!(number_label(1.5e6), "1.5M");
        assert_eq!(number_label(0.0), "0");
    }

    fn row(test: &str, p: usize, size: usize, value: f64, unit: &str, variant: &str) -> Row {
        Row {
            test: test.into(),
            p,
            size,
            value,
            unit: unit.into(),
            runtime: PHALANX.into(),
            variant: variant.into(),
        }
    }

    #[test]
    fn speedup_chart_has_a_line_per_application_and_the_ideal() {
        let spec = super::super::plan::spec("applications").unwrap();
        let mut rows = Vec::new();
        for (p, s) in [(1, 0.98), (2, 1.6), (4, 1.9)] {
            rows.push(row("applications", p, 0, s, SPEEDUP, "matmul"));
            rows.push(row("applications", p, 0, 0.5 / s, "s", "matmul"));
        }
        rows.push(row("applications", 2, 0, 0.8, SPEEDUP, "jacobi"));
        rows.push(row("applications", 1, 0, 1.1, SPEEDUP, "jacobi"));
        let charts = charts(spec, &rows, false);
        assert_eq!(charts.len(), 1);
        let c = &charts[0];
        assert_eq!(
            (c.stem.as_str(), c.x_axis, c.y_log),
            ("applications", XAxis::Counts, true)
        );
        let lines: Vec<(&str, usize, bool)> = c
            .series
            .iter()
            .map(|s| (s.label.as_str(), s.points.len(), s.dashed))
            .collect();
        assert_eq!(
            lines,
            [
                ("matmul (512 × 512, mean of 3)", 3, false),
                ("jacobi (256 × 256 grid, 500 sweeps)", 2, false),
                ("ideal (speed-up = p)", 3, true)
            ]
        );
        assert_eq!(c.series[1].points, [(1.0, 1.1), (2.0, 0.8)], "sorted by p");
        assert_eq!(c.series[2].points, [(1.0, 1.0), (2.0, 2.0), (4.0, 4.0)]);
        assert!(!super::charts(spec, &[], false)[0].has_points());
    }

    #[test]
    fn k_chart_has_the_default_as_a_level() {
        let spec = super::super::plan::spec("allgather_k").unwrap();
        let rows = vec![
            row("allgather_k", 4, 65536, 80.0, "us", "k=1"),
            row("allgather_k", 4, 65536, 27.0, "us", "k=4"),
            row("allgather_k", 4, 65536, 28.0, "us", "k=8"),
            row("allgather_k", 4, 65536, 17.5, "us", "default"),
            row("allgather", 4, 65536, 1.0, "us", ""),
        ];
        let c = &charts(spec, &rows, false)[0];
        assert!(!c.y_log && c.title.contains("64 KiB") && c.title.contains("p = 4"));
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].points, [(1.0, 80.0), (4.0, 27.0), (8.0, 28.0)]);
        assert_eq!(c.series[1].points, [(1.0, 17.5), (8.0, 17.5)]);
        assert!(c.series[1].dashed && c.series[1].marker == Marker::None);
        assert!(c.y_label.contains("µs"));
    }
}
