//! The pieces every view is made of: the scoped style sheet, escaping, a JSON value as text, a
//! status cell, bars and the lines of a history.

use serde_json::Value;

/// Scoped to the report's own class, so a notebook's other cells keep their styles.
pub(super) const STYLE: &str = "<style>\
.accel-report table{border-collapse:collapse;margin:0.3em 0 0.8em 0;font-size:0.9em}\
.accel-report th,.accel-report td{border:1px solid #9995;padding:0.2em 0.6em;text-align:left;vertical-align:top}\
.accel-report th{background:#8881}\
.accel-report .st{font-weight:bold;white-space:nowrap}\
.accel-report .pass{color:#1a7f37}.accel-report .fail{color:#cf222e}\
.accel-report .warn{color:#9a6700}.accel-report .skip{color:#6e7781}\
.accel-report .fix{color:#555;font-size:0.95em}\
.accel-report .nw{white-space:nowrap}\
.accel-report .why{font-weight:normal;white-space:normal;min-width:12em;max-width:28em}\
.accel-report .bar{display:inline-block;width:6em;height:0.7em;border:1px solid #8888;vertical-align:middle}\
.accel-report .bar span{display:block;height:100%;background:#2f81f7}\
.accel-report .bar.hi span{background:#cf222e}\
.accel-report .spark{display:block}.accel-report .spark.util polyline{stroke:#2f81f7}\
.accel-report .spark.mem polyline{stroke:#8250df}\
</style>";

/// Text made safe for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters (a process name may hold any) are shown, not passed on; so
            // are the bidirectional overrides, embeddings, isolates and marks (U+202E would
            // draw the rest of a cell backwards) and the line and paragraph separators.
            c if (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as short text: strings as they are, lists joined, null as empty.
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        Value::Object(_) => v.to_string(),
        other => other.to_string(),
    }
}

/// A status cell: its word in capitals, coloured by its class.
pub(super) fn status(s: &str) -> String {
    let class = match s {
        "pass" | "available" | "up" => "pass",
        "fail" | "error" | "down" => "fail",
        "warn" | "stale" => "warn",
        _ => "skip",
    };
    format!(
        "<td class=\"st {class}\">{}</td>",
        escape(&s.to_ascii_uppercase())
    )
}

/// Percent of `used` in `total`, where both are known and the total is not zero.
pub(super) fn share(used: &Value, total: &Value) -> Option<f64> {
    let (u, t) = (used.as_f64()?, total.as_f64()?);
    (t > 0.0).then(|| (u / t * 100.0).clamp(0.0, 100.0))
}

pub(super) fn bytes(v: &Value) -> String {
    v.as_u64()
        .map_or("-".to_string(), accelkit_core::units::human_bytes)
}

/// A bar `pct` wide (0 to 100) with its label; a dash when not known.
pub(super) fn bar(pct: Option<f64>, label: &str) -> String {
    match pct {
        Some(p) => {
            let p = p.clamp(0.0, 100.0);
            let class = if p >= 90.0 { "bar hi" } else { "bar" };
            format!(
                "<span class=\"nw\"><div class=\"{class}\"><span style=\"width:{p:.0}%\"></span></div> {}</span>",
                escape(label)
            )
        }
        None => "-".to_string(),
    }
}

/// A line of `points` (percent, 0 to 100; `null` where unknown), oldest first, as a small
/// inline SVG; empty for fewer than two known points.
pub(super) fn spark(points: &[Value], class: &str) -> String {
    let known: Vec<(usize, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_f64().filter(|x| x.is_finite()).map(|x| (i, x)))
        .collect();
    if known.len() < 2 {
        return String::new();
    }
    let (w, h) = (160.0, 28.0);
    let span = (points.len().max(2) - 1) as f64;
    let pts: Vec<String> = known
        .iter()
        .map(|&(i, v)| {
            format!(
                "{:.1},{:.1}",
                i as f64 / span * w,
                h - v.clamp(0.0, 100.0) / 100.0 * (h - 2.0) - 1.0
            )
        })
        .collect();
    format!(
        "<svg class=\"spark {class}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\"><polyline fill=\"none\" stroke-width=\"1.5\" points=\"{}\"/></svg>",
        pts.join(" ")
    )
}

/// The two lines of one row of `history` (`{"util": [...], "mem": [...]}`), or nothing.
/// A percentage's label beside its bar (`42 %`; nothing when unknown).
pub(super) fn pct_label(v: Option<f64>) -> String {
    v.map_or(String::new(), |u| format!("{u:.0} %"))
}

/// A bar of memory used against total, labelled `used / total`.
pub(super) fn memory_bar(used: &Value, total: &Value) -> String {
    bar(
        share(used, total),
        &format!("{} / {}", bytes(used), bytes(total)),
    )
}

/// A temperature in whole degrees, `-` when unknown.
pub(super) fn celsius(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |t| format!("{t:.0} C"))
}

pub(super) fn history_cell(history: &Value, id: &str) -> String {
    let Some(hrow) = history.get(id) else {
        // The column is there for every row; one without samples yet is empty.
        return "<td></td>".into();
    };
    let empty = Vec::new();
    let util = hrow["util"].as_array().unwrap_or(&empty);
    let mem = hrow["mem"].as_array().unwrap_or(&empty);
    format!("<td>{}{}</td>", spark(util, "util"), spark(mem, "mem"))
}
