//! The fleet's rows: one per device and per host, the totals, and one round of them; built
//! from each host's `/snapshot` document (Prometheus rows are built in `mod.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use serde::Serialize;
use serde_json::Value;

/// One device of a host, as the fleet view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceRow {
    pub device: String,
    pub name: String,
    pub up: bool,
    pub status: Option<String>,
    pub utilization_percent: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
}

impl DeviceRow {
    /// Its numbers through telemetry's bounds (`Reading::check_plausible`): another machine's
    /// exporter may be broken or hostile, and one value no device can have (a total of
    /// 2^64 - 1 bytes, a temperature of -9.2e15) must not reach the fleet's totals.
    fn make_plausible(&mut self) {
        use accel::telemetry::{Reading, Vendor};
        // The bounds do not depend on the vendor.
        let mut r = Reading::new(Vendor::Amd, 0, "");
        r.utilization_percent = self.utilization_percent;
        r.memory_used_bytes = self.memory_used_bytes;
        r.memory_total_bytes = self.memory_total_bytes;
        r.temperature_c = self.temperature_c;
        r.power_w = self.power_w;
        r.check_plausible();
        self.utilization_percent = r.utilization_percent;
        self.memory_used_bytes = r.memory_used_bytes;
        self.memory_total_bytes = r.memory_total_bytes;
        self.temperature_c = r.temperature_c;
        self.power_w = r.power_w;
    }
}

/// Sums that stop at the largest value instead of wrapping.
fn saturating_sum(v: impl Iterator<Item = u64>) -> u64 {
    v.fold(0u64, u64::saturating_add)
}

/// One machine.
#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    /// As given on the command line (or Prometheus's `instance` label).
    pub host: String,
    /// `up`, `stale` (answers, but its last collection is old) or `down`.
    pub state: &'static str,
    /// When it entered that state (Unix seconds), where known.
    pub since_unix_s: Option<f64>,
    /// Why it is down or stale.
    pub error: Option<String>,
    /// The machine's own name (its exporter's `Hostname`).
    pub hostname: Option<String>,
    pub cpu_percent: Option<f64>,
    pub devices: usize,
    pub devices_up: usize,
    /// Mean utilisation of the devices that report one.
    pub utilization_percent: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub temperature_max_c: Option<f64>,
    pub power_w: Option<f64>,
    /// When the numbers were collected on the machine (Unix seconds).
    pub sampled_unix_s: Option<f64>,
    pub device_rows: Vec<DeviceRow>,
}

/// The fleet's totals.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Totals {
    pub hosts: usize,
    pub hosts_up: usize,
    pub devices: usize,
    pub devices_up: usize,
    pub utilization_percent: Option<f64>,
    pub memory_used_bytes: u64,
    pub memory_total_bytes: u64,
    pub power_w: f64,
}

/// One round over the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub time_unix_s: f64,
    /// `hosts` or `prometheus`.
    pub source: &'static str,
    pub hosts: Vec<HostRow>,
    pub totals: Totals,
}

pub(super) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |t| t.as_secs_f64())
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

impl HostRow {
    pub(super) fn empty(host: &str) -> HostRow {
        HostRow {
            host: host.to_string(),
            state: "down",
            since_unix_s: None,
            error: None,
            hostname: None,
            cpu_percent: None,
            devices: 0,
            devices_up: 0,
            utilization_percent: None,
            memory_used_bytes: None,
            memory_total_bytes: None,
            temperature_max_c: None,
            power_w: None,
            sampled_unix_s: None,
            device_rows: Vec::new(),
        }
    }

    /// Fills the summary columns from the device rows.
    pub(super) fn summarize(&mut self) {
        for d in &mut self.device_rows {
            d.make_plausible();
        }
        let up: Vec<&DeviceRow> = self.device_rows.iter().filter(|d| d.up).collect();
        self.devices = self.device_rows.len();
        self.devices_up = up.len();
        self.utilization_percent = mean(up.iter().filter_map(|d| d.utilization_percent));
        let sum = |f: fn(&DeviceRow) -> Option<u64>| {
            let v: Vec<u64> = up.iter().filter_map(|d| f(d)).collect();
            (!v.is_empty()).then(|| saturating_sum(v.into_iter()))
        };
        self.memory_used_bytes = sum(|d| d.memory_used_bytes);
        self.memory_total_bytes = sum(|d| d.memory_total_bytes);
        self.temperature_max_c = up
            .iter()
            .filter_map(|d| d.temperature_c)
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
        let p: Vec<f64> = up.iter().filter_map(|d| d.power_w).collect();
        self.power_w = (!p.is_empty()).then(|| p.iter().sum());
    }
}

pub(super) fn totals(hosts: &[HostRow]) -> Totals {
    Totals {
        hosts: hosts.len(),
        hosts_up: hosts.iter().filter(|h| h.state == "up").count(),
        devices: hosts.iter().map(|h| h.devices).sum(),
        devices_up: hosts.iter().map(|h| h.devices_up).sum(),
        utilization_percent: mean(
            hosts
                .iter()
                .flat_map(|h| h.device_rows.iter())
                .filter(|d| d.up)
                .filter_map(|d| d.utilization_percent),
        ),
        memory_used_bytes: saturating_sum(hosts.iter().filter_map(|h| h.memory_used_bytes)),
        memory_total_bytes: saturating_sum(hosts.iter().filter_map(|h| h.memory_total_bytes)),
        power_w: hosts.iter().filter_map(|h| h.power_w).sum(),
    }
}

