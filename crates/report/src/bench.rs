//! A benchmark's result as HTML: the numbers (median with its 95 % interval, IQR, GFLOP/s, %
//! of the peak and its formula, the error against the reference) and a box plot of the timed
//! runs (min, quartiles, median, max) drawn in inline SVG.

use serde_json::Value;

use super::parts::{escape, text};

/// Seconds in the unit that reads best (`812 µs`, `3.41 ms`, `1.20 s`).
fn secs(v: &Value) -> String {
    match v.as_f64() {
        Some(s) if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.2} ms", s * 1e3),
        Some(s) => format!("{s:.2} s"),
        None => "-".into(),
    }
}

/// A horizontal box plot of `stats` (min, q1, median, q3, max) scaled to its own range.
fn box_plot(st: &Value) -> String {
    let f = |k: &str| st[k].as_f64().filter(|x| x.is_finite());
    let (Some(min), Some(q1), Some(med), Some(q3), Some(max)) =
        (f("min_s"), f("q1_s"), f("median_s"), f("q3_s"), f("max_s"))
    else {
        return String::new();
    };
    let (w, h) = (200.0, 24.0);
    let span = (max - min).max(f64::MIN_POSITIVE);
    let x = |v: f64| 4.0 + (v - min) / span * (w - 8.0);
    format!(
        "<svg class=\"spark\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\
<line x1=\"{:.1}\" y1=\"12\" x2=\"{:.1}\" y2=\"12\" stroke=\"#6e7781\"/>\
<rect x=\"{:.1}\" y=\"5\" width=\"{:.1}\" height=\"14\" fill=\"#2f81f733\" stroke=\"#2f81f7\"/>\
<line x1=\"{:.1}\" y1=\"3\" x2=\"{:.1}\" y2=\"21\" stroke=\"#cf222e\" stroke-width=\"2\"/></svg>",
        x(min),
        x(max),
        x(q1),
        (x(q3) - x(q1)).max(1.0),
        x(med),
        x(med)
    )
}

/// A matmul's size: "2000" (N x N by N x N) or "32x4096x1024" (M x N x K), with B's layout
/// when transposed and the batch when there is one.
fn size(r: &Value) -> String {
    let mut s = match r["shape"].as_array().map(|a| a.as_slice()) {
        Some([m, n, k]) => format!("{}x{}x{}", text(m), text(n), text(k)),
        _ => text(&r["size"]),
    };
    if r["b_transposed"] == true {
        s += ", B transposed";
    }
    if let Some(b) = r["batch"].as_u64() {
        s += &format!(", batch {b}");
    }
    s
}

/// `results` of a `bench` document (or one result, as `accel.bench.matmul()` returns it).
pub(super) fn bench(doc: &Value) -> String {
    let one = [doc.clone()];
    let results = match doc["results"].as_array() {
        Some(r) => r.as_slice(),
        None => &one[..],
    };
    let mut h = String::from(
        "<table><tr><th>device</th><th>dtype</th><th>size</th><th>median (95 % CI)</th><th>IQR</th><th>runs</th><th>GFLOP/s</th><th>of peak</th><th>max rel. error</th><th>min, quartiles, max</th></tr>",
    );
    for r in results {
        let st = &r["stats"];
        let ci = st["median_ci95_s"].as_array();
        let ci = match ci.map(|a| a.as_slice()) {
            Some([lo, hi]) => format!(" ({} to {})", secs(lo), secs(hi)),
            _ => String::new(),
        };
        let pct = r["percent_of_peak"]
            .as_f64()
            .map_or("-".into(), |p| format!("{p:.0} %"));
        let formula = text(&r["peak"]["formula"]);
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>",
            escape(&text(&r["device"])),
            escape(&text(&r["dtype"])),
            escape(&size(r)),
            secs(&st["median_s"]),
            escape(&ci),
            secs(&st["iqr_s"]),
            escape(&text(&st["samples"])),
            r["gflop_per_s"].as_f64().map_or("-".into(), |g| format!("{g:.1}")),
            pct,
            if formula.is_empty() {
                String::new()
            } else {
                format!("<div class=\"fix\">peak: {}</div>", escape(&formula))
            },
            r["max_rel_error"]
                .as_f64()
                .map_or("-".into(), |e| format!("{e:.1e}")),
            box_plot(st)
        ));
    }
    h.push_str("</table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_has_its_statistics_and_a_box_plot() {
        let r = serde_json::json!({"kind": "bench", "results": [{
            "device": "cpu", "dtype": "f32", "size": 2000, "gflop_per_s": 346.04,
            "percent_of_peak": 78.2, "max_rel_error": 3.2e-7,
            "peak": {"formula": "2 cores x 3.6 GHz x 64 <f32>"},
            "stats": {"samples": 10, "median_s": 0.0462, "q1_s": 0.046, "q3_s": 0.047,
                      "min_s": 0.045, "max_s": 0.055, "iqr_s": 0.001,
                      "median_ci95_s": [0.0458, 0.0470]}}]});
        let h = crate::render_value(&r);
        assert!(
            h.contains("<td>46.20 ms (45.80 ms to 47.00 ms)</td>"),
            "{h}"
        );
        assert!(h.contains("<td>346.0</td><td>78 %<div class=\"fix\">peak: 2 cores x 3.6 GHz x 64 &lt;f32&gt;</div>"), "{h}");
        assert!(h.contains("<td>3.2e-7</td>"), "{h}");
        assert!(h.contains("<td>2000</td>"), "{h}");
        // min 45 ms at x = 4, max 55 ms at x = 196; the median (46.2) at 4 + 1.2/10 * 192.
        assert!(h.contains("x1=\"4.0\" y1=\"12\" x2=\"196.0\""), "{h}");
        assert!(h.contains("<line x1=\"27.0\" y1=\"3\" x2=\"27.0\""), "{h}");
        // One result alone (what accel.bench.matmul() returns) renders the same row.
        let one = r["results"][0].clone();
        let mut one = one.as_object().unwrap().clone();
        one.insert("kind".into(), "bench".into());
        let h1 = crate::render_value(&Value::Object(one));
        assert!(
            h1.contains("<td>46.20 ms (45.80 ms to 47.00 ms)</td>"),
            "{h1}"
        );
        // A Linear layer's shape, batched.
        let mut lin = r["results"][0].clone();
        lin["shape"] = serde_json::json!([32, 4096, 1024]);
        lin["b_transposed"] = true.into();
        lin["batch"] = 3.into();
        let h2 = bench(&lin);
        assert!(
            h2.contains("<td>32x4096x1024, B transposed, batch 3</td>"),
            "{h2}"
        );
    }
}
