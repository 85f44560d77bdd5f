//! Intel GPUs (i915 and xe), read from sysfs, hwmon and DRM fdinfo (never through Level Zero
//! or a compute context).
//!
//! Per card `<sysfs>/class/drm/cardN` whose device is bound to `i915` or `xe`:
//! - name `Intel GPU 0x<device id>` (sysfs has no marketing name);
//! - device memory total: xe `device/tileT/physical_vram_size_bytes`, summed over tiles (in
//!   xe's `xe_tile_sysfs.c` in some kernels, not in `Documentation/ABI`); i915
//!   `cardN/lmem_total_bytes` (Intel's out-of-tree i915 only; mainline i915 publishes no VRAM
//!   size). Neither driver publishes VRAM *in use* in sysfs, so `memory_used_bytes` stays
//!   `None` (processes still show theirs);
//! - core clock: xe `device/tile0/gt0/freq0/act_freq` else `cur_freq` (MHz; kernel
//!   `Documentation/gpu/xe/xe_gt_freq.rst`: `act_freq` is what PCODE resolved, `cur_freq`
//!   what GuC requested); i915 `cardN/gt_act_freq_mhz` else `gt_cur_freq_mhz`, else the same
//!   under `cardN/gt/gt0/rps_{act,cur}_freq_mhz`;
//! - `device/hwmon/hwmonM/` (kernel `Documentation/ABI/testing/sysfs-driver-intel-{i915,xe}-hwmon`):
//!   `energy1_input` (microjoules, cumulative: power is its difference over the time between
//!   two samples, so the first sample has none), `power1_max` (sustained limit PL1, 0 =
//!   disabled), `temp1_input`/`temp2_input` (xe: package), `fan1_input`. For i915 the
//!   device-level hwmon (`name` = `i915`) is preferred over the per-GT ones (`i915_gtN`);
//! - utilization and processes from fdinfo (`fdinfo.rs`): i915's `drm-engine-<engine>` ns
//!   (render, copy, video, video-enhance, compute), xe's `drm-cycles-<engine>` over
//!   `drm-total-cycles-<engine>` (rcs, bcs, vcs, vecs, ccs). Neither driver has a device busy
//!   file in sysfs, so `utilization_percent` is the busiest engine summed over every *visible*
//!   client (an unprivileged reader sees only its own user's processes), `None` on the first
//!   sample or when no client of the device is visible. A process's memory is its device-local
//!   regions (`local*`, `vram*`), or on an integrated GPU (no local region) all its regions.
//!
//! A runtime-suspended device (`device/power/runtime_status` = `suspended`) keeps its clocks
//! and hwmon unread (reading them may wake it) and says so in `status`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::amd::SUSPENDED;
use super::fdinfo::{process_use, sum_regions, DeviceClients, Scanner};
use super::reading::{Reader, Reading, Roots, Vendor};
use super::sysfs::{drm_cards, hwmon_dir, read_hwmon, read_u64, runtime_suspended, DrmCard};

/// Reads Intel GPUs (i915, xe); keeps energy counters and DRM client counters between
/// samples.
#[derive(Debug, Default)]
pub struct IntelReader {
    fdinfo: Scanner,
    /// Per device (PCI address, else device directory): the last energy counter, microjoules,
    /// and when it was read.
    energy: HashMap<String, (u64, Instant)>,
}

impl IntelReader {
    /// A reader with nothing remembered yet.
    pub fn new() -> IntelReader {
        IntelReader::default()
    }

    /// The i915 and xe cards under `roots` at `now` (the time power and busy percent are
    /// measured against: the wall time between two calls). No such card is `Ok(vec![])`.
    pub fn read_at(&mut self, roots: &Roots, now: Instant) -> Result<Vec<Reading>, crate::Error> {
        let cards: Vec<DrmCard> = drm_cards(&roots.sysfs)
            .into_iter()
            .filter(|c| matches!(c.driver.as_deref(), Some("i915" | "xe")))
            .collect();
        if cards.is_empty() {
            self.energy.clear();
            return Ok(Vec::new());
        }
        let clients = self.fdinfo.scan(&roots.procfs, &["i915", "xe"], now);
        let mut energy = HashMap::new();
        let readings = cards
            .iter()
            .map(|card| {
                let key = card
                    .pci_address
                    .clone()
                    .unwrap_or_else(|| card.device_dir.to_string_lossy().into_owned());
                let mine = card.pci_address.as_ref().and_then(|a| clients.get(a));
                let prev = self.energy.get(&key).copied();
                let (r, now_energy) = read_card(card, mine, &roots.procfs, prev, now);
                if let Some(e) = now_energy.or(prev) {
                    energy.insert(key, e);
                }
                r
            })
            .collect();
        self.energy = energy;
        Ok(readings)
    }
}

