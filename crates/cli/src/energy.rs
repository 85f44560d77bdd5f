//! `accel mem --watch SECONDS --energy`: the energy every device and the host used since the
//! first report, after each report. A device's comes from its energy counter (NVML's, amdgpu's
//! and xe's `energy1_input`) where it has one that did not go back, else from its power
//! readings integrated over time (trapezoids); the host's from RAPL (`cpu_energy_joules`,
//! `dram_energy_joules`, which the host reader sums since it started). Each total says which.

use std::collections::BTreeMap;

use accelkit::load::Snapshot;

/// One device's readings so far.
#[derive(Debug, Default)]
struct Device {
    counter_first: Option<f64>,
    counter_last: Option<f64>,
    /// The counter went back (a driver reload): the power readings are used instead.
    counter_broken: bool,
    integral_j: f64,
    last_power: Option<(f64, f64)>,
}

impl Device {
    fn joules(&self) -> Option<(f64, &'static str)> {
        match (self.counter_first, self.counter_last) {
            (Some(a), Some(b)) if !self.counter_broken => Some((b - a, "counter")),
            _ if self.last_power.is_some() => Some((self.integral_j, "power integral")),
            _ => None,
        }
    }
}

/// The totals since the first report.
#[derive(Debug, Default)]
pub struct Totals {
    first_t: Option<f64>,
    last_t: f64,
    devices: BTreeMap<String, Device>,
    cpu: (Option<f64>, Option<f64>),
    dram: (Option<f64>, Option<f64>),
    note: Option<String>,
}

impl Totals {
    /// Adds one moment: its time, each device's (name, energy counter, power), and the host's
    /// RAPL totals with the reason when there are none.
    pub fn add(
        &mut self,
        t: f64,
        devices: impl IntoIterator<Item = (String, Option<f64>, Option<f64>)>,
        cpu_j: Option<f64>,
        dram_j: Option<f64>,
        note: Option<&str>,
    ) {
        self.first_t.get_or_insert(t);
        self.last_t = t;
        for (id, counter, power) in devices {
            let d = self.devices.entry(id).or_default();
            if let Some(c) = counter {
                if d.counter_last.is_some_and(|l| c < l) {
                    d.counter_broken = true;
                }
                d.counter_first.get_or_insert(c);
                d.counter_last = Some(c);
            }
            if let Some(w) = power.filter(|w| w.is_finite() && *w >= 0.0) {
                if let Some((t0, w0)) = d.last_power {
                    d.integral_j += (t - t0).max(0.0) * (w0 + w) / 2.0;
                }
                d.last_power = Some((t, w));
            }
        }
        for (slot, v) in [(&mut self.cpu, cpu_j), (&mut self.dram, dram_j)] {
            if let Some(v) = v {
                slot.0.get_or_insert(v);
                slot.1 = Some(v);
            }
        }
        self.note = note.map(str::to_string);
    }

    /// [`Totals::add`] for one snapshot.
    pub fn add_snapshot(&mut self, s: &Snapshot) {
        let devices = s.devices.iter().map(|d| {
            let r = &d.reading;
            (r.id(), r.energy_joules, r.power_w)
        });
        self.add(
            s.time_unix_s,
            devices.collect::<Vec<_>>(),
            s.host.cpu_energy_joules,
            s.host.dram_energy_joules,
            s.host.energy_note.as_deref(),
        );
    }

    /// The line printed after each report.
    pub fn line(&self) -> String {
        let secs = self.first_t.map_or(0.0, |f| self.last_t - f);
        let amount = |j: f64| {
            let e = if j.abs() >= 1000.0 {
                format!("{:.2} kJ", j / 1000.0)
            } else {
                format!("{j:.1} J")
            };
            format!("{e} = {:.3} Wh", j / 3600.0)
        };
        let mut parts: Vec<String> = self
            .devices
            .iter()
            .map(|(id, d)| match d.joules() {
                Some((j, how)) => format!("{id} {} ({how})", amount(j)),
                None => format!("{id} - (no energy counter or power reading)"),
            })
            .collect();
        let diff = |(a, b): (Option<f64>, Option<f64>)| Some(b? - a?);
        match (diff(self.cpu), &self.note) {
            (Some(c), _) => {
                let dram = diff(self.dram).map_or("-".to_string(), amount);
                parts.push(format!("host CPU {} (RAPL), DRAM {dram}", amount(c)));
            }
            (None, Some(n)) => parts.push(format!("host - ({n})")),
            (None, None) => parts.push("host -".to_string()),
        }
        format!("energy over {secs:.1} s: {}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_win_power_is_integrated_and_the_host_says_why_not() {
        let mut t = Totals::default();
        let nv = |j, w| ("nvidia:0".to_string(), Some(j), Some(w));
        let intel = |w| ("intel:1".to_string(), None, Some(w));
        t.add(
            10.0,
            [nv(1000.0, 100.0), intel(10.0)],
            None,
            None,
            Some("no RAPL energy counters (a VM)"),
        );
        t.add(
            11.0,
            [nv(1150.0, 200.0), intel(30.0)],
            None,
            None,
            Some("no RAPL energy counters (a VM)"),
        );
        t.add(
            13.0,
            [nv(1550.0, 200.0), intel(30.0)],
            None,
            None,
            Some("no RAPL energy counters (a VM)"),
        );
        assert_eq!(
            t.line(),
            "energy over 3.0 s: intel:1 80.0 J = 0.022 Wh (power integral); nvidia:0 550.0 J = 0.153 Wh (counter); host - (no RAPL energy counters (a VM))"
        );
    }

    #[test]
    fn a_counter_that_goes_back_falls_back_to_power_and_rapl_is_differenced() {
        let mut t = Totals::default();
        t.add(
            0.0,
            [("amd:0".to_string(), Some(500.0), Some(50.0))],
            Some(5.0),
            Some(1.0),
            None,
        );
        t.add(
            2.0,
            [("amd:0".to_string(), Some(10.0), Some(150.0))],
            Some(2405.0),
            Some(3.5),
            None,
        );
        assert_eq!(
            t.line(),
            "energy over 2.0 s: amd:0 200.0 J = 0.056 Wh (power integral); host CPU 2.40 kJ = 0.667 Wh (RAPL), DRAM 2.5 J = 0.001 Wh"
        );
        let mut none = Totals::default();
        none.add(0.0, [("tpu:0".to_string(), None, None)], None, None, None);
        assert_eq!(
            none.line(),
            "energy over 0.0 s: tpu:0 - (no energy counter or power reading); host -"
        );
    }
}
