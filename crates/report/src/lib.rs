#![warn(missing_docs)]
//! Self-contained HTML of accel's JSON documents, for notebooks (`_repr_html_` in the Python
//! module) and the CLI's `--html`: one renderer for both. No script, no stylesheet or font
//! from the network; every value from the machine is escaped. A status is marked by its word
//! (PASS, FAIL, WARN, SKIP) as well as its colour, so it reads in any theme and without colour.

use serde_json::Value;

mod bench;
mod fleet;
mod parts;
mod snapshot;

pub use parts::escape;
use parts::{status, text, STYLE};

/// A document given as text that is not JSON.
#[derive(Debug)]
pub struct NotJson {
    /// Where the parser stopped and why (serde_json's words).
    pub detail: String,
}

impl std::fmt::Display for NotJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid argument to html: not a JSON document: {}",
            self.detail
        )
    }
}

impl std::error::Error for NotJson {}

/// The HTML of one of accel's JSON documents (its text, as `--json` prints it): [`page`] of
/// the parsed value. For the Python module, whose documents arrive as text.
pub fn render(json: &str, kind: &str) -> Result<String, NotJson> {
    let doc: Value = serde_json::from_str(json).map_err(|e| NotJson {
        detail: e.to_string(),
    })?;
    Ok(page(doc, kind))
}

/// The HTML of one of accel's documents: `doctor` as a checklist grouped by backend,
/// `devices` as a table of backends with their devices or why there are none, `monitor` /
/// `snapshot` as the host and every device with bars (and lines over time when the document
/// has a `history`), `watch` (`{"samples": [...]}`) as its last sample with the lines of them
/// all, `fleet` (`accel monitor --hosts ... --json`'s round) as a row per machine with its
/// devices (and lines with a `history`); any other document as a table of its top-level
/// fields. `kind` names the document's kind when it has no `kind` field (the Python module's
/// documents).
pub fn page(mut doc: Value, kind: &str) -> String {
    if let Some(o) = doc.as_object_mut() {
        o.entry("kind").or_insert_with(|| kind.into());
    }
    render_value(&doc)
}

fn render_value(doc: &Value) -> String {
    let body = match doc["kind"].as_str() {
        Some("doctor") => doctor(doc),
        Some("devices") => devices(doc),
        Some("monitor" | "snapshot") => snapshot::snapshot(doc),
        Some("bench") => bench::bench(doc),
        Some("fleet") => fleet::fleet(doc),
        Some("watch") => {
            snapshot::watch(doc["samples"].as_array().map_or(&[][..], |v| v.as_slice()))
        }
        _ => fields(doc),
    };
    format!("<div class=\"accel-report\">{STYLE}{body}</div>")
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
        let verdict = match (s["usable"].as_bool(), s["cause"].as_str()) {
            (Some(true), _) => ": usable".to_string(),
            (_, Some(c)) => format!(": not usable, cause <code>{}</code>", escape(c)),
            _ => String::new(),
        };
        h.push_str(&format!(
            "<table><tr><th colspan=\"3\">{}{verdict}</th></tr><tr><th>status</th><th>check</th><th>found, and the fix</th></tr>",
            escape(&text(&s["backend"]))
        ));
        for c in s["checks"].as_array().into_iter().flatten() {
            let fix = text(&c["fix"]);
            let title = match c["consequence_of"].as_str() {
                Some(root) => format!("{} (follows from {root})", text(&c["title"])),
                None => text(&c["title"]),
            };
            h.push_str(&format!(
                "<tr>{}<td>{}</td><td>{}{}</td></tr>",
                status(c["status"].as_str().unwrap_or("")),
                escape(&title),
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
    fn bidi_controls_are_shown_not_passed_to_the_page() {
        let e = parts::escape("gnp\u{202e}exe.\u{2066}x\u{2028}y\u{200f}<");
        assert_eq!(e, "gnp\\u{202e}exe.\\u{2066}x\\u{2028}y\\u{200f}&lt;");
        assert_eq!(parts::escape("Tesla T4 ü 東\n"), "Tesla T4 ü 東\n");
    }

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