impl Reader for IntelReader {
    fn vendor(&self) -> Vendor {
        Vendor::Intel
    }

    fn read(&mut self, roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        self.read_at(roots, Instant::now())
    }
}

/// The first file of `paths` that holds an integer.
fn first_u64(paths: &[PathBuf]) -> Option<u64> {
    paths.iter().find_map(|p| read_u64(p))
}

/// xe's `device/tileT/` directories, by tile number.
fn xe_tiles(dev: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dev) else {
        return Vec::new();
    };
    let mut tiles: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix("tile")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    tiles.sort();
    tiles.into_iter().map(|(_, p)| p).collect()
}

/// One card's reading, and its energy counter now (microjoules, when read).
fn read_card(
    card: &DrmCard,
    clients: Option<&DeviceClients>,
    procfs: &Path,
    prev_energy: Option<(u64, Instant)>,
    now: Instant,
) -> (Reading, Option<(u64, Instant)>) {
    let dev = &card.device_dir;
    let xe = card.driver.as_deref() == Some("xe");
    let name = match card.device {
        Some(id) => format!("Intel GPU 0x{id:04x}"),
        None => "Intel GPU".to_string(),
    };
    let mut r = Reading::new(Vendor::Intel, card.index, name);
    r.driver = card.driver.clone();
    r.pci_bus_id = card.pci_address.clone();

    r.memory_total_bytes = if xe {
        xe_tiles(dev)
            .iter()
            .filter_map(|t| read_u64(&t.join("physical_vram_size_bytes")))
            .reduce(u64::saturating_add)
    } else {
        read_u64(&card.card_dir.join("lmem_total_bytes"))
    };

    let mut energy_now = None;
    if runtime_suspended(dev) {
        r.status = Some(SUSPENDED.to_string());
    } else {
        r.clock_core_mhz = if xe {
            let f = dev.join("tile0/gt0/freq0");
            first_u64(&[f.join("act_freq"), f.join("cur_freq")])
        } else {
            let c = &card.card_dir;
            first_u64(&[
                c.join("gt_act_freq_mhz"),
                c.join("gt_cur_freq_mhz"),
                c.join("gt/gt0/rps_act_freq_mhz"),
                c.join("gt/gt0/rps_cur_freq_mhz"),
            ])
        }
        .and_then(|m| u32::try_from(m).ok());
        if let Some(dir) = hwmon_dir(dev, card.driver.as_deref()) {
            let h = read_hwmon(&dir);
            r.temperature_c = h.temp_millic.map(|m| m as f64 / 1000.0);
            r.power_limit_w = h.power_max_uw.filter(|u| *u > 0).map(|u| u as f64 / 1e6);
            r.fan_rpm = h.fan_rpm.and_then(|f| u32::try_from(f).ok());
            r.energy_joules = h.energy_uj.map(|u| u as f64 / 1e6);
            r.power_w = h.power_uw.map(|u| u as f64 / 1e6);
            if let Some(uj) = h.energy_uj {
                energy_now = Some((uj, now));
                if let Some((before, at)) = prev_energy {
                    let secs = now.saturating_duration_since(at).as_secs_f64();
                    if uj >= before && secs > 0.0 {
                        r.power_w = Some((uj - before) as f64 / 1e6 / secs);
                    }
                }
            }
        }
    }

    if let Some(clients) = clients {
        r.utilization_percent = clients.busy_percent;
        r.processes = clients
            .processes
            .iter()
            .map(|p| {
                let local =
                    |region: &str| region.starts_with("local") || region.starts_with("vram");
                let memory = if p.memory.keys().any(|k| local(k)) {
                    sum_regions(&p.memory, local)
                } else {
                    sum_regions(&p.memory, |_| true)
                };
                process_use(procfs, p, memory)
            })
            .collect();
    }
    (r, energy_now)
}
