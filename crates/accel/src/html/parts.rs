//! The pieces every view is made of: the scoped style sheet, escaping, a JSON value as text and
//! a status cell.

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
            // Control characters (a process name may hold any) are shown, not passed on.
            c if c.is_control() && c != '\n' && c != '\t' => {
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
        "fail" | "error" => "fail",
        "warn" => "warn",
        _ => "skip",
    };
    format!(
        "<td class=\"st {class}\">{}</td>",
        escape(&s.to_ascii_uppercase())
    )
}
