//! `--compare FILE.json`: each run's speed-up against an earlier `--json` report, read back
//! through the library's report types.

use std::path::PathBuf;

use accelkit::bench::{Comparison, Report};
use serde::de::IgnoredAny;

use super::output::BenchRow;
use crate::out;

/// An earlier `--json` report, read before any benchmark runs so a bad file fails fast.
pub(super) struct Baseline<R> {
    path: PathBuf,
    results: Vec<R>,
}

impl<R: BenchRow> Baseline<R> {
    /// Reads `path`, which must hold a report of `R`'s benchmark.
    pub(super) fn load(path: Option<PathBuf>) -> anyhow::Result<Option<Baseline<R>>> {
        let Some(path) = path else { return Ok(None) };
        let text = accelkit_exporter::input::read_file(
            &path,
            "the baseline",
            accelkit_exporter::input::MAX_REPORT_BYTES,
        )?;
        let not_a_report = |e: serde_json::Error| {
            anyhow::anyhow!("{} is not an accel --json report: {e}", path.display())
        };
        // The benchmark first: another benchmark's report is named as such, rather than
        // failing on the fields its runs lack.
        let head: Report<IgnoredAny> = serde_json::from_str(&text).map_err(not_a_report)?;
        if head.benchmark != R::BENCHMARK {
            anyhow::bail!(
                "{} holds a {} benchmark, not {}",
                path.display(),
                serde_json::to_string(&head.benchmark)?,
                R::BENCHMARK
            );
        }
        let report: Report<R> = serde_json::from_str(&text).map_err(not_a_report)?;
        Ok(Some(Baseline {
            path,
            results: report.results,
        }))
    }

    /// Each run against the earlier run of the same work, where there is one.
    pub(super) fn compare(&self, runs: &[R]) -> Vec<Comparison> {
        runs.iter()
            .map(|r| {
                let median_s = r.stats().median_s;
                let base = self
                    .results
                    .iter()
                    .find(|b| b.same_work(r))
                    .map(|b| b.stats().median_s);
                Comparison {
                    run: r.work(),
                    median_s,
                    baseline_median_s: base,
                    speedup: base.map(|b| b / median_s),
                    against: None,
                }
            })
            .collect()
    }

    pub(super) fn print(&self, cmp: &[Comparison]) -> anyhow::Result<()> {
        out::line(format!(
            "compared with {} (speed-up = earlier median / this median):",
            self.path.display()
        ))?;
        for c in cmp {
            match (c.baseline_median_s, c.speedup) {
                (Some(b), Some(x)) => out::line(format!(
                    "  {}: {x:.2}x ({} now, {} before)",
                    c.run,
                    out::secs(c.median_s),
                    out::secs(b)
                ))?,
                _ => out::line(format!("  {}: not in the earlier run", c.run))?,
            }
        }
        Ok(())
    }
}
