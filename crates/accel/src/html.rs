//! Self-contained HTML of accel's JSON documents, for notebooks (`_repr_html_` in the Python
//! module) and the CLI's `--html`: one renderer for both. No script, no stylesheet or font
//! from the network; every value from the machine is escaped. A status is marked by its word
//! (PASS, FAIL, WARN, SKIP) as well as its colour, so it reads in any theme and without colour.

use serde_json::Value;

/// The HTML of one of accel's JSON documents (its text, as `--json` prints it): `doctor` as a
/// checklist grouped by backend, `devices` as a table of backends with their devices or why
/// there are none; any other document as a table of its top-level fields. `kind` names the
/// document's kind when the text has no `kind` field (the Python module's documents).
pub fn render(json: &str, kind: &str) -> crate::Result<String> {
    let mut doc: Value = serde_json::from_str(json)
        .map_err(|e| crate::Error::invalid("html", format!("not a JSON document: {e}")))?;
    if let Some(o) = doc.as_object_mut() {
        o.entry("kind").or_insert_with(|| kind.into());
    }
    Ok(render_value(&doc))
}

fn render_value(doc: &Value) -> String {
    let body = match doc["kind"].as_str() {
        Some("doctor") => doctor(doc),
        Some("devices") => devices(doc),
        _ => fields(doc),
    };
    format!("<div class=\"accel-report\">{STYLE}{body}</div>")
}

/// Scoped to the report's own class, so a notebook's other cells keep their styles.
const STYLE: &str = "<style>\
.accel-report table{border-collapse:collapse;margin:0.3em 0 0.8em 0;font-size:0.9em}\
.accel-report th,.accel-report td{border:1px solid #9995;padding:0.2em 0.6em;text-align:left;vertical-align:top}\
.accel-report th{background:#8881}\
.accel-report .st{font-weight:bold;white-space:nowrap}\
.accel-report .pass{color:#1a7f37}.accel-report .fail{color:#cf222e}\
.accel-report .warn{color:#9a6700}.accel-report .skip{color:#6e7781}\
.accel-report .fix{color:#555;font-size:0.95em}\
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
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        Value::Object(_) => v.to_string(),
        other => other.to_string(),
    }
}

/// A status cell: its word in capitals, coloured by its class.
fn status(s: &str) -> String {
    let class = match s {
        "pass" | "available" => "pass",
        "fail" | "error" => "fail",
        "warn" => "warn",
        _ => "skip",
    };
    format!(
        "<td class=\"st {class}\">{}</td>",
        escape(&s.to_ascii_uppercase())
    )
}

fn doctor(doc: &Value) -> String {
    let mut h = format!(
        "<p><b>accel doctor</b>: best device <b>{}</b>{}</p>",
        escape(&text(&doc["best_device"])),
        match doc["best_device_works"].as_bool() {
            Some(true) => " (a matmul on it checked out)".to_string(),
            Some(false) => " (<span class=\"st fail\">FAIL</span>: it did not work)".to_string(),
            None => String::new(),
        }
    );
    for s in doc["sections"].as_array().into_iter().flatten() {
        h.push_str(&format!(
            "<table><tr><th colspan=\"3\">{}</th></tr><tr><th>status</th><th>check</th><th>found, and the fix</th></tr>",
            escape(&text(&s["backend"]))
        ));
        for c in s["checks"].as_array().into_iter().flatten() {
            let fix = text(&c["fix"]);
            h.push_str(&format!(
                "<tr>{}<td>{}</td><td>{}{}</td></tr>",
                status(c["status"].as_str().unwrap_or("")),
                escape(&text(&c["title"])),
                escape(&text(&c["found"])),
                if fix.is_empty() {
                    String::new()
                } else {
                    format!("<div class=\"fix\">fix: {}</div>", escape(&fix))
                }
            ));
        }
        h.push_str("</table>");
    }
    h
}

fn devices(doc: &Value) -> String {
    let mut h = format!(
        "<p><b>accel devices</b>: best device <b>{}</b></p><table><tr><th>backend</th><th>status</th><th>devices, or why not and the fix</th></tr>",
        escape(&text(&doc["best_device"]))
    );
    for b in doc["backends"].as_array().into_iter().flatten() {
        let st = b["status"].as_str().unwrap_or("");
        let what = match b["devices"].as_array() {
            Some(ds) if !ds.is_empty() => ds
                .iter()
                .map(|d| {
                    let name = text(&d["name"]);
                    let id = text(&d["device"]);
                    escape(&if name.is_empty() {
                        id
                    } else {
                        format!("{id}: {name}")
                    })
                })
                .collect::<Vec<_>>()
                .join("<br>"),
            _ => {
                let hint = text(&b["hint"]);
                format!(
                    "{}{}",
                    escape(&text(&b["reason"])),
                    if hint.is_empty() {
                        String::new()
                    } else {
                        format!("<div class=\"fix\">fix: {}</div>", escape(&hint))
                    }
                )
            }
        };
        h.push_str(&format!(
            "<tr><td>{}</td>{}<td>{what}</td></tr>",
            escape(&text(&b["backend"])),
            status(st)
        ));
    }
    h.push_str("</table>");
    h
}

fn fields(doc: &Value) -> String {
    let mut h = String::from("<table>");
    for (k, v) in doc.as_object().into_iter().flatten() {
        h.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(k),
            escape(&text(v))
        ));
    }
    h.push_str("</table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doctor_document_is_a_checklist_with_words_and_fixes_escaped() {
        let doc = serde_json::json!({
            "kind": "doctor", "best_device": "cpu", "best_device_works": true,
            "sections": [{"backend": "cuda", "checks": [
                {"id": "cuda.driver", "title": "driver", "status": "fail",
                 "found": "no <driver> & \"no\" GPU", "fix": "install it\u{1b}[2J"},
                {"id": "cuda.x", "title": "x", "status": "pass", "found": "ok", "fix": ""}
            ]}]
        });
        let h = render_value(&doc);
        assert!(h.starts_with("<div class=\"accel-report\"><style>"), "{h}");
        assert!(
            h.contains("<td class=\"st fail\">FAIL</td><td>driver</td>"),
            "{h}"
        );
        assert!(
            h.contains("no &lt;driver&gt; &amp; &quot;no&quot; GPU"),
            "{h}"
        );
        assert!(h.contains("fix: install it\\u{1b}[2J"), "{h}");
        assert!(h.contains("<td class=\"st pass\">PASS</td>"), "{h}");
        assert!(!h.contains("<script") && !h.contains("http"), "{h}");
        assert_eq!(
            h.matches("<tr>").count(),
            4,
            "a title row, a header and two checks"
        );
    }

    #[test]
    fn a_devices_document_lists_devices_or_the_reason_and_fix() {
        let doc = serde_json::json!({
            "kind": "devices", "best_device": "cpu",
            "backends": [
                {"backend": "cpu", "status": "available", "devices": [{"device": "cpu", "name": "Xeon"}]},
                {"backend": "cuda", "status": "unavailable", "reason": "no driver", "hint": "install"}
            ]
        });
        let h = render_value(&doc);
        assert!(
            h.contains("<td>cpu</td><td class=\"st pass\">AVAILABLE</td><td>cpu: Xeon</td>"),
            "{h}"
        );
        assert!(h.contains("<td class=\"st skip\">UNAVAILABLE</td><td>no driver<div class=\"fix\">fix: install</div>"), "{h}");
    }
}
