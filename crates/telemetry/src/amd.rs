//! AMD GPUs, read from amdgpu's sysfs and DRM fdinfo (never through ROCm or a compute
//! context), as rocm-smi's sysfs path and nvtop do.
//!
//! Per card `<sysfs>/class/drm/cardN` whose device is bound to `amdgpu` (kernel
//! `Documentation/gpu/amdgpu/driver-misc.rst` and `thermal.rst`), in `cardN/device/`:
//! - `product_name` (boards with a FRU EEPROM), else the name is `AMD GPU 0x<device id>`;
//! - `gpu_busy_percent` -> utilization, `mem_busy_percent` -> memory controller busy;
//! - `mem_info_vram_{used,total}` and `mem_info_gtt_{used,total}` (bytes);
//! - `pp_dpm_sclk` / `pp_dpm_mclk`: the current level is the line marked `*`;
//! - `hwmon/hwmonM/` (kernel `Documentation/hwmon/sysfs-interface.rst`): `temp1_input` (edge,
//!   millidegrees C), `power1_average` else `power1_input` (microwatts), `power1_cap`,
//!   `fan1_input` (RPM), `energy1_input` (microjoules) where present;
//! - `ras/<block>_err_count` (RAS-capable boards: Instinct, some Radeon Pro; `amdgpu_ras.c`,
//!   `amdgpu_ras_sysfs_read`): `ue: N` and `ce: N` lines (newer kernels add `de:`, deferred),
//!   summed over the blocks (umc is HBM; gfx, sdma, mmhub... on-chip memories) into the ECC
//!   counters;
//! - per process: `/proc/PID/fdinfo` with `drm-driver: amdgpu`, matched by `drm-pdev` (see
//!   `fdinfo.rs`); a process's memory is its `vram` region (an APU's: `vram` plus `gtt`).
//!
//! **APU.** An APU's graphics memory is a small VRAM carve-out plus GTT (system memory mapped
//! for the GPU), so for an APU `memory_*` is VRAM + GTT. sysfs has no "APU" file; amdgpu's
//! `amdgpu_pm.c` (`default_attr_update`) leaves out `mem_busy_percent` on APUs (all but GC
//! 9.4.3, MI300A) and `pcie_bw` on APUs ("PCIe Perf counters won't work on APU nodes"), while
//! every dGPU keeps at least one of the two (Vega10 lacks `mem_busy_percent` but has
//! `pcie_bw`; recent dGPUs without PCIe counters keep `mem_busy_percent`). So: a card is an
//! APU when its power-management files are there (`gpu_busy_percent` exists) and neither
//! `mem_busy_percent` nor `pcie_bw` does. Only whether the files exist is checked (no read).
//! Known misses: MI300A keeps `mem_busy_percent` and counts as VRAM-only (its HBM is VRAM,
//! so that is right), and an SR-IOV VF in one-VF mode, which also lacks both files, would be
//! taken for an APU.
//!
//! **Runtime suspend.** When `device/power/runtime_status` is `suspended`, the busy, clock and
//! hwmon files are not read (reading them may wake the GPU); the row says so in `status`.
//! Memory totals are bookkeeping in the driver and are still read.

use std::path::Path;
use std::time::Instant;

use super::fdinfo::{process_use, sum_regions, DeviceClients, Scanner};
use super::reading::{Reader, Reading, Roots, Vendor};
use super::sysfs::{
    dpm_current_mhz, drm_cards, hwmon_dir, read_hwmon, read_text, read_u64, runtime_suspended,
    DrmCard,
};

/// What a runtime-suspended card's row says.
pub(crate) const SUSPENDED: &str =
    "runtime-suspended: busy, clocks and sensors not read (reading them would wake the GPU)";

/// Reads AMD GPUs (amdgpu); keeps each DRM client's engine counters between samples.
#[derive(Debug, Default)]
pub struct AmdReader {
    fdinfo: Scanner,
}

impl AmdReader {
    /// A reader with nothing remembered yet.
    pub fn new() -> AmdReader {
        AmdReader::default()
    }

    /// The amdgpu cards under `roots` at `now` (the time the per-process busy percent is
    /// measured against: the wall time between two calls). No amdgpu card is `Ok(vec![])`.
    pub fn read_at(&mut self, roots: &Roots, now: Instant) -> Result<Vec<Reading>, crate::Error> {
        let cards: Vec<DrmCard> = drm_cards(&roots.sysfs)
            .into_iter()
            .filter(|c| c.driver.as_deref() == Some("amdgpu"))
            .collect();
        if cards.is_empty() {
            return Ok(Vec::new());
        }
        let clients = self.fdinfo.scan(&roots.procfs, &["amdgpu"], now);
        Ok(cards
            .iter()
            .map(|card| {
                let mine = card.pci_address.as_ref().and_then(|a| clients.get(a));
                read_card(card, mine, &roots.procfs)
            })
            .collect())
    }
}

impl Reader for AmdReader {
    fn vendor(&self) -> Vendor {
        Vendor::Amd
    }

    fn read(&mut self, roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        self.read_at(roots, Instant::now())
    }
}

