//! Output helpers of the command: the shared ones (lines, terminal-safe text, the JSON
//! envelope) are the exporter's (`accelkit_exporter::out`), the rest are the command's own.

use std::io::Write;

use serde::Serialize;

pub use accelkit_exporter::out::*;

/// [`json`]'s document as HTML (`accelkit_report::page`: the renderer the Python module's
/// `_repr_html_` uses too).
pub fn html<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    let doc = json_value(kind, body)?;
    line(accelkit_report::page(doc, kind))
}

/// Seconds with a unit that keeps 3-4 significant digits.
pub fn secs(s: f64) -> String {
    let (v, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else {
        (s * 1e6, "us")
    };
    let decimals = if v >= 100.0 {
        1
    } else if v >= 10.0 {
        2
    } else {
        3
    };
    format!("{v:.decimals$} {unit}")
}

/// Shows `msg` as a one-line progress indicator on stderr, or clears it with `None`. Only on a
/// terminal: redirected output and JSON consumers never see it.
pub fn progress(msg: Option<&str>) {
    use std::io::IsTerminal;
    let mut e = std::io::stderr().lock();
    if !e.is_terminal() {
        return;
    }
    // Progress is a courtesy: a failing stderr must not fail the run.
    let _ = match msg {
        Some(m) => write!(e, "\r\x1b[K{m}"),
        None => write!(e, "\r\x1b[K"),
    };
    let _ = e.flush();
}

/// A process's workload for a text row (` [pod 3f2a6b1c/9c1e0f7d3b2a]`, ` [job 4242.0]`), or
/// why the process cannot be seen; empty for a process in no container, pod, job or unit.
pub fn workload_note(p: &accelkit_telemetry::ProcessUse) -> String {
    match (p.workload.as_ref().map(|w| w.short()), &p.note) {
        (Some(s), _) if s != "-" => format!(" [{}]", printable(&s)),
        (_, Some(n)) => format!(" [{}]", printable(n)),
        _ => String::new(),
    }
}

/// What is wrong with a device's health, for a text row (` [XID 79 x1; memory repair waits
/// for a reset]`); empty when nothing is.
pub fn health_note(r: &accelkit_telemetry::Reading) -> String {
    let mut v: Vec<String> = r
        .xid_errors
        .iter()
        .map(|(x, n)| format!("XID {x} x{n}"))
        .collect();
    if r.memory_repair_failed == Some(true) {
        v.push("memory repair failed: no spare rows".into());
    }
    if r.memory_repair_pending == Some(true) {
        v.push("memory repair waits for a reset".into());
    }
    if let Some(n) = r.ecc_uncorrected_errors.filter(|n| *n > 0) {
        v.push(format!("{n} uncorrected memory errors"));
    }
    if v.is_empty() {
        String::new()
    } else {
        format!(" [{}]", v.join("; "))
    }
}

/// The containers the kubelet gave a device, for a text row (`held by ml/trainer-a (main),
/// research/nb (jupyter)`), or `None` off Kubernetes.
pub fn owners_line(r: &accelkit_telemetry::Reading) -> Option<String> {
    if r.owners.is_empty() {
        return None;
    }
    let names: Vec<String> = r.owners.iter().map(|o| o.short()).collect();
    Some(format!("held by {}", printable(&names.join(", "))))
}
