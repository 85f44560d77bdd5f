//! The corpus: each case is a failure from a public report, rebuilt as machine state. `build`
//! makes the machine with the fault (`fault == true`) or the same machine without it.

use super::{Standin, Tree};

pub struct Case {
    pub name: &'static str,
    /// The public report the case comes from.
    pub report: &'static str,
    /// The doctor section whose verdict names the cause (`cuda`, `xla`, `wgpu`).
    pub section: &'static str,
    pub cause: &'static str,
    /// Words the fix must contain.
    pub fix_words: &'static [&'static str],
    pub build: fn(&mut Tree, bool),
}

pub const ALL_CAUSES: &[&str] = &[
    "nvidia.nouveau",
    "nvidia.secure_boot",
    "nvidia.no_module_for_kernel",
    "nvidia.module_not_loaded",
    "nvidia.driver_not_installed",
    "nvidia.version_mismatch",
    "nvidia.forward_compat",
    "nvidia.stub_libcuda",
    "nvidia.fabric_manager",
    "nvidia.mig_no_instances",
    "nvidia.fell_off_bus",
    "nvidia.memory_held",
    "nvidia.exclusive_process",
    "nvidia.device_permission",
    "nvidia.uvm_missing",
    "nvidia.libcuda_missing",
    "nvidia.driver_too_old",
    "container.no_gpus",
    "container.no_compute_capability",
    "cuda.visible_devices",
    "wsl.version1",
    "wsl.shadowed_driver",
    "wsl.no_windows_driver",
    "hosted.no_gpu_runtime",
    "torch.cpu_build",
    "torch.driver_too_old",
    "torch.arch_missing",
    "jax.no_cuda_plugin",
    "jax.plugin_mismatch",
    "jax.driver_too_old",
    "libs.shadowed_cudnn",
    "libs.shadowed_cublas",
    "tpu.lock_stale",
    "tpu.lock_held",
    "tpu.no_libtpu",
    "torchxla.no_pjrt_device",
    "gpu.render_permission",
    "amd.kfd_permission",
];

const KERNEL: &str = "6.8.0-49-generic";
const DRIVER: &str = "580.95.05";

