//! `accel devices`: every backend, its devices, or the reason it has none.

use accelkit::{memory::human_bytes, Availability, Device};
use serde::Serialize;

use crate::out;

#[derive(Serialize)]
struct DevicesReport {
    best_device: Device,
    backends: Vec<accelkit::Probe>,
    /// The CUDA stack as found: driver, NVML, NVRTC, cuBLAS(Lt), cuDNN.
    cuda_libraries: &'static [accelkit::cuda::Library],
    /// The CUDA major whose libraries this process loaded, and why (None without CUDA).
    cuda_major: Option<&'static accelkit::cuda::MajorChoice>,
    /// Every PJRT plugin found: path, platform, versions, or why it failed.
    xla_plugins: Vec<accelkit::xla::Plugin>,
}

pub fn run(json: bool, html: bool) -> anyhow::Result<()> {
    let report = DevicesReport {
        best_device: Device::best(),
        backends: accelkit::devices(),
        cuda_libraries: accelkit::cuda::libraries(),
        cuda_major: accelkit::cuda::cuda_major(),
        xla_plugins: accelkit::xla::plugins(),
    };
    if json {
        return out::json("devices", &report);
    }
    if html {
        return out::html("devices", &report);
    }
    for l in text(&report.backends) {
        out::line(l)?;
    }
    if !report.cuda_libraries.is_empty() {
        match report.cuda_major {
            Some(m) => out::line(format!("\nCUDA libraries (CUDA {}: {}):", m.major, m.why))?,
            None => out::line("\nCUDA libraries:")?,
        }
        for l in libraries_text(report.cuda_libraries) {
            out::line(l)?;
        }
    }
    out::line("\nXLA (PJRT) plugins:")?;
    if report.xla_plugins.is_empty() {
        out::line(format!(
            "  none found (pip install lammps-jax-pjrt-cpu or libtpu; for NVIDIA GPUs {}; or set ACCEL_PJRT_PLUGIN)",
            accelkit::cuda::jax_cuda_extra(accelkit::cuda::driver_cuda_version())
        ))?;
    }
    for p in &report.xla_plugins {
        match &p.problem {
            None => out::line(format!(
                "  {:<9} {} device(s), PJRT {}  {} ({})",
                p.platform.as_deref().unwrap_or("?"),
                p.devices,
                p.pjrt_api_version.as_deref().unwrap_or("?"),
                p.path.display(),
                p.source
            ))?,
            Some(why) => out::line(format!("  failed    {}: {why}", p.path.display()))?,
        }
        if !p.preloaded.is_empty() {
            out::line(format!(
                "            loaded first: {} CUDA libraries of its Python environment",
                p.preloaded.len()
            ))?;
        }
        for note in &p.notes {
            out::line(format!("            note: {note}"))?;
        }
    }
    out::line(format!(
        "\nbest device: {} (order: cuda, mps, xla, wgpu, cpu)",
        report.best_device
    ))
}

/// The human-readable listing, shared with the walkthrough.
pub fn text(probes: &[accelkit::Probe]) -> Vec<String> {
    let mut lines = Vec::new();
    for p in probes {
        match &p.availability {
            Availability::Available { devices } => {
                for (i, d) in devices.iter().enumerate() {
                    let mem = d
                        .memory_total_bytes
                        .map(|b| format!(", {} memory", human_bytes(b)))
                        .unwrap_or_default();
                    // Devices that differ from an earlier one in at most two details (XLA's
                    // CPU plugin offers several devices of one CPU) get one line.
                    if let Some((twin, diff)) = devices[..i].iter().find_map(|e| {
                        let diff = differing(d, e)?;
                        (diff.len() <= 2).then_some((e, diff))
                    }) {
                        let how = if diff.is_empty() {
                            format!("identical to {}", twin.device)
                        } else {
                            format!("as {} but {}", twin.device, diff.join("  "))
                        };
                        lines.push(format!(
                            "{:<7} {}{mem}, {how}",
                            d.device.to_string(),
                            d.name
                        ));
                        continue;
                    }
                    lines.push(format!("{:<7} {}{mem}", d.device.to_string(), d.name));
                    let details: Vec<String> =
                        d.details.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    if !details.is_empty() {
                        lines.push(format!("        {}", details.join("  ")));
                    }
                }
            }
            Availability::Unavailable { reason, hint } => {
                lines.push(format!("{:<7} unavailable: {reason}", p.backend));
                if !hint.is_empty() {
                    lines.push(format!("        hint: {hint}"));
                }
            }
        }
    }
    lines
}

/// The details of `d` whose values differ from `e`'s, as `key=value`; None when the two are
/// not the same kind of device (another name, memory, or set of details).
fn differing(d: &accelkit::DeviceInfo, e: &accelkit::DeviceInfo) -> Option<Vec<String>> {
    fn keys(x: &accelkit::DeviceInfo) -> Vec<&str> {
        let mut k: Vec<&str> = x.details.iter().map(|(k, _)| k.as_str()).collect();
        k.sort_unstable();
        k
    }
    if e.name != d.name || e.memory_total_bytes != d.memory_total_bytes || keys(e) != keys(d) {
        return None;
    }
    Some(
        d.details
            .iter()
            .filter(|(k, v)| !e.details.iter().any(|(k2, v2)| k2 == k && v2 == v))
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    )
}

/// One line per CUDA library: version and path, or why it is missing.
pub fn libraries_text(libs: &[accelkit::cuda::Library]) -> Vec<String> {
    libs.iter()
        .map(|l| match (&l.path, &l.problem) {
            (Some(p), None) => format!(
                "  {:<9} {:<9} {} ({}{})",
                l.name,
                l.version.as_deref().unwrap_or("?"),
                p.display(),
                l.source.as_deref().unwrap_or(""),
                if l.loaded {
                    ""
                } else {
                    "; found, not loaded: no driver"
                }
            ),
            _ => format!(
                "  {:<9} missing   {}",
                l.name,
                l.problem.as_deref().unwrap_or("not found")
            ),
        })
        .collect()
}
