//! The exporter's series as tables: one descriptor (name, help, the value read from a
//! reading) per gauge, so that `render` is loops over tables, as node_exporter gives each
//! collector its descriptors. The labels are per table (dcgm-exporter's for the DCGM names,
//! accel's for the rest), written by `render`.

use accelkit_telemetry::Reading;

/// One gauge of a device: absent from the scrape when the device does not report it.
pub(super) struct Series {
    pub name: &'static str,
    pub help: &'static str,
    pub value: fn(&Reading) -> Option<f64>,
}

/// A mebibyte: dcgm-exporter reports memory in MiB (and energy in mJ).
const MIB: f64 = 1024.0 * 1024.0;

/// dcgm-exporter's series, for whole NVIDIA GPUs that are up (so Grafana 12239 works).
pub(super) const DCGM: &[Series] = &[
    Series {
        name: "DCGM_FI_DEV_GPU_UTIL",
        help: "GPU utilization (in %)",
        value: |r| r.utilization_percent,
    },
    Series {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        help: "Memory utilization (in %)",
        value: |r| r.memory_busy_percent,
    },
    Series {
        name: "DCGM_FI_DEV_FB_USED",
        help: "Framebuffer memory used (in MiB)",
        value: |r| r.memory_used_bytes.map(|b| b as f64 / MIB),
    },
    Series {
        name: "DCGM_FI_DEV_FB_FREE",
        help: "Framebuffer memory free (in MiB)",
        value: |r| r.memory_free_bytes().map(|b| b as f64 / MIB),
    },
    Series {
        name: "DCGM_FI_DEV_GPU_TEMP",
        help: "GPU temperature (in C)",
        value: |r| r.temperature_c,
    },
    Series {
        name: "DCGM_FI_DEV_POWER_USAGE",
        help: "Power draw (in W)",
        value: |r| r.power_w,
    },
    Series {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        help: "Total energy consumption since boot (in mJ)",
        value: |r| r.energy_joules.map(|j| j * 1e3),
    },
    Series {
        name: "DCGM_FI_DEV_SM_CLOCK",
        help: "SM clock frequency (in MHz)",
        value: |r| r.clock_core_mhz.map(f64::from),
    },
    Series {
        name: "DCGM_FI_DEV_MEM_CLOCK",
        help: "Memory clock frequency (in MHz)",
        value: |r| r.clock_memory_mhz.map(f64::from),
    },
    Series {
        name: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        help: "Total number of single-bit volatile ECC errors",
        value: |r| r.ecc_corrected_errors.map(|v| v as f64),
    },
    Series {
        name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        help: "Total number of double-bit volatile ECC errors",
        value: |r| r.ecc_uncorrected_errors.map(|v| v as f64),
    },
];

/// accel's gauges of every device of every vendor.
pub(super) const DEVICE: &[Series] = &[
    Series {
        name: "accel_device_pcie_replay_errors",
        help: "PCIe replays since the driver loaded (NVML's replay counter; rising: a bad slot, riser or cable)",
        value: |r| r.pcie_replay_errors.map(|v| v as f64),
    },
    Series {
        name: "accel_device_retired_memory",
        help: "Memory taken out of service for errors: rows remapped (Ampere and later) or pages retired",
        value: |r| r.retired_memory.map(|v| v as f64),
    },
    Series {
        name: "accel_device_memory_repair_pending",
        help: "1 while a remapped row or retired page waits for a GPU reset",
        value: |r| r.memory_repair_pending.map(|b| f64::from(u8::from(b))),
    },
    Series {
        name: "accel_device_memory_repair_failed",
        help: "1 when row remapping failed: no spare rows left (replace the board)",
        value: |r| r.memory_repair_failed.map(|b| f64::from(u8::from(b))),
    },
    Series {
        name: "accel_device_utilization_percent",
        help: "Busy percent of the main engine (a TPU's TensorCore duty cycle)",
        value: |r| r.utilization_percent,
    },
    Series {
        name: "accel_device_memory_busy_percent",
        help: "Busy percent of the memory controller",
        value: |r| r.memory_busy_percent,
    },
    Series {
        name: "accel_device_memory_used_bytes",
        help: "Device memory in use by every process (an APU: VRAM carve-out plus GTT)",
        value: |r| r.memory_used_bytes.map(|b| b as f64),
    },
    Series {
        name: "accel_device_memory_total_bytes",
        help: "Device memory in all (an APU: VRAM carve-out plus GTT)",
        value: |r| r.memory_total_bytes.map(|b| b as f64),
    },
    Series {
        name: "accel_device_gtt_used_bytes",
        help: "System memory mapped for the device (AMD GTT), in use",
        value: |r| r.gtt_used_bytes.map(|b| b as f64),
    },
    Series {
        name: "accel_device_gtt_total_bytes",
        help: "System memory the device may map (AMD GTT)",
        value: |r| r.gtt_total_bytes.map(|b| b as f64),
    },
    Series {
        name: "accel_device_temperature_celsius",
        help: "Device temperature",
        value: |r| r.temperature_c,
    },
    Series {
        name: "accel_device_power_watts",
        help: "Device power draw",
        value: |r| r.power_w,
    },
    Series {
        name: "accel_device_power_limit_watts",
        help: "Device power cap",
        value: |r| r.power_limit_w,
    },
    Series {
        name: "accel_device_energy_joules",
        help: "Energy counter since the driver loaded",
        value: |r| r.energy_joules,
    },
    Series {
        name: "accel_device_fan_rpm",
        help: "Fan speed",
        value: |r| r.fan_rpm.map(f64::from),
    },
    Series {
        name: "accel_device_clock_core_hertz",
        help: "Current core (graphics / SM) clock",
        value: |r| r.clock_core_mhz.map(|c| f64::from(c) * 1e6),
    },
    Series {
        name: "accel_device_clock_memory_hertz",
        help: "Current memory clock",
        value: |r| r.clock_memory_mhz.map(|c| f64::from(c) * 1e6),
    },
    Series {
        name: "accel_device_pcie_tx_bytes_per_second",
        help: "PCIe throughput, device to host",
        value: |r| r.pcie_tx_bytes_per_s.map(|b| b as f64),
    },
    Series {
        name: "accel_device_pcie_rx_bytes_per_second",
        help: "PCIe throughput, host to device",
        value: |r| r.pcie_rx_bytes_per_s.map(|b| b as f64),
    },
];
