//! `accel mem`: host CPU and RAM (psutil's role) and what accel holds on each device.

use std::time::Duration;

use accel::memory::{human_bytes, MemoryStats};
use accel::system::HostMemory;
use serde::Serialize;

use crate::out;

#[derive(Serialize)]
pub struct Report {
    cpu_percent: f32,
    host_memory: HostMemory,
    process_rss_bytes: Option<u64>,
    devices: Vec<MemoryStats>,
    /// Load of each CUDA GPU through NVML (nvidia-smi's view), where NVML answers.
    gpus: Vec<accel::cuda::GpuLoad>,
}

pub fn report() -> anyhow::Result<Report> {
    // Devices first: probing them loads drivers and plugins, which the host figures then
    // include.
    let devices = accel::available_devices()
        .iter()
        .map(accel::memory::stats)
        .collect();
    let gpus = (0..accel::cuda::device_count())
        .filter_map(|i| accel::cuda::utilization(i).ok())
        .collect();
    Ok(Report {
        cpu_percent: accel::system::cpu_percent(Duration::from_millis(200))?,
        host_memory: accel::system::memory()?,
        process_rss_bytes: accel::system::process_rss_bytes(),
        devices,
        gpus,
    })
}

pub fn text(r: &Report) -> Vec<String> {
    let m = &r.host_memory;
    let mut lines = vec![
        format!(
            "host CPU use:   {:.1} % (sampled over 0.2 s)",
            r.cpu_percent
        ),
        format!(
            "host RAM:       {} used / {} total ({} available)",
            human_bytes(m.used_bytes),
            human_bytes(m.total_bytes),
            human_bytes(m.available_bytes)
        ),
    ];
    if let Some(rss) = r.process_rss_bytes {
        lines.push(format!("this process:   {} resident", human_bytes(rss)));
    }
    for d in &r.devices {
        lines.push(format!(
            "{:<15} allocated {}, peak {}, reserved {}",
            format!("{} (accel):", d.device),
            human_bytes(d.allocated_bytes),
            human_bytes(d.peak_allocated_bytes),
            human_bytes(d.reserved_bytes)
        ));
    }
    for (i, g) in r.gpus.iter().enumerate() {
        let opt = |v: Option<u32>, unit: &str| v.map_or("?".to_string(), |v| format!("{v}{unit}"));
        lines.push(format!(
            "cuda:{i} load:     {} GPU, {} memory bus; {} used / {} total; {}, {} / {} W",
            opt(g.utilization_gpu_percent, " %"),
            opt(g.utilization_memory_percent, " %"),
            g.memory_used_bytes.map_or("?".into(), human_bytes),
            g.memory_total_bytes.map_or("?".into(), human_bytes),
            opt(g.temperature_c, " C"),
            g.power_w.map_or("?".into(), |w| format!("{w:.0}")),
            g.power_limit_w.map_or("?".into(), |w| format!("{w:.0}")),
        ));
        for p in &g.processes {
            lines.push(format!(
                "                pid {} holds {}",
                p.pid,
                p.used_bytes.map_or("?".into(), human_bytes)
            ));
        }
    }
    lines
}

pub fn run(json: bool, watch: Option<f64>, count: Option<u64>) -> anyhow::Result<()> {
    let Some(every) = watch else {
        let r = report()?;
        if json {
            return out::json("mem", &r);
        }
        for l in text(&r) {
            out::line(l)?;
        }
        return Ok(());
    };
    // A report every `every` seconds, from the start of the last one (sampling the CPU takes
    // 0.2 s of it).
    let every = Duration::from_secs_f64(every);
    let t0 = std::time::Instant::now();
    let mut n = 0u64;
    loop {
        let start = std::time::Instant::now();
        let r = report()?;
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
        }
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(every.saturating_sub(start.elapsed()));
    }
}
