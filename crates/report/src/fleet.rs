//! A fleet at one moment as HTML (`accel monitor --hosts ... --html`, and the live page of
//! `accel monitor --hosts ... --serve`): the totals, then one row per machine (its state and
//! since when, why it is down, CPU, devices up, mean utilisation, device memory, hottest
//! device, power) with a row per device under it; with a `history`, a line of utilisation and
//! one of memory per row (its keys: a machine's `host`, a device's `host` and `device` with a
//! space between). A fleet can be thousands of machines: the page draws the first
//! [`MAX_HOSTS`] machines and [`MAX_DEVICES`] devices and says how many it left out (all of
//! them are in the JSON document).

use serde_json::Value;

use accelkit_core::units::utc;

use super::parts::{
    bar, bytes, celsius, escape, history_cell, memory_bar, pct_label, status, text,
};

/// Machines drawn at most; the rest are counted.
const MAX_HOSTS: usize = 500;
/// Device rows drawn at most, over all machines.
const MAX_DEVICES: usize = 2000;

/// The id of a machine's row in a `history`.
fn host_key(h: &Value) -> String {
    text(&h["host"])
}

/// The id of a device's row in a `history`: the machine's id, a space and the device's.
fn device_key(h: &Value, d: &Value) -> String {
    format!("{} {}", text(&h["host"]), text(&d["device"]))
}

/// Memory used against total; `-` alone when neither is known.
fn memory_cell(used: &Value, total: &Value) -> String {
    if used.is_null() && total.is_null() {
        return "-".into();
    }
    memory_bar(used, total)
}

fn watts(v: &Value) -> String {
    v.as_f64()
        .map_or("-".into(), |p| format!("{:.0} W", p.max(0.0) + 0.0))
}

/// A fleet document (`accel monitor --hosts ... --json`'s round), with an optional `history`
/// of percent values per row ([`host_key`], [`device_key`]).
pub(super) fn fleet(doc: &Value) -> String {
    let history = &doc["history"];
    let with_history = history.is_object();
    let t = &doc["totals"];
    let source = match doc["source"].as_str() {
        Some("prometheus") => "read from Prometheus",
        _ => "polled from each machine's accel serve",
    };
    let mut h = format!(
        "<p><b>fleet</b>: {} of {} machines up, {} of {} devices up; mean utilisation {}; memory {}; {}{}; {source}</p>",
        escape(&text(&t["hosts_up"])),
        escape(&text(&t["hosts"])),
        escape(&text(&t["devices_up"])),
        escape(&text(&t["devices"])),
        t["utilization_percent"]
            .as_f64()
            .map_or("-".into(), |u| format!("{u:.0} %")),
        escape(&format!(
            "{} / {}",
            bytes(&t["memory_used_bytes"]),
            bytes(&t["memory_total_bytes"])
        )),
        watts(&t["power_w"]),
        doc["time_unix_s"]
            .as_f64()
            .map_or(String::new(), |s| format!(" at {}", escape(&utc(s)))),
    );
    let hosts = doc["hosts"].as_array().map_or(&[][..], |v| v.as_slice());
    if hosts.is_empty() {
        h.push_str("<p>No machine in the fleet.</p>");
        return h;
    }
    h.push_str(&format!(
        "<table><tr><th>machine</th><th>state</th><th>CPU</th><th>devices</th><th>utilisation</th><th>memory</th><th>hottest</th><th>power</th>{}</tr>",
        if with_history { "<th>last minutes</th>" } else { "" }
    ));
    let mut devices_drawn = 0usize;
    let mut devices_left = 0usize;
    for host in hosts.iter().take(MAX_HOSTS) {
        h.push_str(&host_row(host, history, with_history));
        // What the fleet already left out of the machine's answer (`devices_not_shown`).
        devices_left += host["devices_not_shown"].as_u64().unwrap_or(0) as usize;
        for d in host["device_rows"].as_array().into_iter().flatten() {
            if devices_drawn == MAX_DEVICES {
                devices_left += 1;
                continue;
            }
            devices_drawn += 1;
            h.push_str(&device_row(host, d, history, with_history));
        }
    }
    h.push_str("</table>");
    let hosts_left = hosts.len().saturating_sub(MAX_HOSTS);
    if hosts_left > 0 || devices_left > 0 {
        h.push_str(&format!(
            "<p class=\"fix\">Not drawn: {hosts_left} more machines, and {devices_left} devices of the machines drawn (every one is in the JSON document).</p>"
        ));
    }
    h
}