/// Whether the card is an APU (see the module's documentation).
pub(crate) fn is_apu(device_dir: &Path) -> bool {
    device_dir.join("gpu_busy_percent").exists()
        && !device_dir.join("mem_busy_percent").exists()
        && !device_dir.join("pcie_bw").exists()
}

/// A percentage file: an integer from 0 to 100.
fn read_percent(path: &Path) -> Option<f64> {
    read_u64(path).filter(|p| *p <= 100).map(|p| p as f64)
}

/// The uncorrected and corrected error counts summed over a board's RAS blocks
/// (`ras/*_err_count`), or `None` each where it has none.
fn ras_counts(ras: &Path) -> (Option<u64>, Option<u64>) {
    let Ok(dir) = std::fs::read_dir(ras) else {
        return (None, None);
    };
    let (mut ue, mut ce) = (None::<u64>, None::<u64>);
    // At most a few dozen blocks exist; a directory with more is not amdgpu's.
    for e in dir.flatten().take(64) {
        let name = e.file_name();
        if !name.to_string_lossy().ends_with("_err_count") {
            continue;
        }
        let Some(text) = read_text(&e.path()) else {
            continue;
        };
        let (u, c) = parse_ras(&text);
        if let Some(u) = u {
            ue = Some(ue.unwrap_or(0).saturating_add(u));
        }
        if let Some(c) = c {
            ce = Some(ce.unwrap_or(0).saturating_add(c));
        }
    }
    (ue, ce)
}

/// `ue: N` and `ce: N` of one `<block>_err_count` file.
fn parse_ras(text: &str) -> (Option<u64>, Option<u64>) {
    let (mut ue, mut ce) = (None, None);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim().parse::<u64>().ok();
        match k.trim() {
            "ue" => ue = v,
            "ce" => ce = v,
            _ => {}
        }
    }
    (ue, ce)
}

fn read_card(card: &DrmCard, clients: Option<&DeviceClients>, procfs: &Path) -> Reading {
    let dev = &card.device_dir;
    let name = read_text(&dev.join("product_name")).unwrap_or_else(|| match card.device {
        Some(id) => format!("AMD GPU 0x{id:04x}"),
        None => "AMD GPU".to_string(),
    });
    let mut r = Reading::new(Vendor::Amd, card.index, name);
    r.driver = card.driver.clone();
    r.pci_bus_id = card.pci_address.clone();

    let apu = is_apu(dev);
    let vram_used = read_u64(&dev.join("mem_info_vram_used"));
    let vram_total = read_u64(&dev.join("mem_info_vram_total"));
    r.gtt_used_bytes = read_u64(&dev.join("mem_info_gtt_used"));
    r.gtt_total_bytes = read_u64(&dev.join("mem_info_gtt_total"));
    if apu {
        let both = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        r.memory_used_bytes = both(vram_used, r.gtt_used_bytes);
        r.memory_total_bytes = both(vram_total, r.gtt_total_bytes);
    } else {
        r.memory_used_bytes = vram_used;
        r.memory_total_bytes = vram_total;
    }

    // The driver's own counters, kept while the GPU sleeps: reading them does not wake it.
    (r.ecc_uncorrected_errors, r.ecc_corrected_errors) = ras_counts(&dev.join("ras"));

    if runtime_suspended(dev) {
        r.status = Some(SUSPENDED.to_string());
    } else {
        r.utilization_percent = read_percent(&dev.join("gpu_busy_percent"));
        r.memory_busy_percent = read_percent(&dev.join("mem_busy_percent"));
        r.clock_core_mhz = read_text(&dev.join("pp_dpm_sclk")).and_then(|t| dpm_current_mhz(&t));
        r.clock_memory_mhz = read_text(&dev.join("pp_dpm_mclk")).and_then(|t| dpm_current_mhz(&t));
        if let Some(dir) = hwmon_dir(dev, Some("amdgpu")) {
            let h = read_hwmon(&dir);
            r.temperature_c = h.temp_millic.map(|m| m as f64 / 1000.0);
            r.power_w = h.power_uw.map(|u| u as f64 / 1e6);
            r.power_limit_w = h.power_cap_uw.filter(|u| *u > 0).map(|u| u as f64 / 1e6);
            r.fan_rpm = h.fan_rpm.and_then(|f| u32::try_from(f).ok());
            r.energy_joules = h.energy_uj.map(|u| u as f64 / 1e6);
        }
    }

    if let Some(clients) = clients {
        r.processes = clients
            .processes
            .iter()
            .map(|p| {
                let memory = sum_regions(&p.memory, |region| {
                    region == "vram" || (apu && region == "gtt")
                });
                process_use(procfs, p, memory)
            })
            .collect();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::parse_ras;

    #[test]
    fn ras_counts_parse_as_the_driver_prints_them() {
        assert_eq!(parse_ras("ue: 0\nce: 12\n"), (Some(0), Some(12)));
        assert_eq!(parse_ras("ue: 3\nce: 4\nde: 1\n"), (Some(3), Some(4)));
        assert_eq!(parse_ras("feature mask: 0x3b3f\n"), (None, None));
        assert_eq!(parse_ras("ue: -1\nce: x\n"), (None, None));
        assert_eq!(parse_ras(""), (None, None));
    }
}
