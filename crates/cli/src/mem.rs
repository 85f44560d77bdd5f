//! `accel mem`: host CPU and RAM (psutil's role), every accelerator's memory and load as its
//! monitoring interface reports it (nvidia-smi's and amdgpu's numbers), and what this
//! process's allocators hold. Telemetry only: no device is probed, no compute library loaded.

use std::time::{Duration, Instant};

use accelkit::load::{Sampler, Snapshot};
use accelkit::memory::human_bytes;
use accelkit_telemetry::Roots;
use serde::Serialize;

use crate::out;

#[derive(Serialize)]
pub struct MemReport {
    /// Seconds the CPU use was measured over.
    measured_over_s: f64,
    #[serde(flatten)]
    snapshot: Snapshot,
}

/// A report from `sampler`, its CPU use over the time since the sampler's previous sample.
pub fn report(sampler: &mut Sampler) -> MemReport {
    let snapshot = sampler.sample();
    MemReport {
        measured_over_s: snapshot.host.cpu_interval_s,
        snapshot,
    }
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or("?".into(), |v| format!("{v:.0} %"))
}

pub fn text(r: &MemReport) -> Vec<String> {
    let s = &r.snapshot;
    let m = &s.host.memory;
    if let Some(e) = host_failure(s) {
        let mut lines = vec![format!("host:           not read: {}", out::printable(e))];
        lines.extend(devices_text(s));
        return lines;
    }
    let mut lines = vec![
        format!(
            "host CPU use:   {:.1} % (measured over {:.1} s, {} cores)",
            s.host.cpu_percent,
            r.measured_over_s,
            s.host.cpu_per_core_percent.len()
        ),
        format!(
            "host RAM:       {} used / {} total ({} available)",
            human_bytes(m.used_bytes),
            human_bytes(m.total_bytes),
            human_bytes(m.available_bytes)
        ),
    ];
    if let Some(rss) = s.host.process_rss_bytes {
        lines.push(format!("this process:   {} resident", human_bytes(rss)));
    }
    lines.extend(devices_text(s));
    lines
}

/// Why the host reader failed in this snapshot (its numbers are then the last good ones, or
/// zeros: not shown).
pub fn host_failure(s: &Snapshot) -> Option<&str> {
    s.collectors
        .iter()
        .find(|c| c.collector == "host" && !c.success)
        .map(|c| c.error.as_deref().unwrap_or("failed"))
}

/// The accelerators' lines: this process's allocators, then every device.
fn devices_text(s: &Snapshot) -> Vec<String> {
    let mut lines = Vec::new();
    for d in &s.accel_memory {
        lines.push(format!(
            "{:<15} allocated {}, peak {}, reserved {}",
            format!("{} (accel):", d.device),
            human_bytes(d.allocated_bytes),
            human_bytes(d.peak_allocated_bytes),
            human_bytes(d.reserved_bytes)
        ));
    }
    for d in &s.devices {
        let mine = d
            .accel_device
            .map_or(String::new(), |a| format!(" = {a} here"));
        // Names, states and commands come from the machine (sysfs, the driver, processes).
        let name = out::printable(&d.name);
        if !d.up {
            lines.push(format!(
                "{} {name}{mine}: down ({})",
                d.id(),
                out::printable(d.status.as_deref().unwrap_or_default())
            ));
            continue;
        }
        lines.push(
            format!(
                "{} {name}{mine}: {} busy, {} memory bus; {} used / {} total; {}, {} / {} W{}",
                d.id(),
                opt_pct(d.utilization_percent),
                opt_pct(d.memory_busy_percent),
                d.memory_used_bytes.map_or("?".into(), human_bytes),
                d.memory_total_bytes.map_or("?".into(), human_bytes),
                d.temperature_c
                    .map_or("? C".into(), |t| format!("{t:.0} C")),
                d.power_w.map_or("?".into(), |w| format!("{w:.0}")),
                d.power_limit_w.map_or("?".into(), |w| format!("{w:.0}")),
                d.status
                    .as_ref()
                    .map_or(String::new(), |s| format!(" [{}]", out::printable(s))),
            ) + &invalid_note(d)
                + &out::health_note(d),
        );
        if let Some(o) = out::owners_line(d) {
            lines.push(format!("                {o}"));
        }
        for p in &d.processes {
            lines.push(format!(
                "                pid {}{}{}{} holds {}{}",
                p.pid,
                p.command
                    .as_ref()
                    .map_or(String::new(), |c| format!(" {}", out::printable(c))),
                p.user
                    .as_ref()
                    .map_or(String::new(), |u| format!(" ({})", out::printable(u))),
                out::workload_note(p),
                p.memory_bytes.map_or("?".into(), human_bytes),
                p.busy_percent
                    .map_or(String::new(), |b| format!(", {b:.0} % busy"))
            ));
        }
    }
    if s.devices.is_empty() {
        lines.push(format!("accelerators:   none found ({})", why_none(s)));
    }
    lines
}

/// ` [invalid: temperature_c -9.2e15, ...]` for values no device can have (left out above).
pub fn invalid_note(d: &accelkit_telemetry::Reading) -> String {
    if d.invalid.is_empty() {
        return String::new();
    }
    let v: Vec<String> = d
        .invalid
        .iter()
        .map(|i| format!("{} {}", i.field, out::printable(&i.raw)))
        .collect();
    format!(" [invalid: {}]", v.join(", "))
}

/// What each vendor's reader says when no device was found.
pub fn why_none(s: &Snapshot) -> String {
    s.collectors
        .iter()
        // The host reader finds no devices (its failure has a line of its own).
        .filter(|c| c.collector != "host")
        .map(|c| match (&c.error, &c.note) {
            (Some(e), _) => format!("{}: failed: {e}", c.collector),
            (None, Some(n)) => format!("{}: {n}", c.collector),
            (None, None) => format!("{}: none", c.collector),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn run(
    json: bool,
    watch: Option<f64>,
    count: Option<u64>,
    energy: bool,
    interval: f64,
    roots: Roots,
) -> anyhow::Result<()> {
    let mut sampler = Sampler::with_roots(roots);
    // The first report's CPU use is over --interval, as psutil.cpu_percent(interval=...).
    std::thread::sleep(Duration::from_secs_f64(interval));
    let Some(every) = watch else {
        let r = report(&mut sampler);
        if json {
            return out::json("mem", &r);
        }
        for l in text(&r) {
            out::line(l)?;
        }
        return Ok(());
    };
    // A report every `every` seconds; each one's CPU use is over the time since the last.
    let every = Duration::from_secs_f64(every);
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut totals = crate::energy::Totals::default();
    loop {
        let start = Instant::now();
        let r = report(&mut sampler);
        totals.add_snapshot(&r.snapshot);
        if json {
            out::json_line("mem", &r)?;
        } else {
            out::line(format!(
                "--- t = {:.1} s",
                start.duration_since(t0).as_secs_f64()
            ))?;
            for l in text(&r) {
                out::line(l)?;
            }
            if energy {
                out::line(totals.line())?;
            }
        }
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(every.saturating_sub(start.elapsed()));
    }
}
