//! The machine at one moment as HTML: the host's CPU and memory, then every device with bars
//! for its utilisation and memory, its temperature, power and health, who holds it and its
//! processes; with a `history` (`accel.watch()`, the live page of `accel serve`), a line of
//! each device's utilisation and memory over the last minutes. Drawn with inline SVG and CSS
//! widths only: no script, nothing from the network.

use serde_json::Value;

use accelkit_core::units::utc;

use super::parts::{
    bar, bytes, celsius, escape, history_cell, memory_bar, pct_label, share, status, text,
};

fn device_id(d: &Value) -> String {
    let base = format!("{}:{}", text(&d["vendor"]), text(&d["index"]));
    match d["mig_index"].as_u64() {
        Some(m) => format!("{base}/mig{m}"),
        None => base,
    }
}

/// What is wrong with a device's health, in words; empty when nothing is.
fn health(d: &Value) -> String {
    let mut v: Vec<String> = Vec::new();
    if let Some(x) = d["xid_errors"].as_object() {
        v.extend(x.iter().map(|(k, n)| format!("XID {k} x{}", text(n))));
    }
    if d["memory_repair_failed"] == true {
        v.push("memory repair failed".into());
    }
    if d["memory_repair_pending"] == true {
        v.push("memory repair waits for a reset".into());
    }
    if let Some(n) = d["ecc_uncorrected_errors"].as_u64().filter(|n| *n > 0) {
        v.push(format!("{n} uncorrected memory errors"));
    }
    for r in d["throttle_reasons"].as_array().into_iter().flatten() {
        let r = text(r);
        if r != "gpu_idle" {
            v.push(format!("throttled: {r}"));
        }
    }
    v.join("; ")
}

fn processes(d: &Value) -> String {
    let ps = d["processes"].as_array().map_or(&[][..], |v| v.as_slice());
    let owners = d["owners"].as_array().map_or(&[][..], |v| v.as_slice());
    if ps.is_empty() && owners.is_empty() {
        return String::new();
    }
    let mut h = String::new();
    if !owners.is_empty() {
        let names: Vec<String> = owners
            .iter()
            .map(|o| {
                format!(
                    "{}/{} ({})",
                    text(&o["namespace"]),
                    text(&o["pod"]),
                    text(&o["container"])
                )
            })
            .collect();
        h.push_str(&format!(
            "<div class=\"fix\">held by {}</div>",
            escape(&names.join(", "))
        ));
    }
    for p in ps {
        let w = &p["workload"];
        let workload = if !w["pod"].is_null() {
            format!(
                "pod {}/{} ({})",
                text(&w["namespace"]),
                text(&w["pod"]),
                text(&w["container"])
            )
        } else if let Some(j) = w["slurm_job"].as_u64() {
            match w["slurm_step"].as_str() {
                Some(s) => format!("job {j}.{s}"),
                None => format!("job {j}"),
            }
        } else if let Some(uid) = w["pod_uid"].as_str() {
            format!("pod {}", uid.chars().take(8).collect::<String>())
        } else if let Some(c) = w["container_id"].as_str() {
            format!("container {}", c.chars().take(12).collect::<String>())
        } else {
            text(&w["unit"])
        };
        h.push_str(&format!(
            "<div>pid {} {} ({}) {}{}</div>",
            escape(&text(&p["pid"])),
            escape(&text(&p["command"])),
            escape(&text(&p["user"])),
            bytes(&p["memory_bytes"]),
            if workload.is_empty() {
                String::new()
            } else {
                format!(" <span class=\"fix\">{}</span>", escape(&workload))
            }
        ));
    }
    h
}

/// The last of `samples` (snapshot documents, oldest first) with the `history` of them all:
/// per row (`host`, each device's id) its utilisation and memory in percent, `null` where a
/// sample does not have them.
pub(super) fn watch(samples: &[Value]) -> String {
    let Some(last) = samples.last() else {
        return "<p>No sample yet.</p>".to_string();
    };
    let mut rows: serde_json::Map<String, Value> = serde_json::Map::new();
    let mut push = |id: String, at: usize, util: Option<f64>, mem: Option<f64>| {
        let row = rows.entry(id).or_insert_with(|| {
            serde_json::json!({"util": vec![Value::Null; samples.len()], "mem": vec![Value::Null; samples.len()]})
        });
        row["util"][at] = util.map_or(Value::Null, Value::from);
        row["mem"][at] = mem.map_or(Value::Null, Value::from);
    };
    for (at, s) in samples.iter().enumerate() {
        let m = &s["host"]["memory"];
        push(
            "host".into(),
            at,
            s["host"]["cpu_percent"].as_f64(),
            share(&m["used_bytes"], &m["total_bytes"]),
        );
        for d in s["devices"].as_array().into_iter().flatten() {
            push(
                device_id(d),
                at,
                d["utilization_percent"].as_f64(),
                share(&d["memory_used_bytes"], &d["memory_total_bytes"]),
            );
        }
    }
    let mut doc = last.clone();
    doc["history"] = Value::Object(rows);
    snapshot(&doc)
}

