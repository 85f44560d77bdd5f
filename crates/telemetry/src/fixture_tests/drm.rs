//! The AMD and Intel telemetry readers against fixture trees in the kernel's sysfs and procfs
//! layout (`tests/fixtures/telemetry/*`, each with a README citing the formats). Every
//! expected number is worked out by hand from the fixture files, in the comments.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::amd::AmdReader;
use crate::intel::IntelReader;
use crate::{Reader, Reading, Roots, Vendor};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/telemetry")
        .join(name)
}

fn roots(name: &str, sys: &str, proc: &str) -> Roots {
    Roots {
        sysfs: fixture(name).join(sys),
        procfs: fixture(name).join(proc),
        ..Roots::default()
    }
}

#[track_caller]
fn close(got: Option<f64>, want: f64) {
    let g = got.unwrap_or_else(|| panic!("expected {want}, got None"));
    assert!((g - want).abs() < 1e-9, "expected {want}, got {g}");
}

fn pids(r: &Reading) -> Vec<u32> {
    r.processes.iter().map(|p| p.pid).collect()
}

#[test]
fn amd_discrete_card_and_per_process_busy_from_two_fdinfo_moments() {
    let mut amd = AmdReader::new();
    assert_eq!(amd.vendor(), Vendor::Amd);
    let t0 = Instant::now();
    let first = amd
        .read_at(&roots("amd-discrete", "sys", "proc-t0"), t0)
        .expect("reads");
    // card0 only: card0-DP-1, card0-DP-2, card0-HDMI-A-1 are connectors, renderD128 a render
    // node, `version` a file.
    assert_eq!(first.len(), 1);
    let r = &first[0];
    assert_eq!((r.vendor, r.index), (Vendor::Amd, 0));
    assert_eq!(r.id(), "amd:0");
    // No product_name: named by the `device` id.
    assert_eq!(r.name, "AMD GPU 0x744c");
    assert_eq!(r.driver.as_deref(), Some("amdgpu"));
    assert_eq!(r.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert!(r.up);
    assert_eq!(r.status, None);
    close(r.utilization_percent, 42.0); // gpu_busy_percent
    close(r.memory_busy_percent, 17.0); // mem_busy_percent
                                        // A dGPU (mem_busy_percent exists): memory is VRAM only. 24 GiB total, 6 GiB used.
    assert_eq!(r.memory_total_bytes, Some(24 * GIB));
    assert_eq!(r.memory_used_bytes, Some(6 * GIB));
    assert_eq!(r.gtt_total_bytes, Some(32 * GIB));
    assert_eq!(r.gtt_used_bytes, Some(256 * MIB));
    close(r.temperature_c, 65.0); // temp1_input 65000 m°C (edge)
    close(r.power_w, 245.0); // power1_average 245000000 µW
    close(r.power_limit_w, 355.0); // power1_cap 355000000 µW
    assert_eq!(r.fan_rpm, Some(1450));
    assert_eq!(r.energy_joules, None);
    assert_eq!(r.clock_core_mhz, Some(2304)); // pp_dpm_sclk "1: 2304Mhz *"
    assert_eq!(r.clock_memory_mhz, Some(1249)); // pp_dpm_mclk "3: 1249Mhz *"
                                                // pid 1234: clients 101 (fd 5 and its dup fd 6, counted once) and 102 (fd 7);
                                                // pid 2345: client 201; pid 2346 holds the same client 201 (inherited): counted once, for
                                                // the lower pid. pid 999's fd 3 is a socket (fd link), so its fdinfo is not read.
    assert_eq!(pids(r), [1234, 2345]);
    let p = &r.processes[0];
    assert_eq!(p.command.as_deref(), Some("python3"));
    // uid 54321 has no name here: the uid as text.
    assert_eq!(p.user.as_deref(), Some("54321"));
    // drm-memory-vram 1048576 KiB (client 101) + 524288 KiB (client 102) = 1.5 GiB.
    assert_eq!(p.memory_bytes, Some(1_572_864 * KIB));
    assert_eq!(p.busy_percent, None, "first sample: no busy percent");
    let q = &r.processes[1];
    assert_eq!(q.command.as_deref(), Some("blender"));
    assert_eq!(q.user.as_deref(), Some("root"));
    // Newer format: drm-resident-vram 262144 KiB wins over drm-total-vram 307200 KiB.
    assert_eq!(q.memory_bytes, Some(256 * MIB));
    assert_eq!(q.busy_percent, None);

    let second = amd
        .read_at(
            &roots("amd-discrete", "sys", "proc-t1"),
            t0 + Duration::from_secs(1),
        )
        .expect("reads");
    let r = &second[0];
    assert_eq!(pids(r), [1234, 2345]);
    // pid 1234 over 1 s = 1e9 ns, engine by engine, summed over its two clients:
    //   gfx:     client 101 5.25e9-5.0e9 = 2.5e8 (25 %) + client 102 1.5e8-1.0e8 = 5e7 (5 %) = 30 %
    //   compute: client 101 2.1e9-2.0e9 = 1e8 (10 %) + client 102 3.3e9-3.0e9 = 3e8 (30 %) = 40 %
    //   dma:     client 102 5e8 -> 4e8 went down: no progress, 0 %
    // busiest engine: compute, 40 %.
    close(r.processes[0].busy_percent, 40.0);
    // pid 2345: gfx 10.12e9 - 10.0e9 = 1.2e8 ns in 1e9 ns = 12 %.
    close(r.processes[1].busy_percent, 12.0);
}

#[test]
fn amd_apu_counts_vram_and_gtt() {
    let mut amd = AmdReader::new();
    let v = amd.read(&roots("amd-apu", "sys", "proc")).expect("reads");
    // card0 is simpledrm on a platform device: not amdgpu, not read.
    assert_eq!(v.len(), 1);
    let r = &v[0];
    assert_eq!(r.index, 1);
    assert_eq!(r.name, "AMD GPU 0x15bf");
    assert_eq!(r.pci_bus_id.as_deref(), Some("0000:c4:00.0"));
    // An APU (gpu_busy_percent, but neither mem_busy_percent nor pcie_bw):
    // used  = VRAM 256 MiB + GTT 1 GiB  = 1_342_177_280 B
    // total = VRAM 512 MiB + GTT 16 GiB = 17_716_740_096 B
    assert_eq!(r.memory_used_bytes, Some(256 * MIB + GIB));
    assert_eq!(r.memory_total_bytes, Some(512 * MIB + 16 * GIB));
    assert_eq!(r.memory_used_bytes, Some(1_342_177_280));
    assert_eq!(r.memory_total_bytes, Some(17_716_740_096));
    assert_eq!(r.gtt_used_bytes, Some(GIB));
    assert_eq!(r.gtt_total_bytes, Some(16 * GIB));
    close(r.utilization_percent, 8.0);
    assert_eq!(r.memory_busy_percent, None);
    assert_eq!(r.clock_core_mhz, Some(1500));
    assert_eq!(r.clock_memory_mhz, Some(800));
    close(r.temperature_c, 48.0);
    close(r.power_w, 15.0); // no power1_average: power1_input 15000000 µW
    assert_eq!(r.power_limit_w, None);
    assert_eq!(r.fan_rpm, None);
    // ollama: drm-memory-vram 131072 KiB + drm-memory-gtt 786432 KiB = 917504 KiB = 896 MiB.
    assert_eq!(pids(r), [4321]);
    assert_eq!(r.processes[0].memory_bytes, Some(896 * MIB));
    assert_eq!(r.processes[0].command.as_deref(), Some("ollama"));
    assert_eq!(r.processes[0].busy_percent, None);
}

#[test]
fn amd_edge_cases_garbled_files_duplicate_card_and_runtime_suspend() {
    let mut amd = AmdReader::new();
    let v = amd
        .read(&roots("amd-edge", "sys", "proc"))
        .expect("garbled files are not an error");
    // card0 and card2 are the same PCI device (0000:0a:00.0): one row, card0's.
    let idx: Vec<u32> = v.iter().map(|r| r.index).collect();
    assert_eq!(idx, [0, 1]);

    let r = &v[0];
    assert_eq!(r.name, "AMD Radeon Instinct MI25"); // product_name, trimmed
    assert_eq!(r.pci_bus_id.as_deref(), Some("0000:0a:00.0"));
    assert_eq!(r.status, None);
    assert_eq!(r.utilization_percent, None); // gpu_busy_percent "garbage"
    assert_eq!(r.memory_busy_percent, None); // absent (Vega10)
                                             // Vega10 has pcie_bw, so it is a dGPU even without mem_busy_percent: VRAM only.
    assert_eq!(r.memory_total_bytes, Some(16 * GIB));
    assert_eq!(r.memory_used_bytes, None); // mem_info_vram_used is empty
    assert_eq!(r.gtt_total_bytes, None); // "0x"
    assert_eq!(r.gtt_used_bytes, Some(MIB));
    assert_eq!(r.clock_core_mhz, None); // no line marked *
    assert_eq!(r.clock_memory_mhz, Some(945));
    assert_eq!(r.temperature_c, None); // "N/A"
    assert_eq!(r.fan_rpm, None); // "-"
    close(r.power_w, 300.0);

    let s = &v[1];
    assert_eq!(s.name, "AMD GPU 0x73ff");
    let status = s.status.as_deref().expect("a status");
    assert!(status.contains("runtime-suspended"), "{status}");
    assert!(s.up);
    // gpu_busy_percent (99), pp_dpm_sclk (500 *) and hwmon (40 °C, 5 W) are there but not read.
    assert_eq!(s.utilization_percent, None);
    assert_eq!(s.memory_busy_percent, None);
    assert_eq!(s.clock_core_mhz, None);
    assert_eq!(s.clock_memory_mhz, None);
    assert_eq!(s.temperature_c, None);
    assert_eq!(s.power_w, None);
    // Memory bookkeeping is still read: 8 GiB, 0 used.
    assert_eq!(s.memory_total_bytes, Some(8 * GIB));
    assert_eq!(s.memory_used_bytes, Some(0));
}

#[test]
fn intel_i915_power_from_energy_and_busy_from_engine_time() {
    let mut intel = IntelReader::new();
    assert_eq!(intel.vendor(), Vendor::Intel);
    let t0 = Instant::now();
    let first = intel
        .read_at(&roots("intel-i915", "sys-t0", "proc-t0"), t0)
        .expect("reads");
    let idx: Vec<u32> = first.iter().map(|r| r.index).collect();
    assert_eq!(idx, [0, 1]);
    let arc = &first[0];
    assert_eq!(arc.name, "Intel GPU 0x56a0");
    assert_eq!(arc.driver.as_deref(), Some("i915"));
    assert_eq!(arc.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert_eq!(arc.memory_total_bytes, Some(16 * GIB)); // card0/lmem_total_bytes
    assert_eq!(arc.memory_used_bytes, None);
    assert_eq!(arc.clock_core_mhz, Some(1950)); // gt_act_freq_mhz (gt_cur_freq_mhz is 2000)
                                                // hwmon2 is named "i915" (device level); hwmon3 "i915_gt0" (energy 7 µJ) is not used.
    close(arc.energy_joules, 1000.0); // energy1_input 1e9 µJ
    assert_eq!(arc.power_w, None, "one energy reading gives no power");
    close(arc.power_limit_w, 190.0); // power1_max 190000000 µW
    assert_eq!(arc.temperature_c, None);
    assert_eq!(arc.utilization_percent, None);
    assert_eq!(pids(arc), [5000]);
    // ffmpeg: drm-resident-local0 65536 KiB = 64 MiB (system0 is not device memory).
    assert_eq!(arc.processes[0].memory_bytes, Some(64 * MIB));
    assert_eq!(arc.processes[0].busy_percent, None);

    let igpu = &first[1];
    assert_eq!(igpu.name, "Intel GPU 0x4680");
    assert_eq!(igpu.pci_bus_id.as_deref(), Some("0000:00:02.0"));
    assert_eq!(igpu.memory_total_bytes, None);
    assert_eq!(igpu.clock_core_mhz, Some(350)); // gt/gt0/rps_act_freq_mhz
    assert_eq!(igpu.power_w, None);
    assert_eq!(igpu.energy_joules, None);
    // glxgears on the iGPU: no local region, so system0 8192 KiB + stolen-system0 0 = 8 MiB.
    assert_eq!(pids(igpu), [5001]);
    assert_eq!(igpu.processes[0].memory_bytes, Some(8 * MIB));

    let second = intel
        .read_at(
            &roots("intel-i915", "sys-t1", "proc-t1"),
            t0 + Duration::from_secs(1),
        )
        .expect("reads");
    let arc = &second[0];
    // energy1_input 1.00e9 -> 1.15e9 µJ: 150 J in 1 s = 150 W.
    close(arc.energy_joules, 1150.0);
    close(arc.power_w, 150.0);
    // ffmpeg in 1 s: render 2.3e9 - 2.0e9 = 3e8 ns (30 %); video 2.0e9 - 1.0e9 = 1e9 ns on
    // drm-engine-capacity-video 2: 1e9 / (1e9 * 2) = 50 %. Busiest: 50 %; the only client,
    // so the device's too.
    close(arc.processes[0].busy_percent, 50.0);
    close(arc.utilization_percent, 50.0);
    // glxgears: render 7.5e8 - 5e8 = 2.5e8 ns in 1e9 ns = 25 %.
    let igpu = &second[1];
    close(igpu.processes[0].busy_percent, 25.0);
    close(igpu.utilization_percent, 25.0);
}

#[test]
fn intel_xe_busy_from_cycles() {
    let mut intel = IntelReader::new();
    let t0 = Instant::now();
    let first = intel
        .read_at(&roots("intel-xe", "sys-t0", "proc-t0"), t0)
        .expect("reads");
    assert_eq!(first.len(), 1);
    let r = &first[0];
    assert_eq!(r.name, "Intel GPU 0xe20b");
    assert_eq!(r.driver.as_deref(), Some("xe"));
    assert_eq!(r.memory_total_bytes, Some(12 * GIB)); // tile0/physical_vram_size_bytes
    assert_eq!(r.memory_used_bytes, None);
    assert_eq!(r.clock_core_mhz, Some(2850)); // freq0/act_freq (cur_freq is 2900)
    close(r.temperature_c, 55.0); // temp2_input (package) 55000 m°C
    assert_eq!(r.fan_rpm, Some(1200));
    close(r.power_limit_w, 190.0);
    close(r.energy_joules, 500.0);
    assert_eq!(r.power_w, None);
    assert_eq!(r.utilization_percent, None);
    assert_eq!(pids(r), [6000]);
    // drm-resident-vram0 2097152 KiB = 2 GiB (gtt 192 KiB is not device-local).
    assert_eq!(r.processes[0].memory_bytes, Some(2 * GIB));
    assert_eq!(r.processes[0].user.as_deref(), Some("root"));

    let second = intel
        .read_at(
            &roots("intel-xe", "sys-t1", "proc-t1"),
            t0 + Duration::from_secs(1),
        )
        .expect("reads");
    let r = &second[0];
    // energy 5.0e8 -> 5.8e8 µJ in 1 s: 80 W.
    close(r.power_w, 80.0);
    // Cycles over total cycles (1e7 -> 2e7, so 1e7 GPU ticks):
    //   rcs: 1e6 -> 2e6 = 1e6 / 1e7 = 10 %
    //   ccs: 2e6 -> 1e7 = 8e6 / (1e7 * capacity 4) = 20 %
    // busiest: 20 %.
    close(r.processes[0].busy_percent, 20.0);
    close(r.utilization_percent, 20.0);
}

#[test]
fn mixed_machine_each_reader_finds_its_own() {
    let mixed = roots("mixed", "sys", "proc");
    let amd = AmdReader::new().read(&mixed).expect("reads");
    assert_eq!(amd.len(), 1);
    assert_eq!(amd[0].pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert_eq!(pids(&amd[0]), [1234, 7000]);
    assert_eq!(amd[0].processes[0].memory_bytes, Some(GIB));
    // pid 7000 names itself `evil"na\me`: the name is kept as it is (escaping is the
    // exporter's job), with its 4096 KiB.
    assert_eq!(amd[0].processes[1].command.as_deref(), Some("evil\"na\\me"));
    assert_eq!(amd[0].processes[1].memory_bytes, Some(4096 * 1024));
    // RAS: umc 0 ue / 3 ce, gfx 1 / 2 (and a deferred line), sdma 0 / 0; `features` is not a
    // count. Boards without ras/ (amd-discrete) have no ECC numbers at all.
    assert_eq!(amd[0].ecc_uncorrected_errors, Some(1));
    assert_eq!(amd[0].ecc_corrected_errors, Some(5));
    let plain = AmdReader::new()
        .read(&roots("amd-discrete", "sys", "proc-t0"))
        .expect("reads");
    assert_eq!(plain[0].ecc_uncorrected_errors, None);
    assert_eq!(plain[0].ecc_corrected_errors, None);
    let intel = IntelReader::new().read(&mixed).expect("reads");
    assert_eq!(intel.len(), 1);
    assert_eq!(intel[0].index, 1);
    assert_eq!(intel[0].driver.as_deref(), Some("xe"));
    assert_eq!(intel[0].pci_bus_id.as_deref(), Some("0000:04:00.0"));
    assert_eq!(pids(&intel[0]), [6000]);
}

#[test]
fn no_gpu_and_no_tree_give_empty_lists() {
    let none = roots("none", "sys", "proc");
    assert_eq!(AmdReader::new().read(&none), Ok(Vec::new()));
    assert_eq!(IntelReader::new().read(&none), Ok(Vec::new()));
    let missing = roots("does-not-exist", "sys", "proc");
    assert_eq!(AmdReader::new().read(&missing), Ok(Vec::new()));
    assert_eq!(IntelReader::new().read(&missing), Ok(Vec::new()));
}

#[test]
fn this_machine_reads_without_error() {
    // Whatever this machine has (often nothing): reading the real /sys and /proc never fails
    // and never panics; a second sample exercises the differences.
    let mut amd = AmdReader::new();
    let mut intel = IntelReader::new();
    for _ in 0..2 {
        assert!(amd.read(&Roots::default()).is_ok());
        assert!(intel.read(&Roots::default()).is_ok());
    }
}
