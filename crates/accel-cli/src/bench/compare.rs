//! `--compare FILE.json`: each run's speed-up against an earlier `--json` report.

use serde::Serialize;

use crate::out;

/// One run against the same workload in an earlier run.
#[derive(Serialize)]
pub(super) struct Comparison {
    run: String,
    median_s: f64,
    baseline_median_s: Option<f64>,
    /// Earlier median / this median: above 1 means faster now.
    speedup: Option<f64>,
}

/// An earlier `--json` report, read before any benchmark runs so a bad file fails fast.
pub(super) struct Baseline {
    path: std::path::PathBuf,
    results: Vec<serde_json::Value>,
}

impl Baseline {
    pub(super) fn load(
        path: Option<std::path::PathBuf>,
        benchmark: &str,
    ) -> anyhow::Result<Option<Baseline>> {
        let Some(path) = path else { return Ok(None) };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{} is not an accel --json report: {e}", path.display())
        })?;
        if v["benchmark"] != benchmark {
            anyhow::bail!(
                "{} holds a {} benchmark, not {benchmark}",
                path.display(),
                v["benchmark"]
            );
        }
        let results = v["results"].as_array().cloned().unwrap_or_default();
        Ok(Some(Baseline { path, results }))
    }

    /// Matches runs on device, dtype, size (and op) and computes the speed-ups.
    pub(super) fn compare<R: Serialize>(&self, runs: &[R]) -> anyhow::Result<Vec<Comparison>> {
        let key = |v: &serde_json::Value| {
            // Copy reports from before the host-memory choice were all pageable.
            let host = match &v["host_memory"] {
                serde_json::Value::Null if v["kind"].is_string() => "pageable".into(),
                h => h.clone(),
            };
            (
                v["device"].clone(),
                v["dtype"].clone(),
                v["size"].clone(),
                v["op"].clone(),
                v["kind"].clone(),
                host,
            )
        };
        let mut out = Vec::new();
        for r in runs {
            let v = serde_json::to_value(r)?;
            let median_s = v["stats"]["median_s"].as_f64().unwrap_or(f64::NAN);
            let base = self
                .results
                .iter()
                .find(|b| key(b) == key(&v))
                .and_then(|b| b["stats"]["median_s"].as_f64());
            // "add cpu f32 size 1000"; copies add their direction and host memory.
            let word = |k: &str| v[k].as_str().map(|o| format!("{o} ")).unwrap_or_default();
            out.push(Comparison {
                run: format!(
                    "{}{}{}{} {} size {}",
                    word("op"),
                    word("kind"),
                    word("host_memory"),
                    v["device"].as_str().unwrap_or("?"),
                    v["dtype"].as_str().unwrap_or("?"),
                    v["size"]
                ),
                median_s,
                baseline_median_s: base,
                speedup: base.map(|b| b / median_s),
            });
        }
        Ok(out)
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
