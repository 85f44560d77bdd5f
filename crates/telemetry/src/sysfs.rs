//! Small, bounded reads of sysfs files, and the DRM cards and PCI devices they describe.
//!
//! Every read is capped (a sysfs attribute is at most a page; a hung or odd file must not make
//! us read without end) and every parse answers `None` on text it does not understand, so one
//! garbled file costs one field, never the reading.
//!
//! Layout (kernel `Documentation/ABI/testing/sysfs-class-drm`, `sysfs-bus-pci`):
//! `/sys/class/drm/cardN` links to `/sys/devices/.../<pci address>/drm/cardN`, whose `device`
//! links back to the PCI device directory; beside the cards sit their connectors
//! (`card0-DP-1`) and render nodes (`renderD128`), which are not cards.
//! `/sys/bus/pci/devices/<address>` links to the same device directories.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The most this module reads of one file (sysfs attributes are one page; fdinfo is small).
pub(crate) const MAX_READ_BYTES: u64 = 64 * 1024;

/// A file's text, trimmed; `None` when it cannot be read, is empty, is larger than
/// [`MAX_READ_BYTES`] or is not a regular file (a FIFO there is refused without waiting on it:
/// `accelkit_core::files::read_limited`). Bytes that are not UTF-8 are replaced, not fatal.
pub(crate) fn read_text(path: &Path) -> Option<String> {
    use accelkit_core::files::ReadError;
    let text = match accelkit_core::files::read_text_limited(path, MAX_READ_BYTES) {
        Ok(t) => t,
        // A missing or unreadable attribute is normal (one field less); a FIFO, a device or a
        // huge file where the kernel puts a small regular file is not: the reader's collector
        // says so (`take_refusals`).
        Err(e @ (ReadError::NotRegular(_) | ReadError::TooLarge(_))) => {
            REFUSED.with(|r| {
                let mut r = r.borrow_mut();
                if r.len() < 8 {
                    r.push(format!("{}: {e}", path.display()));
                }
            });
            return None;
        }
        Err(_) => return None,
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

thread_local! {
    /// Files [`read_text`] refused on this thread since the last [`take_refusals`] (at most 8).
    static REFUSED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The files refused on this thread (a reader's worker asks after each read).
pub(crate) fn take_refusals() -> Vec<String> {
    REFUSED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// An unsigned integer as sysfs writes them: decimal, or hexadecimal with `0x`.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// A signed integer (hwmon temperatures may be below zero).
pub(crate) fn parse_i64(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// [`read_text`] then [`parse_u64`].
pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    parse_u64(&read_text(path)?)
}

/// [`read_text`] then [`parse_i64`].
pub(crate) fn read_i64(path: &Path) -> Option<i64> {
    parse_i64(&read_text(path)?)
}

/// A 16-bit id written as `0x1002` (PCI `vendor`, `device`).
pub(crate) fn read_hex_u16(path: &Path) -> Option<u16> {
    let t = read_text(path)?;
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u16::from_str_radix(hex, 16).ok()
}

/// The last component of where a symlink points (`driver` -> `.../drivers/amdgpu` gives
/// `amdgpu`).
pub(crate) fn link_name(path: &Path) -> Option<String> {
    let target = fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The value of `KEY=value` in a uevent file.
pub(crate) fn uevent_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key && !v.trim().is_empty()).then(|| v.trim().to_string())
    })
}

/// Whether `s` is a PCI address with its domain, `dddd:bb:dd.f` (hex digits).
pub(crate) fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The N of a name that is exactly `card` followed by digits (`card1-DP-1` is a connector,
/// `renderD128` a render node: neither is a card).
pub(crate) fn card_number(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("card")?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One PCI device under `/sys/bus/pci/devices`.
#[allow(dead_code)] // For the readers that find devices by PCI id (tpu.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PciDevice {
    /// `0000:03:00.0`, lower case.
    pub address: String,
    /// The `vendor` file (`0x1002`).
    pub vendor: u16,
    /// The `device` file.
    pub device: u16,
    /// The `class` file (`0x030000`: a VGA controller; `0x030200`: a 3D controller; `0x12`
    /// in the top byte: a processing accelerator).
    pub class: Option<u32>,
    /// The bound driver's name (the `driver` link, else `DRIVER=` in `uevent`).
    pub driver: Option<String>,
    /// The device's directory (as listed, not canonicalized).
    pub dir: PathBuf,
}

/// The driver bound to a device directory: its `driver` link's name, else `DRIVER=` in its
/// `uevent`.
#[allow(dead_code)] // For the readers that find devices by PCI id (tpu.rs).
pub(crate) fn device_driver(dir: &Path) -> Option<String> {
    link_name(&dir.join("driver"))
        .or_else(|| uevent_value(&read_text(&dir.join("uevent"))?, "DRIVER"))
}

/// Every PCI device under `<sysfs>/bus/pci/devices/*`, in address order; ones whose `vendor`
/// or `device` cannot be read are left out. No such directory gives an empty list.
pub fn pci_devices(sysfs: &Path) -> Vec<PciDevice> {
    let Ok(entries) = fs::read_dir(sysfs.join("bus/pci/devices")) else {
        return Vec::new();
    };
    let mut out: Vec<PciDevice> = entries
        .flatten()
        .filter_map(|e| {
            let address = e.file_name().to_string_lossy().to_ascii_lowercase();
            let dir = e.path();
            Some(PciDevice {
                vendor: read_hex_u16(&dir.join("vendor"))?,
                device: read_hex_u16(&dir.join("device"))?,
                class: read_u64(&dir.join("class")).and_then(|c| u32::try_from(c).ok()),
                driver: device_driver(&dir),
                address,
                dir,
            })
        })
        .collect();
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

/// One DRM card (`cardN`) and the device behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrmCard {
    /// N of `cardN`.
    pub index: u32,
    /// `<sysfs>/class/drm/cardN`.
    pub card_dir: PathBuf,
    /// The device directory its `device` link resolves to (canonical).
    pub device_dir: PathBuf,
    /// The PCI address (`0000:03:00.0`), when the device is on PCI.
    pub pci_address: Option<String>,
    /// The device's `vendor` file.
    pub vendor: Option<u16>,
    /// The device's `device` file.
    pub device: Option<u16>,
    /// The bound driver (`amdgpu`, `i915`, `xe`...).
    pub driver: Option<String>,
}

/// The DRM cards under `<sysfs>/class/drm`, by card number, one per device: when two cards
/// resolve to the same PCI address (or device directory), the lower number is kept. Names
/// that are not exactly `card<digits>` (connectors, render nodes, `version`) are skipped, as
/// are cards without a `device` link. No such directory gives an empty list.
pub(crate) fn drm_cards(sysfs: &Path) -> Vec<DrmCard> {
    let Ok(entries) = fs::read_dir(sysfs.join("class/drm")) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((card_number(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    found.sort();
    let mut seen = BTreeSet::new();
    let mut cards = Vec::new();
    for (index, card_dir) in found {
        let Ok(device_dir) = fs::canonicalize(card_dir.join("device")) else {
            continue;
        };
        let uevent = read_text(&device_dir.join("uevent"));
        let pci_address = device_dir
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .filter(|n| is_pci_address(n))
            .or_else(|| {
                uevent_value(uevent.as_deref()?, "PCI_SLOT_NAME")
                    .map(|s| s.to_ascii_lowercase())
                    .filter(|s| is_pci_address(s))
            });
        let key = pci_address
            .clone()
            .unwrap_or_else(|| device_dir.to_string_lossy().into_owned());
        if !seen.insert(key) {
            continue;
        }
        let driver = link_name(&device_dir.join("driver"))
            .or_else(|| uevent_value(uevent.as_deref()?, "DRIVER"));
        cards.push(DrmCard {
            index,
            vendor: read_hex_u16(&device_dir.join("vendor")),
            device: read_hex_u16(&device_dir.join("device")),
            card_dir,
            device_dir,
            pci_address,
            driver,
        });
    }
    cards
}

/// Whether the device is runtime-suspended (`power/runtime_status` is `suspended`): reading
/// its busy, clock or sensor files would wake it, so they are left alone.
pub(crate) fn runtime_suspended(device_dir: &Path) -> bool {
    read_text(&device_dir.join("power/runtime_status")).as_deref() == Some("suspended")
}

/// What a device's hwmon directory reports (kernel `Documentation/hwmon/sysfs-interface.rst`),
/// in the files' own units.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hwmon {
    /// The first of `temp1_input`, `temp2_input`, `temp3_input` that reads, millidegrees
    /// Celsius (amdgpu: temp1 is `edge`; xe: temp2 is the package).
    pub temp_millic: Option<i64>,
    /// `power1_average`, else `power1_input`, microwatts.
    pub power_uw: Option<u64>,
    /// `power1_cap`, microwatts (amdgpu's limit; xe's burst limit PL2).
    pub power_cap_uw: Option<u64>,
    /// `power1_max`, microwatts (Intel's sustained limit PL1; 0 means disabled).
    pub power_max_uw: Option<u64>,
    /// `fan1_input`, RPM.
    pub fan_rpm: Option<u64>,
    /// `energy1_input`, microjoules, cumulative.
    pub energy_uj: Option<u64>,
}

/// The device's hwmon directory (`<device>/hwmon/hwmonM`): the one whose `name` is `prefer`
/// (i915 registers a device-level `i915` and per-GT `i915_gtN`), else the first by number.
pub(crate) fn hwmon_dir(device_dir: &Path, prefer: Option<&str>) -> Option<PathBuf> {
    let entries = fs::read_dir(device_dir.join("hwmon")).ok()?;
    let mut dirs: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n: u32 = name.strip_prefix("hwmon")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    dirs.sort();
    if let Some(want) = prefer {
        if let Some((_, d)) = dirs
            .iter()
            .find(|(_, d)| read_text(&d.join("name")).as_deref() == Some(want))
        {
            return Some(d.clone());
        }
    }
    dirs.into_iter().next().map(|(_, d)| d)
}

/// Reads a hwmon directory's sensors (see [`Hwmon`]).
pub(crate) fn read_hwmon(dir: &Path) -> Hwmon {
    let u = |f: &str| read_u64(&dir.join(f));
    Hwmon {
        temp_millic: ["temp1_input", "temp2_input", "temp3_input"]
            .iter()
            .find_map(|f| read_i64(&dir.join(f))),
        power_uw: u("power1_average").or_else(|| u("power1_input")),
        power_cap_uw: u("power1_cap"),
        power_max_uw: u("power1_max"),
        fan_rpm: u("fan1_input"),
        energy_uj: u("energy1_input"),
    }
}

/// The current level of an amdgpu `pp_dpm_*` table: the line marked `*`, as in
/// `1: 1800Mhz *`, in MHz (kernel `Documentation/gpu/amdgpu/thermal.rst`, pp_dpm_sclk).
pub(crate) fn dpm_current_mhz(text: &str) -> Option<u32> {
    let line = text.lines().find(|l| l.trim_end().ends_with('*'))?;
    let (_, rest) = line.split_once(':')?;
    let value = rest.trim().trim_end_matches('*').trim();
    let lower = value.to_ascii_lowercase();
    let number = lower.strip_suffix("mhz")?.trim();
    number.parse::<u32>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/telemetry")
            .join(name)
    }

    #[test]
    fn numbers_and_names() {
        assert_eq!(parse_u64(" 42\n"), Some(42));
        assert_eq!(parse_u64("0x10"), Some(16));
        assert_eq!(parse_u64("N/A"), None);
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_i64("-5000"), Some(-5000));
        assert_eq!(card_number("card0"), Some(0));
        assert_eq!(card_number("card12"), Some(12));
        assert_eq!(card_number("card0-DP-1"), None);
        assert_eq!(card_number("renderD128"), None);
        assert_eq!(card_number("card"), None);
        assert_eq!(card_number("version"), None);
        assert!(is_pci_address("0000:03:00.0"));
        assert!(is_pci_address("0000:c4:00.0"));
        assert!(!is_pci_address("simple-framebuffer.0"));
        assert!(!is_pci_address("0000:03:00"));
        assert_eq!(
            uevent_value(
                "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n",
                "PCI_SLOT_NAME"
            ),
            Some("0000:03:00.0".to_string())
        );
    }

    #[test]
    fn dpm_tables() {
        assert_eq!(
            dpm_current_mhz("0: 500Mhz\n1: 1800Mhz *\n2: 2500Mhz\n"),
            Some(1800)
        );
        assert_eq!(dpm_current_mhz("0: 96Mhz *\n1: 1000Mhz\n"), Some(96));
        assert_eq!(dpm_current_mhz("0: 500Mhz\n1: 1800Mhz\n"), None);
        assert_eq!(dpm_current_mhz("garbage *"), None);
        assert_eq!(dpm_current_mhz(""), None);
    }

    #[test]
    fn pci_devices_of_a_fixture() {
        let devs = pci_devices(&fixture("amd-discrete/sys"));
        let addrs: Vec<&str> = devs.iter().map(|d| d.address.as_str()).collect();
        assert_eq!(addrs, ["0000:00:01.0", "0000:03:00.0"]);
        let gpu = &devs[1];
        assert_eq!((gpu.vendor, gpu.device), (0x1002, 0x744c));
        assert_eq!(gpu.driver.as_deref(), Some("amdgpu"));
        assert_eq!(devs[0].driver.as_deref(), Some("pcieport"));
        assert!(pci_devices(&fixture("does-not-exist")).is_empty());
        // The class file, where the fixture has one: an Intel Arc (xe) is a VGA controller.
        let xe = pci_devices(&fixture("intel-xe/sys-t0"));
        let arc = xe
            .iter()
            .find(|d| d.address == "0000:03:00.0")
            .expect("the xe card");
        assert_eq!(arc.class.map(|c| c >> 16), Some(0x03), "{arc:?}");
    }

    #[test]
    fn cards_skip_connectors_render_nodes_and_duplicates() {
        let cards = drm_cards(&fixture("amd-discrete/sys"));
        assert_eq!(cards.len(), 1);
        assert_eq!(cards[0].index, 0);
        assert_eq!(cards[0].pci_address.as_deref(), Some("0000:03:00.0"));
        assert_eq!(cards[0].driver.as_deref(), Some("amdgpu"));
        // amd-edge: card0 and card2 are the same PCI device; card0 is kept.
        let cards = drm_cards(&fixture("amd-edge/sys"));
        let idx: Vec<u32> = cards.iter().map(|c| c.index).collect();
        assert_eq!(idx, [0, 1]);
        // amd-apu: card0 is simpledrm on a platform device (no PCI address, no vendor).
        let cards = drm_cards(&fixture("amd-apu/sys"));
        assert_eq!(cards.len(), 2);
        assert_eq!(cards[0].pci_address, None);
        assert_eq!(cards[0].vendor, None);
        assert_eq!(cards[1].pci_address.as_deref(), Some("0000:c4:00.0"));
        assert!(drm_cards(&fixture("none/sys")).is_empty());
    }

    #[test]
    fn hwmon_of_a_fixture() {
        let dev = fs::canonicalize(fixture("amd-discrete/sys/class/drm/card0/device"))
            .expect("fixture device dir");
        let dir = hwmon_dir(&dev, Some("amdgpu")).expect("hwmon dir");
        let h = read_hwmon(&dir);
        assert_eq!(h.temp_millic, Some(65_000));
        assert_eq!(h.power_uw, Some(245_000_000));
        assert_eq!(h.power_cap_uw, Some(355_000_000));
        assert_eq!(h.fan_rpm, Some(1450));
        assert_eq!(h.energy_uj, None);
        assert!(!runtime_suspended(&dev));
    }
}