/// A snapshot document (`accel monitor --json`, `accel.snapshot()`), with an optional
/// `history` of percent values per row (`host` and each device's id).
pub(super) fn snapshot(doc: &Value) -> String {
    let history = &doc["history"];
    let with_history = history.is_object();
    let mut h = if doc["host"].is_object() {
        host(doc, with_history)
    } else {
        String::new()
    };
    let devices = doc["devices"].as_array().map_or(&[][..], |v| v.as_slice());
    h.push_str(&devices_table(devices, history, with_history));
    h
}

/// The host's row: CPU, RAM and load, under the machine's name and the time.
fn host(doc: &Value, with_history: bool) -> String {
    let history = &doc["history"];
    let host = &doc["host"];
    let mem = &host["memory"];
    let name = text(&doc["hostname"]);
    let mut h = format!(
        "<p><b>{}</b>{}</p><table><tr><th></th><th>utilisation</th><th>memory</th><th>load</th>{}</tr>",
        if name.is_empty() {
            "this machine".to_string()
        } else {
            escape(&name)
        },
        doc["time_unix_s"]
            .as_f64()
            .map_or(String::new(), |t| format!(" at {}", escape(&utc(t)))),
        if with_history { "<th>last minutes</th>" } else { "" }
    );
    let cpu = host["cpu_percent"].as_f64();
    let used_share = share(&mem["used_bytes"], &mem["total_bytes"]);
    h.push_str(&format!(
        "<tr><th>host CPU and RAM</th><td>{}</td><td>{}</td><td>{}</td>{}</tr></table>",
        bar(cpu, &cpu.map_or(String::new(), |c| format!("{c:.0} %"))),
        bar(
            used_share,
            &format!(
                "{} / {}",
                bytes(&mem["used_bytes"]),
                bytes(&mem["total_bytes"])
            )
        ),
        escape(&text(&host["load_average"])),
        if with_history {
            history_cell(history, "host")
        } else {
            String::new()
        }
    ));
    h
}

