//! Values no device can have, caught before anyone reads them: a sensor that answers
//! -9.2e15 °C, a percentage of 1.8e21, a used size above the total. Such a value is taken out
//! of the reading (the field becomes `None`, so it reaches no table, total or series) and kept,
//! with its raw text, in [`Reading::invalid`], which `--json` shows.
//!
//! The bounds are physics and hardware with a wide margin, not any vendor's datasheet: a GPU
//! sensor below -60 °C or above 200 °C is broken, no accelerator draws more than 10 kW, and a
//! percentage is at most 100 (with a little room for the rounding of two counters read at
//! slightly different times).

use super::reading::{InvalidValue, Reading};

/// Percentages may come out a little above 100 from two counters read microseconds apart.
const PERCENT_MAX: f64 = 100.5;
/// No device memory, GTT or process share is larger (1 PiB).
const BYTES_MAX: u64 = 1 << 50;

fn check_f64(field: &str, v: &mut Option<f64>, lo: f64, hi: f64, out: &mut Vec<InvalidValue>) {
    if let Some(x) = *v {
        if !x.is_finite() || x < lo || x > hi {
            out.push(InvalidValue {
                field: field.to_string(),
                raw: format!("{x:e}"),
                why: format!("outside {lo} to {hi}"),
            });
            *v = None;
        }
    }
}

fn check_u64(field: &str, v: &mut Option<u64>, hi: u64, why: &str, out: &mut Vec<InvalidValue>) {
    if let Some(x) = *v {
        if x > hi {
            out.push(InvalidValue {
                field: field.to_string(),
                raw: x.to_string(),
                why: why.to_string(),
            });
            *v = None;
        }
    }
}

fn check_u32(field: &str, v: &mut Option<u32>, hi: u32, out: &mut Vec<InvalidValue>) {
    let mut wide = v.map(u64::from);
    check_u64(field, &mut wide, u64::from(hi), &format!("above {hi}"), out);
    if wide.is_none() {
        *v = None;
    }
}

impl Reading {
    /// Takes out every value no device can have (see the module's bounds), noting each in
    /// [`Reading::invalid`]. Runs on every reading telemetry returns.
    pub fn check_plausible(&mut self) {
        let mut bad = Vec::new();
        let pct = PERCENT_MAX;
        check_f64(
            "utilization_percent",
            &mut self.utilization_percent,
            0.0,
            pct,
            &mut bad,
        );
        check_f64(
            "memory_busy_percent",
            &mut self.memory_busy_percent,
            0.0,
            pct,
            &mut bad,
        );
        check_f64(
            "temperature_c",
            &mut self.temperature_c,
            -60.0,
            200.0,
            &mut bad,
        );
        check_f64("power_w", &mut self.power_w, 0.0, 10_000.0, &mut bad);
        check_f64(
            "power_limit_w",
            &mut self.power_limit_w,
            0.0,
            10_000.0,
            &mut bad,
        );
        check_f64(
            "energy_joules",
            &mut self.energy_joules,
            0.0,
            1e15,
            &mut bad,
        );
        let big = format!("above {BYTES_MAX} (1 PiB)");
        check_u64(
            "memory_total_bytes",
            &mut self.memory_total_bytes,
            BYTES_MAX,
            &big,
            &mut bad,
        );
        check_u64(
            "gtt_total_bytes",
            &mut self.gtt_total_bytes,
            BYTES_MAX,
            &big,
            &mut bad,
        );
        let total = self.memory_total_bytes.unwrap_or(BYTES_MAX);
        check_u64(
            "memory_used_bytes",
            &mut self.memory_used_bytes,
            total,
            "above the device's total",
            &mut bad,
        );
        let gtt = self.gtt_total_bytes.unwrap_or(BYTES_MAX);
        check_u64(
            "gtt_used_bytes",
            &mut self.gtt_used_bytes,
            gtt,
            "above the GTT's total",
            &mut bad,
        );
        check_u32("fan_rpm", &mut self.fan_rpm, 100_000, &mut bad);
        check_u32("clock_core_mhz", &mut self.clock_core_mhz, 20_000, &mut bad);
        check_u32(
            "clock_memory_mhz",
            &mut self.clock_memory_mhz,
            50_000,
            &mut bad,
        );
        let link = format!("above {} (10 TB/s)", 10_000_000_000_000u64);
        check_u64(
            "pcie_tx_bytes_per_s",
            &mut self.pcie_tx_bytes_per_s,
            10_000_000_000_000,
            &link,
            &mut bad,
        );
        check_u64(
            "pcie_rx_bytes_per_s",
            &mut self.pcie_rx_bytes_per_s,
            10_000_000_000_000,
            &link,
            &mut bad,
        );
        for p in &mut self.processes {
            check_u64(
                &format!("processes[{}].memory_bytes", p.pid),
                &mut p.memory_bytes,
                total,
                "above the device's total",
                &mut bad,
            );
            // A process's share may count several engines: bounded, not at 100.
            check_f64(
                &format!("processes[{}].busy_percent", p.pid),
                &mut p.busy_percent,
                0.0,
                1_000.0,
                &mut bad,
            );
        }
        self.invalid.extend(bad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::{ProcessUse, Vendor};

    #[test]
    fn impossible_values_are_taken_out_and_kept_with_their_raw_text() {
        let mut r = Reading::new(Vendor::Amd, 0, "GPU");
        r.temperature_c = Some(-9.2e15);
        r.utilization_percent = Some(1.8e21);
        r.memory_busy_percent = Some(f64::NAN);
        r.power_w = Some(250.0);
        r.memory_total_bytes = Some(8 << 30);
        r.memory_used_bytes = Some(9 << 30);
        r.fan_rpm = Some(u32::MAX);
        r.processes = vec![ProcessUse {
            pid: 7,
            memory_bytes: Some(u64::MAX),
            busy_percent: Some(12.0),
            ..ProcessUse::default()
        }];
        r.check_plausible();
        assert_eq!(r.temperature_c, None);
        assert_eq!(r.utilization_percent, None);
        assert_eq!(r.memory_busy_percent, None);
        assert_eq!(r.memory_used_bytes, None);
        assert_eq!(r.fan_rpm, None);
        assert_eq!(r.processes[0].memory_bytes, None);
        // What is plausible stays.
        assert_eq!(r.power_w, Some(250.0));
        assert_eq!(r.memory_total_bytes, Some(8 << 30));
        assert_eq!(r.processes[0].busy_percent, Some(12.0));
        let fields: Vec<&str> = r.invalid.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "utilization_percent",
                "memory_busy_percent",
                "temperature_c",
                "memory_used_bytes",
                "fan_rpm",
                "processes[7].memory_bytes"
            ]
        );
        assert_eq!(r.invalid[2].raw, "-9.2e15");
        assert_eq!(r.invalid[1].raw, "NaN");
        // Edges: 100 %, -40 °C and used == total are fine.
        let mut ok = Reading::new(Vendor::Amd, 0, "GPU");
        ok.utilization_percent = Some(100.0);
        ok.temperature_c = Some(-40.0);
        ok.memory_total_bytes = Some(1 << 30);
        ok.memory_used_bytes = Some(1 << 30);
        ok.check_plausible();
        assert!(ok.invalid.is_empty(), "{:?}", ok.invalid);
    }
}