fn host_row(host: &Value, history: &Value, with_history: bool) -> String {
    let state = host["state"].as_str().unwrap_or("down");
    let since = host["since_unix_s"]
        .as_f64()
        .map_or(String::new(), |s| format!(" since {}", utc(s)));
    let error = text(&host["error"]);
    let name = text(&host["hostname"]);
    let cpu = host["cpu_percent"].as_f64();
    let util = host["utilization_percent"].as_f64();
    let st = status(state);
    // The status cell with since when and why, under the word.
    let st = st.replacen(
        "</td>",
        &format!(
            "<div class=\"fix why\">{}{}</div></td>",
            escape(since.trim_start()),
            if error.is_empty() {
                String::new()
            } else {
                format!(": {}", escape(&error))
            }
        ),
        1,
    );
    format!(
        "<tr><th>{}{}</th>{st}<td>{}</td><td class=\"nw\">{} of {} up</td><td>{}</td><td>{}</td><td>{}</td><td class=\"nw\">{}</td>{}</tr>",
        escape(&text(&host["host"])),
        if name.is_empty() || name == text(&host["host"]) {
            String::new()
        } else {
            format!("<div class=\"fix\">{}</div>", escape(&name))
        },
        bar(cpu, &pct_label(cpu)),
        escape(&text(&host["devices_up"])),
        escape(&text(&host["devices"])),
        bar(util, &pct_label(util)),
        memory_cell(&host["memory_used_bytes"], &host["memory_total_bytes"]),
        celsius(&host["temperature_max_c"]),
        watts(&host["power_w"]),
        if with_history {
            history_cell(history, &host_key(host))
        } else {
            String::new()
        }
    )
}