/// One row per device.
fn devices_table(devices: &[Value], history: &Value, with_history: bool) -> String {
    if devices.is_empty() {
        return "<p>No accelerator found by any monitoring interface.</p>".to_string();
    }
    let mut h = String::new();
    h.push_str(&format!(
        "<table><tr><th>device</th><th>status</th><th>utilisation</th><th>memory</th><th>temperature</th><th>power</th><th>health</th><th>processes</th>{}</tr>",
        if with_history { "<th>last minutes</th>" } else { "" }
    ));
    for d in devices {
        let id = device_id(d);
        let up = d["up"] != false;
        let st = if up { status("up") } else { status("fail") };
        let util = d["utilization_percent"].as_f64();
        let power = match (d["power_w"].as_f64(), d["power_limit_w"].as_f64()) {
            (Some(p), Some(l)) => format!("{p:.0} / {l:.0} W"),
            (Some(p), None) => format!("{p:.0} W"),
            _ => "-".into(),
        };
        let status_text = text(&d["status"]);
        h.push_str(&format!(
            "<tr><td><b>{}</b><br>{}</td>{st}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            escape(&id),
            escape(&text(&d["name"])),
            bar(util, &pct_label(util)),
            memory_bar(&d["memory_used_bytes"], &d["memory_total_bytes"]),
            celsius(&d["temperature_c"]),
            escape(&power),
            escape(&[health(d), status_text].iter().filter(|s| !s.is_empty()).cloned().collect::<Vec<_>>().join("; ")),
            processes(d),
            if with_history {
                history_cell(history, &id)
            } else {
                String::new()
            }
        ));
    }
    h.push_str("</table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        serde_json::json!({
            "kind": "monitor", "hostname": "gpu<1>", "time_unix_s": 1_764_780_942.0,
            "host": {"cpu_percent": 12.5, "memory": {"total_bytes": 64u64 << 30, "used_bytes": 16u64 << 30},
                     "load_average": [1.0, 0.5, 0.25]},
            "devices": [
                {"vendor": "amd", "index": 0, "name": "AMD Instinct MI300X", "up": true,
                 "utilization_percent": 95.0, "memory_used_bytes": 6u64 << 30, "memory_total_bytes": 24u64 << 30,
                 "temperature_c": 65.0, "power_w": 245.0, "power_limit_w": 355.0,
                 "ecc_uncorrected_errors": 1, "xid_errors": {}, "throttle_reasons": [],
                 "owners": [{"namespace": "ml", "pod": "trainer-a", "container": "main", "resource": "amd.com/gpu"}],
                 "processes": [{"pid": 3001, "command": "py<thon>", "user": "root", "memory_bytes": 1u64 << 28,
                                "workload": {"pod_uid": "3f2a6b1c-7d8e-4f90-a1b2-c3d4e5f60718", "pod": null}}]},
                {"vendor": "nvidia", "index": 1, "name": "NVIDIA T4", "up": false,
                 "status": "fallen off the bus", "processes": [], "owners": [],
                 "xid_errors": {"79": 1}}
            ]
        })
    }

    #[test]
    fn a_snapshot_has_bars_health_owners_and_escaped_names() {
        let h = crate::render_value(&doc());
        assert!(
            h.contains("<b>gpu&lt;1&gt;</b> at 2025-12-03 16:55:42 UTC"),
            "{h}"
        );
        // Host: 12.5 % CPU, 16 of 64 GiB (25 %).
        assert!(
            h.contains("<span style=\"width:12%\"></span></div> 12 %"),
            "{h}"
        );
        assert!(
            h.contains("<span style=\"width:25%\"></span></div> 16.00 GiB / 64.00 GiB"),
            "{h}"
        );
        // A device at 95 % is marked high; its memory is 6 of 24 GiB.
        assert!(
            h.contains("<div class=\"bar hi\"><span style=\"width:95%\"></span></div> 95 %"),
            "{h}"
        );
        assert!(h.contains("6.00 GiB / 24.00 GiB"), "{h}");
        assert!(h.contains("245 / 355 W"), "{h}");
        assert!(h.contains("1 uncorrected memory errors"), "{h}");
        assert!(h.contains("held by ml/trainer-a (main)"), "{h}");
        assert!(
            h.contains(
                "pid 3001 py&lt;thon&gt; (root) 256.00 MiB <span class=\"fix\">pod 3f2a6b1c</span>"
            ),
            "{h}"
        );
        // The lost GPU: FAIL, its XID and its status.
        assert!(h.contains("<td class=\"st fail\">FAIL</td>"), "{h}");
        assert!(h.contains("XID 79 x1; fallen off the bus"), "{h}");
        assert!(!h.contains("<svg"), "no history, no lines");
        assert!(!h.contains("<script") && !h.contains("http"), "{h}");
    }

    #[test]
    fn history_draws_one_line_per_row_and_series() {
        let mut d = doc();
        d["history"] = serde_json::json!({
            "host": {"util": [10.0, 20.0, null, 40.0], "mem": [25.0, 25.0]},
            "amd:0": {"util": [0.0, 100.0], "mem": [null]}
        });
        let h = crate::render_value(&d);
        assert_eq!(h.matches("<svg").count(), 3, "{h}");
        // Four points over 160 px: x = 0, 53.3, (gap), 160; y = 28 - v/100 * 26 - 1.
        assert!(
            h.contains("points=\"0.0,24.4 53.3,21.8 160.0,16.6\""),
            "{h}"
        );
        assert!(h.contains("points=\"0.0,27.0 160.0,1.0\""), "{h}");
    }

    #[test]
    fn a_watch_document_draws_the_last_sample_with_the_lines_of_all() {
        let mut a = doc();
        a["host"]["cpu_percent"] = 50.0.into();
        a["devices"][0]["utilization_percent"] = 0.0.into();
        let b = doc();
        let h = crate::render_value(&serde_json::json!({"kind": "watch", "samples": [a, b]}));
        // The last sample's numbers, and two-point lines: host CPU 50 -> 12.5 %, amd:0 0 -> 95 %.
        assert!(
            h.contains("<span style=\"width:12%\"></span></div> 12 %"),
            "{h}"
        );
        assert!(h.contains("points=\"0.0,14.0 160.0,23.8\""), "{h}");
        assert!(h.contains("points=\"0.0,27.0 160.0,2.3\""), "{h}");
        // The lost GPU has no numbers: no line.
        assert_eq!(
            h.matches("<svg").count(),
            4,
            "host and amd:0, utilisation and memory"
        );
        let empty = crate::render_value(&serde_json::json!({"kind": "watch", "samples": []}));
        assert!(empty.contains("No sample yet"), "{empty}");
    }
}
