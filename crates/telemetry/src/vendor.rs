//! Who made a device: the collector's name and the rows' prefix.

use serde::Serialize;

/// Who made the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// NVIDIA GPUs (NVML).
    Nvidia,
    /// AMD GPUs (amdgpu's sysfs and fdinfo).
    Amd,
    /// Intel GPUs (i915 and xe: sysfs, hwmon, fdinfo).
    Intel,
    /// Apple GPUs (IOKit's PerformanceStatistics).
    Apple,
    /// Google TPUs (PCI, the runtime's metrics service).
    Tpu,
}

impl Vendor {
    /// Every vendor, in the order rows are listed.
    pub const ALL: [Vendor; 5] = [
        Vendor::Nvidia,
        Vendor::Amd,
        Vendor::Intel,
        Vendor::Apple,
        Vendor::Tpu,
    ];

    /// `nvidia`, `amd`, `intel`, `apple`, `tpu`: the collector's name and the rows' prefix.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
            Vendor::Apple => "apple",
            Vendor::Tpu => "tpu",
        }
    }
}

impl std::fmt::Display for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
