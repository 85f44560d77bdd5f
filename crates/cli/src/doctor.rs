//! `accel doctor`: per backend a verdict (usable, or the root cause and its fix), then the
//! checklist, PASS / FAIL / WARN / SKIP, with the fix for every FAIL and WARN; a check that
//! fails only because of the root cause says so. Exit 0 when the best device works and no
//! check fails, 1 otherwise.

use accelkit::doctor::{Diagnosis, Status};

use crate::out;

fn tag(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Warn => "WARN",
        Status::Skip => "SKIP",
    }
}

pub fn text(r: &Diagnosis) -> Vec<String> {
    let mut lines = Vec::new();
    for s in &r.sections {
        lines.push(format!(
            "{} (probed in {:.2} s): {}",
            s.backend,
            s.probe_seconds,
            match (s.usable, s.cause) {
                (true, _) => "usable".to_string(),
                (false, Some(c)) if s.checks.first().is_some_and(|v| v.status == Status::Fail) => {
                    format!("NOT USABLE, cause {c}")
                }
                _ => "not usable here".to_string(),
            }
        ));
        for c in &s.checks {
            let title = if c.id.ends_with(".verdict") {
                match c.status {
                    Status::Fail => "cause".to_string(),
                    _ => "verdict".to_string(),
                }
            } else {
                match c.consequence_of {
                    Some(root) => format!("{} (follows from {root})", c.title),
                    None => c.title.to_string(),
                }
            };
            lines.push(format!("  {}  {}: {}", tag(c.status), title, c.found));
            // A consequence's own fix is the cause's: it is not repeated.
            if !c.fix.is_empty() && c.consequence_of.is_none() {
                lines.push(format!("        fix: {}", c.fix));
            }
        }
    }
    let count = |st: Status| {
        r.sections
            .iter()
            .flat_map(|s| &s.checks)
            .filter(|c| c.status == st)
            .count()
    };
    lines.push(format!(
        "\n{} pass, {} fail, {} warn, {} skip in {:.2} s; best device: {} ({})",
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Warn),
        count(Status::Skip),
        r.seconds,
        r.best_device,
        if r.best_device_works {
            "a test matmul on it is right"
        } else {
            "a test matmul on it FAILED"
        }
    ));
    lines
}

pub fn run(json: bool, html: bool, roots: &accelkit::doctor::Roots) -> anyhow::Result<()> {
    let r = accelkit::doctor::diagnose_at(roots);
    if json {
        out::json("doctor", &r)?;
    } else if html {
        out::html("doctor", &r)?;
    } else {
        for l in text(&r) {
            out::line(l)?;
        }
    }
    let mut fails: Vec<&str> = r
        .sections
        .iter()
        .flat_map(|s| s.checks.iter())
        .filter(|c| c.status == accelkit::doctor::Status::Fail && c.consequence_of.is_none())
        .map(|c| c.cause.unwrap_or(c.id))
        .collect();
    let mut seen = std::collections::HashSet::new();
    fails.retain(|c| seen.insert(*c));
    if !r.best_device_works {
        anyhow::bail!(
            "the best device, {}, failed a test computation (see the checks above)",
            r.best_device
        )
    }
    if !fails.is_empty() {
        anyhow::bail!(
            "{} cause(s) of failure: {} (each with its fix above)",
            fails.len(),
            fails.join(", ")
        )
    }
    Ok(())
}