fn device_row(host: &Value, d: &Value, history: &Value, with_history: bool) -> String {
    let util = d["utilization_percent"].as_f64();
    let st = if d["up"] == true {
        status("up")
    } else {
        status("fail")
    };
    let why = text(&d["status"]);
    format!(
        "<tr><td class=\"nw\">&emsp;{}<div class=\"fix\">&emsp;{}</div></td>{st}<td></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"nw\">{}</td>{}</tr>",
        escape(&text(&d["device"])),
        escape(&text(&d["name"])),
        escape(&why),
        bar(util, &pct_label(util)),
        memory_cell(&d["memory_used_bytes"], &d["memory_total_bytes"]),
        celsius(&d["temperature_c"]),
        watts(&d["power_w"]),
        if with_history {
            history_cell(history, &device_key(host, d))
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(util: f64, b_state: &str) -> Value {
        serde_json::json!({
            "kind": "fleet", "source": "hosts", "time_unix_s": 1_764_780_942.0,
            "totals": {"hosts": 2, "hosts_up": 1, "devices": 3, "devices_up": 2,
                       "utilization_percent": util, "memory_used_bytes": 6u64 << 30,
                       "memory_total_bytes": 36u64 << 30, "power_w": 245.0},
            "hosts": [
                {"host": "a:9400", "state": "up", "since_unix_s": 1_764_780_000.0, "error": null,
                 "hostname": "gpu<1>", "cpu_percent": 12.0, "devices": 2, "devices_up": 2,
                 "utilization_percent": util, "memory_used_bytes": 6u64 << 30,
                 "memory_total_bytes": 36u64 << 30, "temperature_max_c": 65.0, "power_w": 245.0,
                 "device_rows": [
                    {"device": "amd:0", "name": "MI300X", "up": true, "status": null,
                     "utilization_percent": util, "memory_used_bytes": 6u64 << 30,
                     "memory_total_bytes": 24u64 << 30, "temperature_c": 65.0, "power_w": 245.0},
                    {"device": "intel:1", "name": "Arc", "up": true, "status": null,
                     "utilization_percent": null, "memory_used_bytes": null,
                     "memory_total_bytes": 12u64 << 30, "temperature_c": null, "power_w": null}]},
                {"host": "b:9400", "state": b_state, "since_unix_s": 1_764_780_900.0,
                 "error": "cannot connect: refused <x>", "hostname": null, "cpu_percent": null,
                 "devices": 1, "devices_up": 0, "utilization_percent": null,
                 "memory_used_bytes": null, "memory_total_bytes": null,
                 "temperature_max_c": null, "power_w": null,
                 "device_rows": [{"device": "nvidia:0", "name": "T4", "up": false,
                                  "status": null}]}
            ]
        })
    }

    #[test]
    fn a_fleet_is_its_totals_a_row_per_machine_and_one_per_device() {
        let h = crate::render_value(&round(42.0, "down"));
        assert!(
            h.contains("<b>fleet</b>: 1 of 2 machines up, 2 of 3 devices up; mean utilisation 42 %; memory 6.00 GiB / 36.00 GiB; 245 W at 2025-12-03 16:55:42 UTC"),
            "{h}"
        );
        // The machine's row: its address, its own name escaped, UP with since when.
        assert!(
            h.contains("<tr><th>a:9400<div class=\"fix\">gpu&lt;1&gt;</div></th><td class=\"st pass\">UP<div class=\"fix why\">since 2025-12-03 16:40:00 UTC</div></td>"),
            "{h}"
        );
        assert!(h.contains("<td class=\"nw\">2 of 2 up</td>"), "{h}");
        // 6 of 36 GiB: a bar 17 % wide.
        assert!(h.contains("width:17%"), "{h}");
        // The machine that is down says why, in red.
        assert!(
            h.contains("<td class=\"st fail\">DOWN<div class=\"fix why\">since 2025-12-03 16:55:00 UTC: cannot connect: refused &lt;x&gt;</div></td>"),
            "{h}"
        );
        // Three device rows under their machines; one header and two machines.
        assert_eq!(h.matches("&emsp;").count(), 6, "{h}");
        assert_eq!(h.matches("<tr>").count(), 6, "{h}");
        assert!(!h.contains("<svg") && !h.contains("<script"), "{h}");
    }

    #[test]
    fn a_history_draws_lines_per_machine_and_device() {
        let mut r = round(90.0, "down");
        r["history"] = serde_json::json!({
            "a:9400": {"util": [10.0, 90.0], "mem": [null, 50.0]},
            "a:9400 amd:0": {"util": [10.0, 90.0], "mem": [25.0, 25.0]},
            "b:9400 nvidia:0": {"util": [null, null], "mem": []}
        });
        let h = fleet(&r);
        // Lines need two known points: a:9400 its utilisation only, amd:0 both, none for the
        // T4, and an empty cell for rows without a history.
        assert_eq!(h.matches("<svg").count(), 3, "{h}");
        // 10 % then 90 %: y = 28 - v/100 * 26 - 1.
        assert!(h.contains("points=\"0.0,24.4 160.0,3.6\""), "{h}");
        assert!(h.contains("<th>last minutes</th>"), "{h}");
    }

    #[test]
    fn a_huge_fleet_is_drawn_in_part_and_says_what_it_left_out() {
        let mut r = round(1.0, "up");
        let one = r["hosts"][0].clone();
        let mut one = one;
        let dev = one["device_rows"][0].clone();
        one["device_rows"] = Value::Array(vec![dev; 5]);
        r["hosts"] = Value::Array(vec![one; 1200]);
        let h = fleet(&r);
        assert_eq!(h.matches("<tr><th>a:9400").count(), MAX_HOSTS);
        assert!(
            h.contains("Not drawn: 700 more machines, and 500 devices of the machines drawn"),
            "{}",
            &h[h.len() - 300..]
        );
    }
}