fn module_line(version: &str) -> String {
    format!(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  \
         (dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:29:11 UTC 2025\nGCC version:  gcc \
         version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
    )
}

/// A PCI function: vendor, device, class, and the driver bound to it.
fn pci(t: &Tree, addr: &str, vendor: u16, device: u16, class: u32, driver: Option<&str>) {
    let d = format!("sys/bus/pci/devices/{addr}");
    t.file(&format!("{d}/vendor"), &format!("0x{vendor:04x}\n"))
        .file(&format!("{d}/device"), &format!("0x{device:04x}\n"))
        .file(&format!("{d}/class"), &format!("0x{class:06x}\n"));
    if let Some(drv) = driver {
        t.dir(&format!("sys/bus/pci/drivers/{drv}"));
        t.link(&format!("{d}/driver"), &format!("../../drivers/{drv}"));
    }
}

/// A Linux host with no GPU: kernel, distribution, groups.
fn host(t: &Tree) {
    t.file("proc/sys/kernel/osrelease", &format!("{KERNEL}\n"))
        .file(
            "proc/version",
            &format!("Linux version {KERNEL} (buildd@lcy02-amd64-080) (gcc 13.3.0) #49-Ubuntu\n"),
        )
        .file(
            "etc/os-release",
            "NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n",
        )
        .file(
            "etc/group",
            "root:x:0:\nvideo:x:44:\nrender:x:109:\nstaff:x:50:\n",
        )
        .dir("proc/1")
        .file("proc/1/cgroup", "0::/init.scope\n");
}

/// A healthy host with one NVIDIA GPU (PCI device `device`), its module loaded, the nodes,
/// and the driver's libraries (the stand-in) of the module's version.
pub fn gpu_host(t: &mut Tree, device: u16) {
    host(t);
    pci(t, "0000:01:00.0", 0x10de, device, 0x030200, Some("nvidia"));
    t.file("proc/driver/nvidia/version", &module_line(DRIVER))
        .dir("sys/module/nvidia")
        .dir("sys/module/nvidia_uvm")
        .file(
            &format!("lib/modules/{KERNEL}/updates/dkms/nvidia.ko.zst"),
            "",
        )
        .node("dev/nvidia0", 0o666, 0)
        .node("dev/nvidiactl", 0o666, 0)
        .node("dev/nvidia-uvm", 0o666, 0)
        .node("dev/nvidia-uvm-tools", 0o666, 0);
    t.standin = Some(Standin {
        dir: "usr/lib/x86_64-linux-gnu".into(),
        version: DRIVER.into(),
        codes: vec![("STANDIN_CUDA_VERSION", "13000".into())],
        partial: false,
    });
}

/// The GPU host's driver gone: no module, no nodes, no libraries (the GPU stays on the bus).
fn unload(t: &mut Tree) {
    t.remove("proc/driver/nvidia")
        .remove("sys/module/nvidia")
        .remove("sys/module/nvidia_uvm")
        .remove("dev/nvidia0")
        .remove("dev/nvidiactl")
        .remove("dev/nvidia-uvm")
        .remove("dev/nvidia-uvm-tools")
        .remove("sys/bus/pci/devices/0000:01:00.0/driver");
    t.standin = None;
}

fn docker(t: &mut Tree) {
    t.file(".dockerenv", "")
        .file("proc/1/cgroup", "0::/system.slice/docker-4f1e.scope\n");
    t.var("NVIDIA_VISIBLE_DEVICES", "all");
    t.var("NVIDIA_DRIVER_CAPABILITIES", "compute,utility");
}

fn container_without_gpus(t: &mut Tree) {
    t.remove("dev/nvidia0")
        .remove("dev/nvidiactl")
        .remove("dev/nvidia-uvm")
        .remove("dev/nvidia-uvm-tools");
    t.standin = None;
}

fn holder(t: &Tree, pid: u32, name: &str, fd: u32, dev: &str) {
    t.file(&format!("proc/{pid}/comm"), &format!("{name}\n"));
    t.link(&format!("proc/{pid}/fd/{fd}"), dev);
}

fn wsl2(t: &mut Tree) {
    t.file(
        "proc/sys/kernel/osrelease",
        "6.6.87.2-microsoft-standard-WSL2\n",
    )
    .file(
        "proc/version",
        "Linux version 6.6.87.2-microsoft-standard-WSL2 (root@439a258ad544) (gcc 11.2.0) #1 SMP\n",
    )
    .node("dev/dxg", 0o666, 0);
    t.standin = Some(Standin {
        dir: "usr/lib/wsl/lib".into(),
        version: "1.1".into(),
        codes: vec![("STANDIN_CUDA_VERSION", "13000".into())],
        partial: false,
    });
}

fn tpu_vm(t: &mut Tree) {
    host(t);
    for i in 0..4 {
        t.node(&format!("dev/accel{i}"), 0o660, 0);
    }
    pci(
        t,
        "0000:00:04.0",
        0x1ae0,
        0x0062,
        0x120000,
        Some("vfio-pci"),
    );
}

/// An ELF file whose `.nv_fatbin` section has one fat binary with a cubin per architecture
/// (CUDA's container: 16-byte header, then 64-byte entry headers each followed by its
/// payload; the entry's kind is at 0 (2 = ELF), its header size at 4, its payload size at
/// 8, its `arch` at 28), as `libtorch_cuda.so` carries them.
pub fn fake_cuda_library(archs: &[u32]) -> Vec<u8> {
    let mut fat = Vec::new();
    for &a in archs {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&2u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&16u64.to_le_bytes());
        e[28..32].copy_from_slice(&a.to_le_bytes());
        fat.extend(e);
        fat.extend([0xAAu8; 16]);
    }
    let mut section = Vec::new();
    section.extend(0xBA55_ED50u32.to_le_bytes());
    section.extend(1u16.to_le_bytes());
    section.extend(16u16.to_le_bytes());
    section.extend((fat.len() as u64).to_le_bytes());
    section.extend(fat);
    let names = b"\0.shstrtab\0.nv_fatbin\0".to_vec();
    let data_off = 64u64;
    let names_off = data_off + section.len() as u64;
    let sh_off = (names_off + names.len() as u64).div_ceil(8) * 8;
    let mut f = vec![0u8; 64];
    f[0..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // 64-bit
    f[5] = 1; // little-endian
    f[6] = 1;
    f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    f[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    f[0x28..0x30].copy_from_slice(&sh_off.to_le_bytes());
    f[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
    f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    f[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
    f.extend(&section);
    f.extend(&names);
    f.resize(sh_off as usize, 0);
    let sh = |name: u32, kind: u32, off: u64, size: u64| {
        let mut h = vec![0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        h
    };
    f.extend(sh(0, 0, 0, 0));
    f.extend(sh(1, 3, names_off, names.len() as u64));
    f.extend(sh(11, 1, data_off, section.len() as u64));
    f
}

/// A Python environment's root under the tree, for `LD_LIBRARY_PATH`-style paths.
fn p(t: &Tree, rel: &str) -> String {
    t.path(rel).display().to_string()
}

pub fn all() -> Vec<Case> {
    vec![
        Case {
            name: "nouveau",
            report: "https://github.com/mattshma/bigdata/issues/133",
            section: "cuda",
            cause: "nvidia.nouveau",
            fix_words: &["blacklist nouveau", "ubuntu-drivers"],
            build: |t, fault| {
                gpu_host(t, 0x1db6);
                if fault {
                    unload(t);
                    t.dir("sys/module/nouveau");
                    pci(t, "0000:01:00.0", 0x10de, 0x1db6, 0x030200, Some("nouveau"));
                }
            },
        },
        Case {
            name: "secure-boot",
            report: "https://github.com/linux-surface/linux-surface/issues/906",
            section: "cuda",
            cause: "nvidia.secure_boot",
            fix_words: &["mokutil --import", "Secure Boot off"],
            build: |t, fault| {
                gpu_host(t, 0x2704);
                if fault {
                    unload(t);
                    // The user-space half is installed: libcuda finds no module.
                    gpu_host_libs(t, "100");
                    t.bytes(
                        "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c",
                        &[6, 0, 0, 0, 1],
                    )
                    .file(
                        "var/log/kern.log",
                        "Sep 12 10:01:02 host kernel: Loading of unsigned module is rejected\n\
                         Sep 12 10:01:02 host modprobe[812]: modprobe: ERROR: could not insert \
                         'nvidia': Key was rejected by service\n",
                    );
                }
            },
        },
        Case {
            name: "module-for-another-kernel",
            report: "https://github.com/NVIDIA/nvidia-docker/issues/365",
            section: "cuda",
            cause: "nvidia.no_module_for_kernel",
            fix_words: &["linux-headers-$(uname -r)", "dkms autoinstall"],
            build: |t, fault| {
                gpu_host(t, 0x1b80);
                if fault {
                    unload(t);
                    t.remove("lib/modules").file(
                        "lib/modules/6.8.0-45-generic/kernel/drivers/video/nvidia.ko",
                        "",
                    );
                }
            },
        },
        Case {
            name: "no-driver",
            report: "https://github.com/pytorch/pytorch/issues/74733",
            section: "cuda",
            cause: "nvidia.driver_not_installed",
            fix_words: &["ubuntu-drivers install", "nvidia-driver-580"],
            build: |t, fault| {
                gpu_host(t, 0x2204);
                if fault {
                    unload(t);
                    t.remove("lib/modules");
                }
            },
        },
        Case {
            name: "module-not-loaded",
            report: "https://github.com/NVIDIA/nvidia-docker/issues/365",
            section: "cuda",
            cause: "nvidia.module_not_loaded",
            fix_words: &["sudo modprobe nvidia"],
            build: |t, fault| {
                gpu_host(t, 0x2204);
                if fault {
                    unload(t);
                }
            },
        },
        Case {
            name: "upgraded-driver-old-module",
            report: "https://github.com/illinois-scicomp/machine-shop-maintenance/issues/70",
            section: "cuda",
            cause: "nvidia.version_mismatch",
            fix_words: &["525.85.12", "520.56.06", "reboot"],
            build: |t, fault| {
                gpu_host(t, 0x1eb8);
                let v = if fault { "520.56.06" } else { "525.85.12" };
                t.file("proc/driver/nvidia/version", &module_line(v));
                let s = t.standin.as_mut().unwrap();
                s.version = "525.85.12".into();
                t.code("STANDIN_CUDA_VERSION", 12000);
                if fault {
                    t.code("STANDIN_CUINIT", 803).code("STANDIN_NVML", 18);
                    t.file(
                        "var/log/kern.log",
                        "Feb 3 06:25:01 node7 kernel: NVRM: API mismatch: the client has the \
                         version 525.85.12, but\nFeb 3 06:25:01 node7 kernel: NVRM: this kernel \
                         module has the version 520.56.06.  Please make sure that this kernel \
                         module and all NVIDIA driver components have the same version.\n",
                    );
                }
            },
        },
        Case {
            name: "container-driver-803",
            report: "https://github.com/NVIDIA/nvidia-container-toolkit/issues/234",
            section: "cuda",
            cause: "nvidia.version_mismatch",
            fix_words: &["570.133.20", "575.51.03", "image"],
            build: |t, fault| {
                gpu_host(t, 0x2236);
                docker(t);
                t.file("proc/driver/nvidia/version", &module_line("570.133.20"));
                let s = t.standin.as_mut().unwrap();
                s.version = if fault { "575.51.03" } else { "570.133.20" }.into();
                t.code("STANDIN_CUDA_VERSION", 12080);
                if fault {
                    t.code("STANDIN_CUINIT", 803);
                }
            },
        },
        Case {
            name: "forward-compat-804",
            report: "https://github.com/gpustack/gpustack/issues/1254",
            section: "cuda",
            cause: "nvidia.forward_compat",
            fix_words: &["/usr/local/cuda-12.8/compat", "LD_LIBRARY_PATH"],
            build: |t, fault| {
                gpu_host(t, 0x2684);
                t.file("proc/driver/nvidia/version", &module_line("535.129.03"));
                let s = t.standin.as_mut().unwrap();
                s.version = "535.129.03".into();
                t.code("STANDIN_CUDA_VERSION", 12020);
                if fault {
                    let s = t.standin.as_mut().unwrap();
                    s.dir = "usr/local/cuda-12.8/compat".into();
                    s.version = "570.124.06".into();
                    t.code("STANDIN_CUINIT", 804)
                        .code("STANDIN_CUDA_VERSION", 12080);
                }
            },
        },
        Case {
            name: "hgx-fabric-manager-802",
            report: "https://github.com/pytorch/pytorch/issues/35710",
            section: "cuda",
            cause: "nvidia.fabric_manager",
            fix_words: &["nvidia-fabricmanager-580", "systemctl enable --now"],
            build: |t, fault| {
                gpu_host(t, 0x2330);
                for (i, a) in ["0000:05:00.0", "0000:06:00.0"].iter().enumerate() {
                    pci(t, a, 0x10de, 0x22a3, 0x068000, Some("nvidia-nvswitch"));
                    t.node(&format!("dev/nvidia-nvswitch{i}"), 0o666, 0);
                }
                t.node("dev/nvidia-nvswitchctl", 0o666, 0);
                if fault {
                    t.code("STANDIN_CUINIT", 802);
                }
            },
        },
        Case {
            name: "mig-without-instances",
            report: "https://github.com/wilicc/gpu-burn/issues/36",
            section: "cuda",
            cause: "nvidia.mig_no_instances",
            fix_words: &["nvidia-smi mig -cgi", "-mig 0"],
            build: |t, fault| {
                gpu_host(t, 0x20b0);
                t.file(
                    "proc/driver/nvidia/capabilities/gpu0/mig/config",
                    "DeviceFileMinor: 1\n",
                );
                if fault {
                    t.code("STANDIN_MIG", 1).code("STANDIN_CUINIT", 100);
                } else {
                    t.file(
                        "proc/driver/nvidia/capabilities/gpu0/mig/gi1/access",
                        "DeviceFileMinor: 12\n",
                    );
                }
            },
        },
        Case {
            name: "xid-79",
            report: "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151",
            section: "cuda",
            cause: "nvidia.fell_off_bus",
            fix_words: &["nvidia-smi -r", "reboot", "power"],
            build: |t, fault| {
                gpu_host(t, 0x2b85);
                if fault {
                    t.code("STANDIN_CUINIT", 999).code("STANDIN_NVML", 15);
                    t.file(
                        "var/log/kern.log",
                        "Oct 2 21:14:09 rig kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has \
                         fallen off the bus.\nOct 2 21:14:09 rig kernel: NVRM: \
                         kgspRcAndNotifyAllChannels_IMPL: RC all channels for critical error 79.\n",
                    );
                }
            },
        },
        Case {
            name: "xid-79-config-space-all-ones",
            report: "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151",
            section: "cuda",
            cause: "nvidia.fell_off_bus",
            fix_words: &["vendor 0xffff", "nvidia-smi -r"],
            build: |t, fault| {
                gpu_host(t, 0x2c02);
                if fault {
                    // lspci's "rev ff": the GPU's configuration space reads all ones.
                    pci(t, "0000:01:00.0", 0xffff, 0xffff, 0xffffff, Some("nvidia"));
                    t.code("STANDIN_CUINIT", 999);
                }
            },
        },
        Case {
            name: "memory-held-by-a-zombie",
            report: "https://github.com/LISTatSNU/FastMRI_challenge/issues/238",
            section: "cuda",
            cause: "nvidia.memory_held",
            fix_words: &["kill 4242"],
            build: |t, fault| {
                gpu_host(t, 0x2204);
                if fault {
                    t.code("STANDIN_CTX", 2);
                    holder(t, 4242, "python3", 7, "/dev/nvidia0");
                    holder(t, 4242, "python3", 8, "/dev/nvidiactl");
                }
            },
        },
        Case {
            name: "exclusive-process",
            report: "https://github.com/NVIDIA/DIGITS/issues/2005",
            section: "cuda",
            cause: "nvidia.exclusive_process",
            fix_words: &["-c DEFAULT", "5151"],
            build: |t, fault| {
                gpu_host(t, 0x1023);
                if fault {
                    t.code("STANDIN_CTX", 46);
                    holder(t, 5151, "caffe", 3, "/dev/nvidia0");
                }
            },
        },
        Case {
            name: "docker-without-gpus",
            report: "https://github.com/maciej-sypetkowski/kaggle-rcic-1st/issues/5",
            section: "cuda",
            cause: "container.no_gpus",
            fix_words: &["--gpus all", "nvidia-ctk"],
            build: |t, fault| {
                gpu_host(t, 0x1e07);
                docker(t);
                if fault {
                    container_without_gpus(t);
                }
            },
        },
        Case {
            name: "nvidia-visible-devices-void",
            report: "https://github.com/NVIDIA/nvidia-container-toolkit/issues/234",
            section: "cuda",
            cause: "container.no_gpus",
            fix_words: &["NVIDIA_VISIBLE_DEVICES=all"],
            build: |t, fault| {
                gpu_host(t, 0x1e07);
                docker(t);
                if fault {
                    container_without_gpus(t);
                    t.var("NVIDIA_VISIBLE_DEVICES", "void");
                }
            },
        },
        Case {
            name: "container-without-compute",
            report: "https://github.com/mudler/LocalAI/issues/11973",
            section: "cuda",
            cause: "container.no_compute_capability",
            fix_words: &["NVIDIA_DRIVER_CAPABILITIES=compute,utility"],
            build: |t, fault| {
                gpu_host(t, 0x2c05);
                docker(t);
                if fault {
                    t.standin = None;
                    t.var("NVIDIA_DRIVER_CAPABILITIES", "gpu,utility");
                }
            },
        },
        Case {
            name: "kubernetes-pod-without-gpu",
            report: "https://github.com/maciej-sypetkowski/kaggle-rcic-1st/issues/5",
            section: "cuda",
            cause: "container.no_gpus",
            fix_words: &["nvidia.com/gpu: 1"],
            build: |t, fault| {
                gpu_host(t, 0x1eb8);
                t.file(
                    "proc/1/cgroup",
                    "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-9a.scope\n",
                );
                t.var("KUBERNETES_SERVICE_HOST", "10.96.0.1");
                if fault {
                    container_without_gpus(t);
                }
            },
        },
        Case {
            name: "ray-task-without-gpus",
            report: "https://github.com/ray-project/ray/issues/3265",
            section: "cuda",
            cause: "cuda.visible_devices",
            fix_words: &["num_gpus=1"],
            build: |t, fault| {
                gpu_host(t, 0x20b0);
                t.var("RAY_RAYLET_PID", "811").var("RAY_JOB_ID", "01000000");
                if fault {
                    t.var("CUDA_VISIBLE_DEVICES", "");
                    t.code("STANDIN_CUINIT", 100);
                } else {
                    t.var("CUDA_VISIBLE_DEVICES", "0");
                }
            },
        },
        Case {
            name: "slurm-nodevfiles",
            report: "https://github.com/ray-project/ray/pull/7014",
            section: "cuda",
            cause: "cuda.visible_devices",
            fix_words: &["--gres=gpu:1"],
            build: |t, fault| {
                gpu_host(t, 0x20b0);
                t.var("SLURM_JOB_ID", "91822")
                    .var("SLURM_JOB_NODELIST", "gpu07");
                if fault {
                    t.var("CUDA_VISIBLE_DEVICES", "NoDevFiles");
                    t.code("STANDIN_CUINIT", 100);
                } else {
                    t.var("CUDA_VISIBLE_DEVICES", "0");
                }
            },
        },
        Case {
            name: "visible-device-out-of-range",
            report: "https://github.com/pytorch/torchtitan/issues/423",
            section: "cuda",
            cause: "cuda.visible_devices",
            fix_words: &["unset CUDA_VISIBLE_DEVICES", "0 to 1"],
            build: |t, fault| {
                gpu_host(t, 0x2330);
                pci(t, "0000:02:00.0", 0x10de, 0x2330, 0x030200, Some("nvidia"));
                t.node("dev/nvidia1", 0o666, 0);
                t.var("CUDA_VISIBLE_DEVICES", if fault { "2,3" } else { "0,1" });
                if fault {
                    t.code("STANDIN_CUINIT", 100);
                }
            },
        },
        Case {
            name: "not-in-video-group",
            report: "https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/3207",
            section: "cuda",
            cause: "nvidia.device_permission",
            fix_words: &["usermod -aG video"],
            build: |t, fault| {
                gpu_host(t, 0x2504);
                t.uid = Some(4343);
                if fault {
                    t.node("dev/nvidia0", 0o660, 44)
                        .node("dev/nvidiactl", 0o660, 44)
                        .node("dev/nvidia-uvm", 0o660, 44);
                    t.code("STANDIN_CUINIT", 999);
                }
            },
        },
        Case {
            name: "uvm-missing-after-suspend",
            report: "https://github.com/pytorch/pytorch/issues/49081",
            section: "cuda",
            cause: "nvidia.uvm_missing",
            fix_words: &["modprobe nvidia-uvm", "nvidia-modprobe -u"],
            build: |t, fault| {
                gpu_host(t, 0x2206);
                if fault {
                    t.remove("dev/nvidia-uvm").remove("dev/nvidia-uvm-tools");
                    t.code("STANDIN_CUINIT", 999);
                }
            },
        },
        Case {
            name: "toolkit-stub-libcuda",
            report: "https://github.com/numba/numba/issues/9732",
            section: "cuda",
            cause: "nvidia.stub_libcuda",
            fix_words: &["lib64/stubs", "LD_LIBRARY_PATH"],
            build: |t, fault| {
                gpu_host(t, 0x2206);
                if fault {
                    let s = t.standin.as_mut().unwrap();
                    s.dir = "usr/local/cuda-11.8/targets/x86_64-linux/lib/stubs".into();
                    t.code("STANDIN_CUINIT", 34);
                }
            },
        },
        Case {
            name: "wsl1",
            report: "https://github.com/microsoft/WSL/issues/327",
            section: "cuda",
            cause: "wsl.version1",
            fix_words: &["wsl --set-version"],
            build: |t, fault| {
                host(t);
                if fault {
                    t.file(
                        "proc/version",
                        "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc 5.4.0) #1237-Microsoft\n",
                    );
                } else {
                    wsl2(t);
                    t.file("usr/lib/wsl/lib/libcuda.so.1", "");
                }
            },
        },
        Case {
            name: "wsl2-linux-driver-installed",
            report: "https://github.com/microsoft/WSL/issues/5265",
            section: "cuda",
            cause: "wsl.shadowed_driver",
            fix_words: &["apt remove --purge", "/usr/lib/x86_64-linux-gnu"],
            build: |t, fault| {
                host(t);
                wsl2(t);
                t.file("usr/lib/wsl/lib/libcuda.so.1", "");
                if fault {
                    let s = t.standin.as_mut().unwrap();
                    s.dir = "usr/lib/x86_64-linux-gnu".into();
                    s.version = "440.100".into();
                    t.code("STANDIN_CUINIT", 100);
                }
            },
        },
        Case {
            name: "wsl2-without-windows-driver",
            report: "https://github.com/microsoft/WSL/issues/5265",
            section: "cuda",
            cause: "wsl.no_windows_driver",
            fix_words: &["driver for Windows", "wsl --shutdown"],
            build: |t, fault| {
                host(t);
                wsl2(t);
                if fault {
                    t.standin = None;
                    t.remove("usr/lib/wsl");
                } else {
                    t.file("usr/lib/wsl/lib/libcuda.so.1", "");
                }
            },
        },
        Case {
            name: "colab-cpu-runtime",
            report: "https://github.com/googlecolab/colabtools/issues/930",
            section: "cuda",
            cause: "hosted.no_gpu_runtime",
            fix_words: &["Change runtime type"],
            build: |t, fault| {
                host(t);
                t.var("COLAB_RELEASE_TAG", "release-colab-20251201-060141-RC00");
                if !fault {
                    gpu_host(t, 0x1eb8);
                }
            },
        },
        Case {
            name: "kaggle-without-accelerator",
            report: "https://www.kaggle.com/docs/notebooks (Settings → Accelerator)",
            section: "cuda",
            cause: "hosted.no_gpu_runtime",
            fix_words: &["Accelerator"],
            build: |t, fault| {
                host(t);
                t.var("KAGGLE_KERNEL_RUN_TYPE", "Interactive");
                if !fault {
                    gpu_host(t, 0x1eb8);
                }
            },
        },
        Case {
            name: "torch-cpu-build",
            report: "https://github.com/pytorch/pytorch/issues/49325",
            section: "cuda",
            cause: "torch.cpu_build",
            fix_words: &["torch==2.11.0", "download.pytorch.org/whl/cu130"],
            build: |t, fault| {
                gpu_host(t, 0x1eb8);
                if fault {
                    t.torch("2.11.0+cpu", None);
                } else {
                    t.torch("2.11.0+cu128", Some("12.8"));
                }
            },
        },
        Case {
            name: "torch-cpu-build-no-driver-library",
            report: "https://github.com/pytorch/pytorch/issues/49325",
            section: "cuda",
            cause: "torch.cpu_build",
            fix_words: &["torch==2.9.1", "download.pytorch.org/whl/cu130"],
            build: |t, fault| {
                // Rebuilt with the module and nodes but no libcuda at all: PyTorch's own
                // build is still the first thing to fix.
                gpu_host(t, 0x2204);
                if fault {
                    t.standin = None;
                    t.torch("2.9.1+cpu", None);
                } else {
                    t.torch("2.9.1+cu128", Some("12.8"));
                }
            },
        },
        Case {
            name: "torch-newer-than-driver",
            report: "https://github.com/lllyasviel/Fooocus/issues/1313",
            section: "cuda",
            cause: "torch.driver_too_old",
            fix_words: &["525", "download.pytorch.org/whl/cu118"],
            build: |t, fault| {
                gpu_host(t, 0x25a2);
                t.file("proc/driver/nvidia/version", &module_line("470.86"));
                t.standin.as_mut().unwrap().version = "470.86".into();
                t.code("STANDIN_CUDA_VERSION", 11040);
                if fault {
                    t.torch("2.1.0+cu121", Some("12.1"));
                } else {
                    t.torch("2.1.0+cu118", Some("11.8"));
                }
            },
        },
        Case {
            name: "rtx5090-torch-cu124",
            report: "https://github.com/pytorch/pytorch/issues/167244",
            section: "cuda",
            cause: "torch.arch_missing",
            fix_words: &["sm_120", "--index-url https://download.pytorch.org/whl/cu1"],
            build: |t, fault| {
                gpu_host(t, 0x2b85);
                t.file("proc/driver/nvidia/version", &module_line("570.124.06"));
                t.standin.as_mut().unwrap().version = "570.124.06".into();
                t.code("STANDIN_CUDA_VERSION", 12080)
                    .code("STANDIN_CC_MAJOR", 12)
                    .code("STANDIN_CC_MINOR", 0);
                if fault {
                    t.torch("2.7.0.dev20250310+cu124", Some("12.4"));
                } else {
                    t.torch("2.7.0+cu128", Some("12.8"));
                }
            },
        },
        Case {
            name: "torch-library-without-the-arch",
            report: "https://github.com/pytorch/pytorch/issues/167244",
            section: "cuda",
            cause: "torch.arch_missing",
            fix_words: &["sm_120", "libtorch_cuda.so", "sm_75, sm_80, sm_86, sm_90 "],
            build: |t, fault| {
                gpu_host(t, 0x2b85);
                t.code("STANDIN_CC_MAJOR", 12).code("STANDIN_CC_MINOR", 0);
                // A build that says CUDA 12.8 (whose matrix has sm_120), read from the
                // library itself: a custom build without it.
                t.torch("2.8.0+cu128", Some("12.8"));
                let archs: &[u32] = if fault {
                    &[75, 80, 86, 90]
                } else {
                    &[75, 80, 86, 90, 100, 120]
                };
                let sp = t.venv();
                let lib = sp.join("torch/lib/libtorch_cuda.so");
                std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
                std::fs::write(lib, fake_cuda_library(archs)).unwrap();
            },
        },
        Case {
            name: "jax-without-cuda-plugin",
            report: "https://github.com/JeffSHF/ColabDock/issues/28",
            section: "cuda",
            cause: "jax.no_cuda_plugin",
            fix_words: &["jax[cuda12]"],
            build: |t, fault| {
                gpu_host(t, 0x1eb8);
                t.file("proc/driver/nvidia/version", &module_line("550.144.03"));
                t.standin.as_mut().unwrap().version = "550.144.03".into();
                t.code("STANDIN_CUDA_VERSION", 12040);
                t.dist("jax", "0.4.35").dist("jaxlib", "0.4.35");
                if !fault {
                    t.dist("jax_cuda12_plugin", "0.4.35")
                        .dist("jax_cuda12_pjrt", "0.4.35");
                }
            },
        },
        Case {
            name: "jax-plugin-version",
            report: "https://github.com/ma-gilles/recovar/issues/64",
            section: "cuda",
            cause: "jax.plugin_mismatch",
            fix_words: &["jax[cuda12]==0.9.0.1"],
            build: |t, fault| {
                gpu_host(t, 0x20b0);
                t.dist("jax", "0.9.0.1").dist("jaxlib", "0.9.0.1");
                let v = if fault { "0.9.2" } else { "0.9.0.1" };
                t.dist("jax_cuda12_plugin", v).dist("jax_cuda12_pjrt", v);
            },
        },
        Case {
            name: "jax-cuda13-plugin-on-a-cuda12-driver",
            report: "https://github.com/JeffSHF/ColabDock/issues/28",
            section: "cuda",
            cause: "jax.driver_too_old",
            fix_words: &["jax[cuda12]", "580"],
            build: |t, fault| {
                gpu_host(t, 0x2330);
                t.file("proc/driver/nvidia/version", &module_line("550.144.03"));
                t.standin.as_mut().unwrap().version = "550.144.03".into();
                t.code("STANDIN_CUDA_VERSION", 12040);
                t.dist("jax", "0.8.0").dist("jaxlib", "0.8.0");
                let major = if fault { 13 } else { 12 };
                t.dist(&format!("jax_cuda{major}_plugin"), "0.8.0")
                    .dist(&format!("jax_cuda{major}_pjrt"), "0.8.0");
            },
        },
        Case {
            name: "old-cudnn-on-ld-library-path",
            report: "https://github.com/jax-ml/jax/issues/22416",
            section: "cuda",
            cause: "libs.shadowed_cudnn",
            fix_words: &["LD_LIBRARY_PATH", "/usr/local/cudnn-9.0/lib", "9.0.0"],
            build: |t, fault| {
                gpu_host(t, 0x20b0);
                t.dist("jax", "0.4.30")
                    .dist("jaxlib", "0.4.30")
                    .dist("jax_cuda12_plugin", "0.4.30")
                    .dist("jax_cuda12_pjrt", "0.4.30")
                    .dist("nvidia_cudnn_cu12", "9.1.1.17");
                let dir = "usr/local/cudnn-9.0/lib";
                t.file(&format!("{dir}/libcudnn.so.9.0.0"), "")
                    .link(&format!("{dir}/libcudnn.so.9"), "libcudnn.so.9.0.0");
                // Another major in the same folder can hide nothing (the loader asks for .so.9).
                t.file("usr/local/cudnn-8/lib/libcudnn.so.8.9.7", "")
                    .link("usr/local/cudnn-8/lib/libcudnn.so.8", "libcudnn.so.8.9.7");
                let d8 = p(t, "usr/local/cudnn-8/lib");
                t.ld_path.push(d8);
                if fault {
                    let d = p(t, dir);
                    t.ld_path.push(d);
                }
            },
        },
        Case {
            name: "stale-libtpu-lockfile",
            report: "https://github.com/jax-ml/jax/issues/10192",
            section: "xla",
            cause: "tpu.lock_stale",
            fix_words: &["rm /tmp/libtpu_lockfile"],
            build: |t, fault| {
                tpu_vm(t);
                t.dist("jax", "0.8.1").dist("libtpu", "0.0.30");
                if fault {
                    t.file("tmp/libtpu_lockfile", "");
                }
            },
        },
        Case {
            name: "tpu-held-by-another-process",
            report: "https://github.com/jax-ml/jax/issues/22070",
            section: "xla",
            cause: "tpu.lock_held",
            fix_words: &["kill 176028"],
            build: |t, fault| {
                tpu_vm(t);
                t.dist("jax", "0.4.30").dist("libtpu", "0.0.20");
                if fault {
                    t.file("tmp/libtpu_lockfile", "");
                    holder(t, 176028, "python3", 11, "/dev/accel0");
                }
            },
        },
        Case {
            name: "tpu-vm-without-libtpu",
            report: "https://github.com/AI-Hypercomputer/RecML/issues/9",
            section: "xla",
            cause: "tpu.no_libtpu",
            fix_words: &["jax[tpu]"],
            build: |t, fault| {
                tpu_vm(t);
                t.dist("jax", "0.6.2")
                    .dist("jaxlib", "0.6.2")
                    .dist("flax", "0.10.6");
                if !fault {
                    t.dist("libtpu", "0.0.17");
                }
            },
        },
        Case {
            name: "torch-xla-without-pjrt-device",
            report: "https://github.com/pytorch/xla/issues/8626",
            section: "xla",
            cause: "torchxla.no_pjrt_device",
            fix_words: &["PJRT_DEVICE=TPU"],
            build: |t, fault| {
                tpu_vm(t);
                t.torch("2.7.0", None)
                    .dist("torch_xla", "2.7.0")
                    .dist("libtpu", "0.0.11");
                if !fault {
                    t.var("PJRT_DEVICE", "TPU");
                }
            },
        },
        Case {
            name: "rocm-not-in-render-group",
            report: "https://github.com/ROCm/ROCm-docker/issues/116",
            section: "wgpu",
            cause: "amd.kfd_permission",
            fix_words: &["usermod -aG render"],
            build: |t, fault| {
                host(t);
                t.uid = Some(4343);
                let mode = if fault { 0o660 } else { 0o666 };
                t.node("dev/kfd", mode, 109)
                    .node("dev/dri/renderD128", 0o666, 109);
            },
        },
        Case {
            name: "render-node-not-in-group",
            report: "https://github.com/ROCm/rocminfo/issues/34",
            section: "wgpu",
            cause: "gpu.render_permission",
            fix_words: &["usermod -aG render"],
            build: |t, fault| {
                host(t);
                t.uid = Some(4343);
                let mode = if fault { 0o660 } else { 0o666 };
                t.node("dev/dri/renderD128", mode, 109);
            },
        },
    ]
}

/// The driver's user-space libraries without its module: cuInit returns `code`.
fn gpu_host_libs(t: &mut Tree, code: &str) {
    t.standin = Some(Standin {
        dir: "usr/lib/x86_64-linux-gnu".into(),
        version: DRIVER.into(),
        codes: vec![("STANDIN_CUINIT", code.into())],
        partial: false,
    });
}
