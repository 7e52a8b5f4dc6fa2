//! Jobs in execution per resource over time, like the seed's Figures 17.12 to 17.19.

use super::virtual_time::UsagePoint;
use plotters::prelude::*;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {msg}")]
pub struct PlotError {
    pub path: String,
    pub msg: String,
}

/// Writes a step plot of running jobs per resource against time.
pub fn usage(path: &Path, title: &str, names: &[String], usage: &[UsagePoint]) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError { path: path.display().to_string(), msg: e.to_string() };
    let t_max = usage.last().map_or(1.0, |p| p.t).max(1.0);
    let y_max = usage.iter().flat_map(|p| p.running.iter().copied()).max().unwrap_or(1).max(1);
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(40)
        .build_cartesian_2d(0f64..t_max * 1.02, 0f64..(y_max as f64 + 0.5))
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc("time (s)").y_desc("jobs in execution").draw().map_err(|e| err(&e))?;
    for (k, name) in names.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let mut pts = Vec::with_capacity(usage.len() * 2);
        let mut prev: Option<f64> = None;
        for p in usage {
            let y = p.running.get(k).copied().unwrap_or(0) as f64;
            if let Some(py) = prev {
                pts.push((p.t, py));
            }
            pts.push((p.t, y));
            prev = Some(y);
        }
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
