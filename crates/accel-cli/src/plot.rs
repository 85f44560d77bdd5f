//! `--plot FILE.svg`: throughput against size, one line per device, drawn with plotters.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

/// One point of a series: (size, throughput).
pub type Point = (f64, f64);

/// Fails unless `path` names an SVG file (checked before any benchmark runs).
pub fn check_path(path: &Path) -> anyhow::Result<()> {
    if path.extension().and_then(|e| e.to_str()) != Some("svg") {
        anyhow::bail!(
            "--plot writes SVG: give a file name ending in .svg, not {}",
            path.display()
        );
    }
    Ok(())
}

/// Draws `series` (device name -> points) as lines with markers on log-log axes.
pub fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &BTreeMap<String, Vec<Point>>,
) -> anyhow::Result<()> {
    check_path(path)?;
    let all: Vec<Point> = series.values().flatten().copied().collect();
    if all.is_empty() {
        anyhow::bail!("nothing to plot");
    }
    let (xmin, xmax) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            ((xmin * 0.8).max(f64::MIN_POSITIVE)..xmax * 1.25).log_scale(),
            ((ymin * 0.8).max(1e-9)..ymax * 1.25).log_scale(),
        )
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(8)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v}"))
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| fail(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| fail(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
