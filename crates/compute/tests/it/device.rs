//! Device names, the best-device choice, and availability reported as data.

use accelkit::{Availability, Device, Error};

#[test]
fn parse_and_display_round_trip() {
    let cases = [
        ("cpu", Device::Cpu, "cpu"),
        ("CPU", Device::Cpu, "cpu"),
        ("cuda", Device::Cuda(0), "cuda:0"),
        ("cuda:1", Device::Cuda(1), "cuda:1"),
        ("mps", Device::Mps, "mps"),
        ("xla", Device::Xla(0), "xla:0"),
        ("xla:0", Device::Xla(0), "xla:0"),
        ("wgpu:0", Device::Wgpu(0), "wgpu:0"),
        (" wgpu:2 ", Device::Wgpu(2), "wgpu:2"),
    ];
    for (text, dev, shown) in cases {
        let parsed: Device = text.parse().unwrap();
        assert_eq!(parsed, dev, "{text}");
        assert_eq!(parsed.to_string(), shown);
        assert_eq!(shown.parse::<Device>().unwrap(), dev);
    }
    assert_eq!(Device::Cuda(3).kind(), "cuda");
    assert_eq!(Device::Cuda(3).index(), Some(3));
    assert_eq!(Device::Cpu.index(), None);
}

#[test]
fn bad_names_get_helpful_errors() {
    for (text, needle) in [
        ("tpu", "through XLA"),
        ("gpu", "say which kind of GPU"),
        ("metal", "wgpu:N"),
        ("cuda:x", "'x' is not a device index"),
        ("cuda:-1", "not a device index"),
        ("cpu:1", "one cpu device"),
        ("mps:1", "one mps device"),
        ("", "empty device name"),
        (
            "quantum",
            "expected cpu, cuda, cuda:N, mps, xla, xla:N, xla:PLATFORM:N",
        ),
        (
            "xla:quantum:0",
            "no quantum device number 0 among the XLA devices",
        ),
    ] {
        let e = text.parse::<Device>().unwrap_err();
        assert!(matches!(e, Error::UnknownDevice { .. }), "{text}");
        let msg = e.to_string();
        assert!(msg.contains(needle), "{text}: {msg}");
        assert!(
            msg.starts_with(&format!("unknown device '{text}'")),
            "{msg}"
        );
    }
}

#[test]
fn best_follows_the_seeds_order_and_falls_back_to_cpu() {
    let best = Device::best();
    assert!(best.is_available());
    // The chosen device is the first available in cuda, mps, xla, wgpu, cpu order, where
    // XLA's own CPU platform and software GPU adapters (lavapipe) do not count.
    let xla_cpu: Vec<Device> = (0..)
        .map_while(|i| accelkit::xla::platform_device("cpu", i))
        .collect();
    let order = ["cuda", "mps", "xla", "wgpu", "cpu"];
    let probes = accelkit::devices();
    let first = order
        .iter()
        .find(|k| {
            probes.iter().any(|p| {
                p.backend == **k
                    && p.devices().iter().any(|d| {
                        let software =
                            matches!(d.device, Device::Wgpu(i) if accelkit::wgpu::is_software(i));
                        !xla_cpu.contains(&d.device) && !software
                    })
            })
        })
        .unwrap();
    assert_eq!(best.kind(), *first);
    assert!(!xla_cpu.contains(&best), "never XLA's CPU platform");
    let list = accelkit::available_devices();
    assert_eq!(list.last(), Some(&Device::Cpu));
}

#[test]
fn every_backend_reports_itself() {
    let probes = accelkit::devices();
    let names: Vec<_> = probes.iter().map(|p| p.backend).collect();
    assert_eq!(names, ["cpu", "cuda", "mps", "xla", "wgpu"]);
    let cpu = &probes[0];
    assert!(cpu.is_available());
    assert_eq!(cpu.devices()[0].device, Device::Cpu);
    assert!(cpu.devices()[0].memory_total_bytes.unwrap() > 0);
    for p in &probes[1..] {
        match &p.availability {
            Availability::Available { devices } => assert!(!devices.is_empty()),
            Availability::Unavailable { reason, hint } => {
                assert!(!reason.is_empty() && !hint.is_empty(), "{}", p.backend);
            }
        }
    }
    // The CUDA API agrees with the probe, device by device: ordinals 0..n, each usable.
    let cuda: Vec<Device> = probes[1].devices().iter().map(|d| d.device).collect();
    assert_eq!(
        cuda,
        (0..cuda.len()).map(Device::Cuda).collect::<Vec<_>>(),
        "CUDA ordinals are dense"
    );
    assert_eq!(accelkit::cuda::device_count(), cuda.len());
    for d in &cuda {
        assert!(d.check().is_ok(), "{d}");
    }
    assert_eq!(
        accelkit::cuda::current_device().ok().map(Device::Cuda),
        cuda.first().copied()
    );
    if !accelkit::mps::is_available() {
        assert!(!accelkit::mps::is_built() || cfg!(target_os = "macos"));
    }
    assert_eq!(
        accelkit::xla::device().is_ok(),
        !accelkit::xla::devices().is_empty()
    );
}

#[test]
fn a_device_that_does_not_exist_lists_what_does() {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    // One past the last GPU, however many this machine has.
    let n = accelkit::cuda::device_count();
    let missing = Device::Cuda(n);
    let e = missing.check().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("device cuda:{n} is not available: ")),
        "{msg}"
    );
    assert!(
        msg.contains("available devices: ") && msg.contains("cpu"),
        "{msg}"
    );
    for i in 0..n {
        assert!(msg.contains(&format!("cuda:{i}")), "{msg} lists cuda:{i}");
    }
    assert!(missing.synchronize().is_err());
    assert!(missing.name().is_err());
    let xla_missing = Device::Xla(accelkit::xla::devices().len());
    assert!(accelkit::Tensor::zeros(3, accelkit::DType::F32, &xla_missing).is_err());
    assert!(Device::Cpu.synchronize().is_ok());
    assert!(!Device::Cpu.name().unwrap().is_empty());
    assert_eq!(Device::cuda_if_available(n), Device::Cpu);
}
