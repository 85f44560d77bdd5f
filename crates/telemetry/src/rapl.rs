//! The host's CPU package and DRAM energy, from Linux's powercap RAPL zones (kernel
//! `Documentation/power/powercap/powercap.rst`): `SYSFS/class/powercap/intel-rapl:N` is a
//! package (`name`: `package-N`; AMD Zen's are named the same by the same driver) and
//! `intel-rapl:N:M` its subzones (`core`, `uncore`, `dram`); each has `energy_uj`, a counter in
//! microjoules that wraps at `max_energy_range_uj`. The MMIO copies (`intel-rapl-mmio:N`) count
//! the same energy again and are left out.
//!
//! [`Rapl`] keeps each zone's last value and adds up the differences (a wrap is one range), so
//! the totals are joules since the reader started, whatever the counters did. `energy_uj` is
//! readable by root only on most kernels since CVE-2020-8694 (Platypus): then the totals are
//! `None` and the note says why; a VM usually has no zones at all.

use std::collections::BTreeMap;
use std::path::Path;

/// A zone's last counter and its total since the reader started.
#[derive(Debug, Clone, Copy, Default)]
struct Zone {
    last_uj: u64,
    total_uj: u128,
}

/// Energy counters summed since the first reading.
#[derive(Debug, Default)]
pub struct Rapl {
    zones: BTreeMap<String, Zone>,
}

/// The host's energy since the reader started: every package, and every DRAM subzone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostEnergy {
    pub cpu_package_joules: Option<f64>,
    pub dram_joules: Option<f64>,
    /// Why they are not known, when they are not.
    pub note: Option<String>,
}

fn small(p: &Path) -> Option<String> {
    accelkit_core::files::read_text_limited(p, 4096)
        .ok()
        .map(|s| s.trim().to_string())
}

impl Rapl {
    /// Reads every zone under `sysfs` and returns the totals since the first reading.
    pub fn read(&mut self, sysfs: &Path) -> HostEnergy {
        let dir = sysfs.join("class/powercap");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return HostEnergy {
                note: Some(format!(
                    "no RAPL energy counters ({} does not exist: a VM, or not an x86 CPU)",
                    dir.display()
                )),
                ..HostEnergy::default()
            };
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("intel-rapl:"))
            .take(256)
            .collect();
        names.sort();
        let (mut pkg, mut dram, mut any_zone, mut denied) =
            (None::<u128>, None::<u128>, false, false);
        for n in names {
            let z = dir.join(&n);
            let Some(kind) = small(&z.join("name")) else {
                continue;
            };
            let top = n.matches(':').count() == 1;
            let is_pkg = top && kind.starts_with("package");
            let is_dram = kind == "dram";
            if !is_pkg && !is_dram {
                continue;
            }
            any_zone = true;
            let uj = match accelkit_core::files::read_text_limited(&z.join("energy_uj"), 64) {
                Ok(t) => t.trim().parse::<u64>().ok(),
                Err(accelkit_core::files::ReadError::Io(e))
                    if e.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    denied = true;
                    None
                }
                Err(_) => None,
            };
            let Some(uj) = uj else {
                continue;
            };
            let range = small(&z.join("max_energy_range_uj")).and_then(|t| t.parse::<u64>().ok());
            let zone = self.zones.entry(n.clone()).or_insert(Zone {
                last_uj: uj,
                total_uj: 0,
            });
            let delta = if uj >= zone.last_uj {
                uj - zone.last_uj
            } else {
                // Wrapped: the rest of the range, then from zero.
                range.map_or(0, |r| r.saturating_sub(zone.last_uj)) + uj
            };
            zone.last_uj = uj;
            zone.total_uj += u128::from(delta);
            let slot = if is_pkg { &mut pkg } else { &mut dram };
            *slot = Some(slot.unwrap_or(0) + zone.total_uj);
        }
        let j = |v: Option<u128>| v.map(|uj| uj as f64 / 1e6);
        let note = if pkg.is_some() {
            None
        } else if denied {
            Some(
                "the RAPL energy counters are readable by root only (since CVE-2020-8694): run as root, or grant read on energy_uj"
                    .to_string(),
            )
        } else if any_zone {
            Some("the RAPL zones have no readable energy counter".to_string())
        } else {
            Some(format!("no RAPL package zone under {}", dir.display()))
        };
        HostEnergy {
            cpu_package_joules: j(pkg),
            dram_joules: j(dram),
            note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(root: &Path, n: &str, name: &str, uj: u64, range: u64) {
        let d = root.join("class/powercap").join(n);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(d.join("energy_uj"), format!("{uj}\n")).unwrap();
        std::fs::write(d.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
    }

    #[test]
    fn totals_add_up_differences_across_wraps_and_packages() {
        let root = std::env::temp_dir().join(format!("accel-rapl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let range = 262_143_328_850;
        zone(&root, "intel-rapl:0", "package-0", 1_000_000, range);
        zone(&root, "intel-rapl:0:0", "core", 400_000, range);
        zone(&root, "intel-rapl:0:1", "dram", 50_000, range);
        zone(&root, "intel-rapl:1", "package-1", 7_000_000, range);
        zone(&root, "intel-rapl-mmio:0", "package-0", 1_000_000, range);
        let mut r = Rapl::default();
        let first = r.read(&root);
        assert_eq!(first.cpu_package_joules, Some(0.0));
        assert_eq!(first.dram_joules, Some(0.0));
        assert_eq!(first.note, None);
        // 30 J more on package 0, 12 J on package 1 across its wrap, 2.5 J of DRAM; the core
        // subzone and the MMIO copy count nothing.
        zone(&root, "intel-rapl:0", "package-0", 31_000_000, range);
        zone(
            &root,
            "intel-rapl:1",
            "package-1",
            5_000_000,
            7_000_000 + 7_000_000,
        );
        zone(&root, "intel-rapl:0:1", "dram", 2_550_000, range);
        zone(&root, "intel-rapl-mmio:0", "package-0", 99_000_000, range);
        let second = r.read(&root);
        assert_eq!(second.cpu_package_joules, Some(30.0 + 12.0));
        assert_eq!(second.dram_joules, Some(2.5));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn no_zones_say_why() {
        let e = Rapl::default().read(Path::new("/nonexistent-sysfs"));
        assert_eq!(e.cpu_package_joules, None);
        assert!(e.note.unwrap().contains("no RAPL energy counters"));
    }
}
