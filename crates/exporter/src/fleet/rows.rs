//! The fleet's rows: one per device and per host, the totals, and one round of them; built
//! from each host's `/snapshot` document (Prometheus rows are built in `mod.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use serde::Serialize;
#[cfg(test)]
use serde_json::Value;

/// One device of a host, as the fleet view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceRow {
    /// The device's id on its machine (`nvidia:0`).
    pub device: String,
    /// The device's product name.
    pub name: String,
    /// Whether the device answered in the machine's last sample.
    pub up: bool,
    /// Why it did not, or its health note.
    pub status: Option<String>,
    /// Busy percent (the mean over its devices for a machine or the fleet).
    pub utilization_percent: Option<f64>,
    /// Device memory in use (summed over devices for a machine or the fleet).
    pub memory_used_bytes: Option<u64>,
    /// Device memory in all (summed likewise).
    pub memory_total_bytes: Option<u64>,
    /// Temperature in °C.
    pub temperature_c: Option<f64>,
    /// Power draw in watts (summed over devices for a machine or the fleet).
    pub power_w: Option<f64>,
}

impl DeviceRow {
    /// Its numbers through telemetry's bounds (`Reading::check_plausible`): another machine's
    /// exporter may be broken or hostile, and one value no device can have (a total of
    /// 2^64 - 1 bytes, a temperature of -9.2e15) must not reach the fleet's totals.
    fn make_plausible(&mut self) {
        use accelkit_telemetry::{Reading, Vendor};
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
    /// The machine's CPU use in percent.
    pub cpu_percent: Option<f64>,
    /// Devices counted.
    pub devices: usize,
    /// Devices that answered.
    pub devices_up: usize,
    /// Mean utilisation of the devices that report one.
    pub utilization_percent: Option<f64>,
    /// Device memory in use (summed over devices for a machine or the fleet).
    pub memory_used_bytes: Option<u64>,
    /// Device memory in all (summed likewise).
    pub memory_total_bytes: Option<u64>,
    /// The hottest device's temperature in °C.
    pub temperature_max_c: Option<f64>,
    /// Power draw in watts (summed over devices for a machine or the fleet).
    pub power_w: Option<f64>,
    /// When the numbers were collected on the machine (Unix seconds).
    pub sampled_unix_s: Option<f64>,
    /// Its devices, at most `MAX_DEVICES_PER_HOST`.
    pub device_rows: Vec<DeviceRow>,
    /// Devices its answer listed past [`MAX_DEVICES_PER_HOST`] (or that were no device
    /// object), counted but not shown.
    pub devices_not_shown: usize,
}

/// The fleet's totals.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Totals {
    /// Machines counted.
    pub hosts: usize,
    /// Machines that answered.
    pub hosts_up: usize,
    /// Devices counted.
    pub devices: usize,
    /// Devices that answered.
    pub devices_up: usize,
    /// Busy percent (the mean over its devices for a machine or the fleet).
    pub utilization_percent: Option<f64>,
    /// Device memory in use (summed over devices for a machine or the fleet).
    pub memory_used_bytes: u64,
    /// Device memory in all (summed likewise).
    pub memory_total_bytes: u64,
    /// Power draw in watts (summed over devices for a machine or the fleet).
    pub power_w: f64,
}

/// One round over the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// When the round was taken (Unix seconds).
    pub time_unix_s: f64,
    /// `hosts` or `prometheus`.
    pub source: &'static str,
    /// A row per machine.
    pub hosts: Vec<HostRow>,
    /// The fleet's sums.
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
            devices_not_shown: 0,
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

/// The most devices one host's row keeps: a machine has at most a few dozen (16 GPUs of 7
/// MIG instances each is 128 rows); what a member sends past this is counted, not kept.
pub const MAX_DEVICES_PER_HOST: usize = 256;

/// The most characters a name, status or host name from a member keeps.
const MAX_TEXT: usize = 256;

/// One JSON value where a number, a flag or a text is expected: anything else (an array, an
/// object) is read past without being kept, so a member's document costs memory for what is
/// shown only.
#[derive(Default)]
enum Scalar {
    #[default]
    Other,
    Bool(bool),
    Number(f64),
    Unsigned(u64),
    Text(String),
}

