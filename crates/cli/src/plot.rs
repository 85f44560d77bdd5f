//! `--plot FILE.svg|FILE.png`: throughput against size, one line per device, drawn with
//! plotters as SVG; a PNG is that SVG rasterised by resvg (text in the system's fonts; on a
//! machine without fonts the PNG has the lines and markers but no labels).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

/// One point of a series: (size, throughput).
pub type Point = (f64, f64);

/// Fails unless `path` names an SVG or PNG file (checked before any benchmark runs).
pub fn check_path(path: &Path) -> anyhow::Result<()> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") | Some("png") => Ok(()),
        _ => anyhow::bail!(
            "--plot writes SVG or PNG: give a file name ending in .svg or .png, not {}",
            path.display()
        ),
    }
}

fn is_png(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("png")
}

/// Rasterises SVG text into a PNG file of the same size.
fn svg_to_png(svg: &str, path: &Path) -> anyhow::Result<()> {
    let mut opt = resvg::usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // plotters writes font-family "sans-serif"; fontdb maps that to Arial, which Linux rarely
    // has: map it to a common free family that is installed, else to any installed face.
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(n, _)| n.clone()))
        .collect();
    let pick = [
        "DejaVu Sans",
        "Liberation Sans",
        "Noto Sans",
        "FreeSans",
        "Arial",
    ]
    .iter()
    .map(|s| s.to_string())
    .find(|p| families.contains(p))
    .or_else(|| families.first().cloned());
    if let Some(f) = pick {
        db.set_sans_serif_family(f);
    }
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .map_err(|e| anyhow::anyhow!("cannot rasterise the plot: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| anyhow::anyhow!("cannot rasterise the plot: empty size"))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
        draw_on(
            &root,
            path,
            title,
            x_label,
            y_label,
            series,
            (xmin, xmax),
            (ymin, ymax),
        )?;
    }
    if is_png(path) {
        svg_to_png(&svg, path)
    } else {
        std::fs::write(path, svg)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }
}

#[allow(clippy::too_many_arguments)]
fn draw_on(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &BTreeMap<String, Vec<Point>>,
    (xmin, xmax): (f64, f64),
    (ymin, ymax): (f64, f64),
) -> anyhow::Result<()> {
    let fail = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(root)
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