/// A host row from an `accel serve` `/snapshot` document.
pub(super) fn from_snapshot(host: &str, v: &Value) -> anyhow::Result<HostRow> {
    if v["kind"] != "monitor" {
        bail!("not an accel snapshot (kind {})", v["kind"]);
    }
    let mut r = HostRow::empty(host);
    r.sampled_unix_s = v["time_unix_s"].as_f64();
    r.hostname = v["hostname"].as_str().map(String::from);
    r.cpu_percent = v["host"]["cpu_percent"].as_f64();
    for d in v["devices"].as_array().into_iter().flatten() {
        let vendor = d["vendor"].as_str().unwrap_or("?");
        let index = d["index"].as_u64().unwrap_or(0);
        let device = match d["mig_index"].as_u64() {
            Some(m) => format!("{vendor}:{index}/mig{m}"),
            None => format!("{vendor}:{index}"),
        };
        r.device_rows.push(DeviceRow {
            device,
            name: d["name"].as_str().unwrap_or("").to_string(),
            up: d["up"].as_bool().unwrap_or(false),
            status: d["status"].as_str().map(String::from),
            utilization_percent: d["utilization_percent"].as_f64(),
            memory_used_bytes: d["memory_used_bytes"].as_u64(),
            memory_total_bytes: d["memory_total_bytes"].as_u64(),
            temperature_c: d["temperature_c"].as_f64(),
            power_w: d["power_w"].as_f64(),
        });
    }
    r.summarize();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hostile_host_does_not_blank_or_wrap_the_totals() {
        let good = serde_json::json!({"kind": "monitor", "devices": [
            {"vendor": "amd", "index": 0, "name": "GPU", "up": true, "utilization_percent": 50.0,
             "memory_used_bytes": 1u64 << 30, "memory_total_bytes": 8u64 << 30,
             "temperature_c": 60.0, "power_w": 200.0}]});
        let bad = serde_json::json!({"kind": "monitor", "devices": [
            {"vendor": "amd", "index": 0, "name": "GPU", "up": true, "utilization_percent": 1.8e21,
             "memory_used_bytes": u64::MAX, "memory_total_bytes": u64::MAX,
             "temperature_c": -9.2e15, "power_w": 1e300},
            {"vendor": "amd", "index": 1, "name": "GPU", "up": true,
             "memory_used_bytes": 9u64 << 30, "memory_total_bytes": 8u64 << 30}]});
        let hosts = vec![
            from_snapshot("a:9400", &good).unwrap(),
            from_snapshot("b:9400", &bad).unwrap(),
        ];
        let t = totals(&hosts);
        // The bad host's impossible values are left out, its plausible ones kept.
        assert_eq!(t.memory_total_bytes, 16 << 30);
        assert_eq!(t.memory_used_bytes, 1 << 30);
        assert_eq!(t.power_w, 200.0);
        assert_eq!(t.utilization_percent, Some(50.0));
        assert_eq!(hosts[1].temperature_max_c, None);
        assert_eq!(saturating_sum([u64::MAX, 5].into_iter()), u64::MAX);
    }

    /// Random JSON where a snapshot should be (a hostile or broken host): a row or an error,
    /// never a panic, and no total that wraps.
    #[test]
    fn random_snapshots_are_rows_or_errors() {
        let keys = [
            "kind",
            "devices",
            "vendor",
            "index",
            "mig_index",
            "name",
            "up",
            "status",
            "utilization_percent",
            "memory_used_bytes",
            "memory_total_bytes",
            "temperature_c",
            "power_w",
            "host",
            "cpu_percent",
            "time_unix_s",
            "hostname",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        fn value(next: &mut dyn FnMut() -> u64, keys: &[&str], depth: u32) -> Value {
            match next() % if depth > 3 { 6 } else { 8 } {
                0 => Value::Null,
                1 => Value::Bool(next().is_multiple_of(2)),
                2 => Value::from(next()),
                3 => Value::from(f64::from_bits(next()) % 1e300),
                4 => Value::from(-((next() % 1000) as i64)),
                5 => Value::from(["monitor", "", "\u{1b}[2J", "amd"][(next() % 4) as usize]),
                6 => Value::Array(
                    (0..next() % 4)
                        .map(|_| value(next, keys, depth + 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..next() % 6)
                        .map(|_| {
                            let k = keys[(next() as usize) % keys.len()].to_string();
                            (k, value(next, keys, depth + 1))
                        })
                        .collect(),
                ),
            }
        }
        let mut hosts = Vec::new();
        for i in 0..3000 {
            let mut v = value(&mut next, &keys, 0);
            if i % 2 == 0 {
                // Half of them look like snapshots, so the device rows are reached.
                v = serde_json::json!({"kind": "monitor", "devices": [v.clone(), v]});
            }
            if let Ok(r) = from_snapshot("h:9400", &v) {
                hosts.push(r);
            }
        }
        assert!(hosts.len() > 1000, "{}", hosts.len());
        let t = totals(&hosts);
        assert!(t.memory_used_bytes <= t.memory_total_bytes.max(t.memory_used_bytes));
        assert!(t.power_w.is_finite());
    }
}