impl Scalar {
    fn f64(&self) -> Option<f64> {
        match *self {
            Scalar::Number(v) => Some(v),
            Scalar::Unsigned(v) => Some(v as f64),
            _ => None,
        }
    }
    fn u64(&self) -> Option<u64> {
        match *self {
            Scalar::Unsigned(v) => Some(v),
            _ => None,
        }
    }
    fn bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn text(&self) -> Option<String> {
        match self {
            Scalar::Text(t) => Some(t.clone()),
            _ => None,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Unsigned(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.chars().take(MAX_TEXT).collect()))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// An object of the document, where one is expected: anything else is read past (`None`).
struct ObjectOr<T>(Option<T>);

impl<T> Default for ObjectOr<T> {
    fn default() -> Self {
        ObjectOr(None)
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for ObjectOr<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = ObjectOr<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                a: A,
            ) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(|t| ObjectOr(Some(t)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Self::Value, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(ObjectOr(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The `devices` array: the first [`MAX_DEVICES_PER_HOST`] objects kept, every other element
/// read past and counted.
#[derive(Default)]
struct Devices {
    kept: Vec<SnapshotDevice>,
    dropped: usize,
}

impl<'de> serde::Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Devices;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of devices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Devices, A::Error> {
                let mut out = Devices::default();
                loop {
                    if out.kept.len() < MAX_DEVICES_PER_HOST {
                        match a.next_element::<ObjectOr<SnapshotDevice>>()? {
                            None => break,
                            Some(ObjectOr(Some(d))) => out.kept.push(d),
                            Some(ObjectOr(None)) => out.dropped += 1,
                        }
                    } else {
                        match a.next_element::<serde::de::IgnoredAny>()? {
                            None => break,
                            Some(_) => out.dropped += 1,
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

/// What the fleet reads of one device in a member's snapshot; every other key is read past.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct SnapshotDevice {
    vendor: Scalar,
    index: Scalar,
    mig_index: Scalar,
    name: Scalar,
    up: Scalar,
    status: Scalar,
    utilization_percent: Scalar,
    memory_used_bytes: Scalar,
    memory_total_bytes: Scalar,
    temperature_c: Scalar,
    power_w: Scalar,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct SnapshotHost {
    cpu_percent: Scalar,
}

/// What the fleet reads of a member's `/snapshot` (the document of `accel monitor --json`).
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct Snapshot {
    kind: Scalar,
    time_unix_s: Scalar,
    hostname: Scalar,
    host: ObjectOr<SnapshotHost>,
    devices: Devices,
}

/// A host row from the bytes of an `accel serve` `/snapshot` answer, read in one pass that
/// keeps only what is shown: at most [`MAX_DEVICES_PER_HOST`] devices (the rest counted in
/// `devices_not_shown`), texts cut to 256 characters, values of the wrong kind skipped. A
/// member's answer thus costs memory for its rows, not for what it sent (a 16 MiB list of
/// zeros once became 8 million rows).
pub(super) fn from_snapshot_bytes(host: &str, body: &[u8]) -> anyhow::Result<HostRow> {
    let snap: Snapshot = match serde_json::from_slice::<ObjectOr<Snapshot>>(body) {
        Ok(ObjectOr(Some(s))) => s,
        Ok(ObjectOr(None)) => bail!("not an accel snapshot (not a JSON object)"),
        Err(e) => bail!("not an accel snapshot: {e}"),
    };
    if snap.kind.text().as_deref() != Some("monitor") {
        bail!(
            "not an accel snapshot (kind {})",
            snap.kind
                .text()
                .map_or("missing".into(), |k| format!("{k:?}"))
        );
    }
    let mut r = HostRow::empty(host);
    r.sampled_unix_s = snap.time_unix_s.f64();
    r.hostname = snap.hostname.text();
    r.cpu_percent = snap.host.0.and_then(|h| h.cpu_percent.f64());
    r.devices_not_shown = snap.devices.dropped;
    for d in snap.devices.kept {
        let vendor = d.vendor.text().unwrap_or_else(|| "?".into());
        let index = d.index.u64().unwrap_or(0);
        let device = match d.mig_index.u64() {
            Some(m) => format!("{vendor}:{index}/mig{m}"),
            None => format!("{vendor}:{index}"),
        };
        r.device_rows.push(DeviceRow {
            device,
            name: d.name.text().unwrap_or_default(),
            up: d.up.bool().unwrap_or(false),
            status: d.status.text(),
            utilization_percent: d.utilization_percent.f64(),
            memory_used_bytes: d.memory_used_bytes.u64(),
            memory_total_bytes: d.memory_total_bytes.u64(),
            temperature_c: d.temperature_c.f64(),
            power_w: d.power_w.f64(),
        });
    }
    r.summarize();
    Ok(r)
}

/// [`from_snapshot_bytes`] for a document already parsed (the tests').
#[cfg(test)]
pub(super) fn from_snapshot(host: &str, v: &Value) -> anyhow::Result<HostRow> {
    from_snapshot_bytes(host, &serde_json::to_vec(v)?)
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
