//! SVG charts for experiment results: line charts (one line per policy) and step charts (jobs in
//! execution per resource over time).
//!
//! Text is laid out with plotters' built-in size estimate and written as SVG `<text>`, so no
//! system font is needed to draw; the viewer's sans-serif font renders it.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Chart size in pixels.
pub const CHART_SIZE: (u32, u32) = (960, 600);

/// Line colours: distinct on white and in print (Tableau 10's first eight); cycled beyond.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// A named series of (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("chart '{title}' has no finite data point to draw")]
    NoData { title: String },
    #[error("drawing the chart {path} failed: {message}")]
    Draw { path: String, message: String },
}

/// Which way a series' points are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    Straight,
    /// Each value holds until the next point's x.
    Step,
}

/// Draws a line chart with a point marker per value and a legend. Points that are not finite
/// are left out (an undefined metric, such as a ratio over zero jobs, has no place on a chart).
pub fn line_chart(
    path: impl AsRef<Path>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    draw(path.as_ref(), title, x_label, y_label, series, Join::Straight)
}

/// Draws a step chart: each series is a list of change points (x, value), the value holding
/// until the next change.
pub fn step_chart(
    path: impl AsRef<Path>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    draw(path.as_ref(), title, x_label, y_label, series, Join::Step)
}

/// Turns job executions `(resource, start, end)` into one step series per resource: the number
/// of jobs running on it, at every time it changes. `names[r]` names resource `r` (a missing
/// name becomes "resource r").
pub fn jobs_in_execution(executions: &[(usize, f64, f64)], names: &[String]) -> Vec<Series> {
    let resources = executions.iter().map(|e| e.0 + 1).max().unwrap_or(0).max(names.len());
    let mut events: Vec<Vec<(f64, i64)>> = vec![Vec::new(); resources];
    for &(r, start, end) in executions {
        if start.is_finite() && end.is_finite() && end >= start {
            events[r].push((start, 1));
            events[r].push((end, -1));
        }
    }
    events
        .into_iter()
        .enumerate()
        .map(|(r, mut ev)| {
            // Ends before starts at the same instant: a job that ends as another begins does
            // not make a spike.
            ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut points: Vec<(f64, f64)> = vec![(0.0, 0.0)];
            let mut running = 0i64;
            for (t, d) in ev {
                running += d;
                match points.last_mut() {
                    Some(last) if last.0 == t => last.1 = running as f64,
                    _ => points.push((t, running as f64)),
                }
            }
            let name = names.get(r).cloned().unwrap_or_else(|| format!("resource {r}"));
            (name, points)
        })
        .collect()
}

fn finite_points(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    pts.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect()
}

fn step_points(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &(x, y)) in pts.iter().enumerate() {
        if i > 0 {
            out.push((x, pts[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// A range that shows every point, with a little air, and never collapses to zero width.
fn span(values: impl Iterator<Item = f64>, pad_low: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - pad, hi + pad);
    }
    let pad = (hi - lo) * 0.05;
    let lo = if pad_low {
        // Keep a zero baseline when all values are non-negative.
        if lo >= 0.0 && lo - pad < 0.0 {
            0.0
        } else {
            lo - pad
        }
    } else {
        lo
    };
    (lo, hi + pad)
}

fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    join: Join,
) -> Result<(), PlotError> {
    let cleaned: Vec<(String, Vec<(f64, f64)>)> =
        series.iter().map(|(n, p)| (n.clone(), finite_points(p))).collect();
    let all = || cleaned.iter().flat_map(|(_, p)| p.iter().copied());
    if all().next().is_none() {
        return Err(PlotError::NoData { title: title.to_string() });
    }
    let (x0, x1) = span(all().map(|p| p.0), false);
    let (y0, y1) = span(all().map(|p| p.1), true);
    let err = |e: String| PlotError::Draw { path: path.display().to_string(), message: e };
    let root = SVGBackend::new(path, CHART_SIZE).into_drawing_area();
    render(&root, title, x_label, y_label, &cleaned, join, (x0..x1, y0..y1))
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn render(
    root: &Area<'_>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    join: Join,
    (xr, yr): (std::ops::Range<f64>, std::ops::Range<f64>),
) -> DrawResult {
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(xr, yr)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLOURS[i % COLOURS.len()];
        let line: Vec<(f64, f64)> = match join {
            Join::Straight => pts.clone(),
            Join::Step => step_points(pts),
        };
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
        if join == Join::Straight {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
