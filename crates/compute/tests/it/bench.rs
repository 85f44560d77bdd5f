//! The benchmark statistics against values worked out by hand (and by NumPy).

use accelkit::bench::{self, Iterations, Stats};
use accelkit::{DType, Device, Tensor};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12 * b.abs().max(1.0)
}

#[test]
fn statistics_of_known_samples() {
    // numpy: np.percentile(range(1, 11), [25, 50, 75]) == [3.25, 5.5, 7.75]
    let s = Stats::from_samples(&[10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]).unwrap();
    assert_eq!(s.samples, 10);
    assert!(close(s.mean_s, 5.5) && close(s.median_s, 5.5));
    assert!(close(s.q1_s, 3.25) && close(s.q3_s, 7.75) && close(s.iqr_s, 4.5));
    assert_eq!((s.min_s, s.max_s), (1.0, 10.0));
    // sample standard deviation of 1..=10 is sqrt(55/6)
    assert!(close(s.stddev_s, (55.0f64 / 6.0).sqrt()));
    assert_eq!(s.outliers, 0);
    let (lo, hi) = s.median_ci95_s;
    assert!(lo <= s.median_s && s.median_s <= hi && lo >= 1.0 && hi <= 10.0);
    assert!(s.noise_warning().unwrap().starts_with("very noisy"));

    // [2, 4, 4, 4, 5, 5, 7, 9]: mean 5, sample sd sqrt(32/7)
    let s = Stats::from_samples(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
    assert!(
        close(s.mean_s, 5.0) && close(s.stddev_s, (32.0f64 / 7.0).sqrt()) && close(s.median_s, 4.5)
    );

    // One far sample is an outlier by Tukey's fences.
    let s = Stats::from_samples(&[1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 5.0]).unwrap();
    assert_eq!(s.outliers, 1);
    assert!(close(s.median_s, 1.0));
    let quiet = Stats::from_samples(&[1.0, 1.01, 0.99, 1.0, 1.02, 0.98]).unwrap();
    assert_eq!(quiet.noise_warning(), None);
    let noisy = Stats::from_samples(&[1.0, 1.2, 0.9, 1.1, 1.0, 0.85, 1.15]).unwrap();
    assert!(
        noisy.noise_warning().unwrap().starts_with("noisy"),
        "{:?}",
        noisy.noise_warning()
    );

    let one = Stats::from_samples(&[0.5]).unwrap();
    assert_eq!(
        (one.median_s, one.stddev_s, one.iqr_s, one.median_ci95_s),
        (0.5, 0.0, 0.0, (0.5, 0.5))
    );
    assert!(Stats::from_samples(&[]).is_none());
}

#[test]
fn peak_formulas_of_known_chips() {
    use accelkit::system::CpuInfo;
    let chip =
        |vendor: &str, family: u32, model: u32, mhz: u64, physical: usize, simd: &[&str]| CpuInfo {
            brand: "test".into(),
            logical_cores: physical * 2,
            physical_cores: physical,
            frequency_mhz: Some(mhz),
            simd: simd.iter().map(|s| s.to_string()).collect(),
            vendor: vendor.into(),
            family,
            model,
        };
    let amd = |f, m, mhz, simd: &[&str]| chip("AuthenticAMD", f, m, mhz, 2, simd);
    // Zen 3 (EPYC 7B13: family 0x19, model 0x01), 2 cores at 2.445 GHz: 2 x 2.445 x 32.
    let zen3 = amd(0x19, 0x01, 2445, &["avx", "avx2", "fma"]);
    let p = bench::cpu_peak(&zen3, 2, DType::F32).unwrap();
    assert!(close(p.gflop_per_s, 156.48), "{p:?}");
    assert_eq!(
        p.formula,
        "2 cores x 2.445 GHz x 32 f32 flops/cycle (Zen 3: two 256-bit FMA units) = 156.5 GFLOP/s"
    );
    assert!(close(
        bench::cpu_peak(&zen3, 2, DType::F64).unwrap().gflop_per_s,
        78.24
    ));
    // bf16 without AVX512_BF16 is converted to f32: the f32 rate.
    assert!(close(
        bench::cpu_peak(&zen3, 2, DType::BF16).unwrap().gflop_per_s,
        156.48
    ));
    // One thread uses one core; SMT siblings do not add FMA units.
    assert!(close(
        bench::cpu_peak(&zen3, 1, DType::F32).unwrap().gflop_per_s,
        78.24
    ));
    assert!(close(
        bench::cpu_peak(&zen3, 4, DType::F32).unwrap().gflop_per_s,
        156.48
    ));
    // Zen 4 (EPYC 9004: model 0x11) has AVX-512 on 256-bit units: the same 32 flops per
    // cycle as AVX2 (the figure that once read 55% for 182 GFLOP/s at 2 x 2.6 GHz: 55% of a
    // peak twice too high; it is 110% of 166.4 at the nominal clock, so the clock under load
    // is higher, which the measured clock shows), and bf16 pair dot products at twice that.
    let zen4 = amd(0x19, 0x11, 2600, &["avx2", "fma", "avx512f", "avx512bf16"]);
    assert!(close(
        bench::cpu_peak(&zen4, 2, DType::F32).unwrap().gflop_per_s,
        166.4
    ));
    assert!(close(
        bench::cpu_peak(&zen4, 2, DType::BF16).unwrap().gflop_per_s,
        332.8
    ));
    // Zen 5 (EPYC 9005: family 0x1a, model 0x02) has two full 512-bit units.
    let zen5 = amd(0x1a, 0x02, 4000, &["avx2", "fma", "avx512f", "avx512bf16"]);
    let p = bench::cpu_peak(&zen5, 2, DType::F32).unwrap();
    assert!(close(p.gflop_per_s, 512.0), "{p:?}");
    assert!(p.formula.contains("Zen 5: two 512-bit FMA units"), "{p:?}");
    assert!(close(
        bench::cpu_peak(&zen5, 2, DType::F64).unwrap().gflop_per_s,
        256.0
    ));
    assert!(close(
        bench::cpu_peak(&zen5, 2, DType::BF16).unwrap().gflop_per_s,
        1024.0
    ));
    // Mobile Zen 5 (model 0x24) has 256-bit datapaths.
    let strix = amd(0x1a, 0x24, 4000, &["avx2", "fma", "avx512f"]);
    assert!(close(
        bench::cpu_peak(&strix, 2, DType::F32).unwrap().gflop_per_s,
        256.0
    ));
    // A 16-core Xeon (Sapphire Rapids: model 0x8f) at 3.0 GHz: 16 x 3.0 x 64 = 3072.
    let spr = chip(
        "GenuineIntel",
        6,
        0x8f,
        3000,
        16,
        &["avx2", "fma", "avx512f"],
    );
    assert!(close(
        bench::cpu_peak(&spr, 16, DType::F32).unwrap().gflop_per_s,
        3072.0
    ));
    // A client core with AVX-512 (Tiger Lake: model 0x8c) has one 512-bit unit.
    let tgl = chip(
        "GenuineIntel",
        6,
        0x8c,
        3000,
        4,
        &["avx2", "fma", "avx512f"],
    );
    assert!(close(
        bench::cpu_peak(&tgl, 4, DType::F32).unwrap().gflop_per_s,
        384.0
    ));
    // A Sapphire Rapids Xeon in a VM that reports Rocket Lake's model (0xa7), as one measured
    // here did: AVX512-FP16 says it is a Xeon with two 512-bit units (2 x 4.0 x 64 = 512).
    let vm = chip(
        "GenuineIntel",
        6,
        0xa7,
        4000,
        2,
        &["avx2", "fma", "avx512f", "avx512bf16", "avx512fp16"],
    );
    let p = bench::cpu_peak(&vm, 2, DType::F32).unwrap();
    assert!(close(p.gflop_per_s, 512.0), "{}", p.formula);
    assert!(
        p.formula.contains("Sapphire Rapids or newer"),
        "{}",
        p.formula
    );
    // The same Xeon with AMX (Sapphire/Emerald Rapids: AMX-BF16 and AMX-INT8): bf16's peak
    // is the tile unit's, 1024 flops per cycle per core (2 x 2.9 x 1024 = 5939.2), so that
    // PyTorch's oneDNN on the tiles (842 GFLOP/s measured on such a 2-vCPU machine, 114% of
    // the vector units' 737 before) stays under 100%; the formula names both units. accel's
    // bf16 kernel runs on the tiles there, so the formula gives no second figure for it.
    let amx = chip(
        "GenuineIntel",
        6,
        0xcf,
        2900,
        2,
        &[
            "avx2",
            "fma",
            "avx512f",
            "avx512bf16",
            "avx512fp16",
            "amx-tile",
            "amx-bf16",
            "amx-int8",
        ],
    );
    let p = bench::cpu_peak(&amx, 2, DType::BF16).unwrap();
    assert!(close(p.gflop_per_s, 5939.2), "{}", p.formula);
    assert!(842.0 / p.gflop_per_s < 1.0);
    assert!(
        p.formula.contains("1024 bf16 flops/cycle (AMX tiles"),
        "{}",
        p.formula
    );
    assert!(!p.formula.contains("accel's"), "{}", p.formula);
    // f32 and f64 are the FMA units' whatever the tiles do.
    assert!(close(
        bench::cpu_peak(&amx, 2, DType::F32).unwrap().gflop_per_s,
        371.2
    ));
    // f16 without AMX-FP16: AVX512-FP16's native f16 FMAs, twice f32 (742.4); accel's f16
    // kernel computes in f32 (371.2), which the formula says.
    let p = bench::cpu_peak(&amx, 2, DType::F16).unwrap();
    assert!(close(p.gflop_per_s, 742.4), "{}", p.formula);
    assert!(
        p.formula
            .contains("f16 kernel computes in f32: 64 flops/cycle = 371.2"),
        "{}",
        p.formula
    );
    // Granite Rapids adds AMX-FP16: f16's peak is the tiles' too.
    let mut gnr = amx.clone();
    gnr.simd.push("amx-fp16".into());
    assert!(close(
        bench::cpu_peak(&gnr, 2, DType::F16).unwrap().gflop_per_s,
        5939.2
    ));
    // Without AMX or AVX512-FP16 (Zen 4), f16 is converted to f32: f32's rate, one unit.
    let p = bench::cpu_peak(&zen4, 2, DType::F16).unwrap();
    assert!(
        close(p.gflop_per_s, 166.4) && !p.formula.contains("accel's"),
        "{}",
        p.formula
    );
    // Unknown CPUs, integers and a missing clock: no peak, rather than a guess.
    assert!(bench::cpu_peak(&amd(0x1b, 0x00, 3000, &["avx2", "fma"]), 2, DType::F32).is_none());
    assert!(bench::cpu_peak(&chip("", 0, 0, 3000, 2, &["avx2", "fma"]), 2, DType::F32).is_none());
    assert!(bench::cpu_peak(&zen3, 2, DType::I64).is_none());
    let mut unknown = zen3.clone();
    unknown.frequency_mhz = None;
    assert!(bench::cpu_peak(&unknown, 2, DType::F32).is_none());
    // This machine's own figure uses the table and says where its clock came from.
    if let Some(p) = bench::peak(&Device::Cpu, DType::F32) {
        assert!(
            p.gflop_per_s > 0.0 && p.formula.contains("flops/cycle"),
            "{p:?}"
        );
        assert!(p.formula.contains("clock"), "{p:?}");
    }
    // The measured clock is a plausible one (0.4 to 7 GHz) where it can be measured.
    if let Some(mhz) = bench::measured_cpu_clock_mhz() {
        assert!((400..7000).contains(&mhz), "{mhz} MHz");
    }
}

#[test]
fn gpu_peak_formulas_of_known_chips() {
    // H100/H200 SXM: 132 SMs; at 1.83 GHz the tensor-core rate gives NVIDIA's published
    // dense 989 TFLOP/s bf16/f16 and 495 TF32; FP32 and FP64 are 256 flops/clock/SM.
    let h = |dt, tf32| {
        bench::cuda_peak((9, 0), 132, 1830, dt, tf32)
            .unwrap()
            .gflop_per_s
    };
    assert!(close(h(DType::BF16, false), 989_429.76));
    assert!(close(h(DType::F16, false), 989_429.76));
    assert!(close(h(DType::F32, true), 494_714.88));
    assert!(close(h(DType::F32, false), 61_839.36));
    assert!(close(h(DType::F64, false), 61_839.36));
    // A100: 108 SMs at 1.41 GHz: 312 TFLOP/s f16, 156 TF32, 19.5 f32 and f64 tensor.
    let a = |dt, tf32| {
        bench::cuda_peak((8, 0), 108, 1410, dt, tf32)
            .unwrap()
            .gflop_per_s
    };
    assert!(close(a(DType::F16, false), 311_869.44));
    assert!(close(a(DType::F32, true), 155_934.72));
    assert!(close(a(DType::F32, false), 19_491.84));
    // T4 (Colab's free GPU): 40 SMs at 1.59 GHz: NVIDIA's 65 TFLOP/s f16 and 8.1 f32. No
    // bf16 or TF32 tensor cores: bf16 runs at the f32 rate, and allowing TF32 changes nothing.
    let t = |dt, tf32| bench::cuda_peak((7, 5), 40, 1590, dt, tf32).unwrap();
    assert!(close(t(DType::F16, false).gflop_per_s, 65_126.4));
    assert!(close(t(DType::F32, false).gflop_per_s, 8_140.8));
    assert!(close(t(DType::F64, false).gflop_per_s, 254.4));
    let bf = t(DType::BF16, false);
    assert!(close(bf.gflop_per_s, 8_140.8), "{bf:?}");
    assert!(
        bf.formula.contains("no bf16 tensor cores"),
        "{}",
        bf.formula
    );
    let tf = t(DType::F32, true);
    assert!(close(tf.gflop_per_s, 8_140.8), "{tf:?}");
    assert!(
        tf.formula.contains("allow_tf32 changes nothing"),
        "{}",
        tf.formula
    );
    // RTX PRO 6000 Blackwell (12.0, Colab's largest): 188 SMs at 2.617 GHz: 504 TFLOP/s f16.
    let r = bench::cuda_peak((12, 0), 188, 2617, DType::F16, false).unwrap();
    assert!(close(r.gflop_per_s, 503_803.904), "{r:?}");
    // V100: 80 SMs at 1.53 GHz: 125 TFLOP/s f16; L4 (8.9): 58 SMs at 2.04 GHz: 121.
    assert!(close(
        bench::cuda_peak((7, 0), 80, 1530, DType::F16, false)
            .unwrap()
            .gflop_per_s,
        125_337.6
    ));
    assert!(close(
        bench::cuda_peak((8, 9), 58, 2040, DType::F16, false)
            .unwrap()
            .gflop_per_s,
        121_159.68
    ));
    // Every architecture from Volta to Blackwell has a row; Pascal and unknown ones none.
    for cc in [
        (7, 0),
        (7, 5),
        (8, 0),
        (8, 6),
        (8, 7),
        (8, 9),
        (9, 0),
        (10, 0),
        (10, 3),
        (12, 0),
        (12, 1),
    ] {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            assert!(
                bench::cuda_peak(cc, 10, 1000, dt, false).is_some(),
                "{cc:?} {dt}"
            );
        }
    }
    assert!(bench::cuda_peak((6, 0), 56, 1480, DType::F32, false).is_none());
    assert!(bench::cuda_peak((13, 0), 56, 1480, DType::F32, false).is_none());
    let p = bench::cuda_peak((9, 0), 132, 1980, DType::BF16, false).unwrap();
    assert!(
        p.formula.contains("132 SMs x 1.980 GHz x 4096"),
        "{}",
        p.formula
    );
    // Memory: H100 SXM's 5120-bit HBM3 at 2619 MHz is its published 3.35 TB/s; H200's
    // 6144-bit HBM3e at 3201 MHz gives 4.9 TB/s (published: 4.8).
    assert!(close(bench::gpu_memory_peak(5120, 2619).gb_per_s, 3352.32));
    assert!(close(bench::gpu_memory_peak(6144, 3201).gb_per_s, 4916.736));
    assert!(bench::gpu_memory_peak(6144, 3201)
        .formula
        .contains("6144-bit"));
    assert!(bench::memory_peak(&Device::Cpu).is_none());
    // PCIe, one direction: gen3 x16 is 15.75 GB/s (the figure NVIDIA quotes as 16 GB/s),
    // gen4 x16 31.5, gen5 x16 63.0 (H100/H200 PCIe and SXM hosts), gen6 x16 121.
    assert!((bench::pcie_peak(3, 16).unwrap().gb_per_s - 15.75).abs() < 0.01);
    assert!((bench::pcie_peak(5, 16).unwrap().gb_per_s - 63.0).abs() < 0.02);
    assert!(close(
        bench::pcie_peak(3, 16).unwrap().gb_per_s,
        16.0 * 8.0 * 128.0 / 130.0 / 8.0
    ));
    assert!(close(
        bench::pcie_peak(4, 16).unwrap().gb_per_s,
        16.0 * 16.0 * 128.0 / 130.0 / 8.0
    ));
    assert!(close(
        bench::pcie_peak(5, 16).unwrap().gb_per_s,
        16.0 * 32.0 * 128.0 / 130.0 / 8.0
    ));
    assert!(close(bench::pcie_peak(6, 16).unwrap().gb_per_s, 121.0));
    assert!(close(bench::pcie_peak(1, 1).unwrap().gb_per_s, 0.25));
    let p = bench::pcie_peak(5, 16).unwrap();
    assert!(
        p.formula.contains("gen5 x16") && p.formula.contains("128/130"),
        "{}",
        p.formula
    );
    assert!(bench::pcie_peak(0, 16).is_none() && bench::pcie_peak(7, 16).is_none());
    assert!(bench::copy_peak(&Device::Cpu, bench::CopyKind::H2d).is_none());
    // Unknown architectures (Pascal) and integer dtypes have no peak.
    assert!(bench::cuda_peak((6, 1), 80, 1530, DType::F32, false).is_none());
    assert!(bench::cuda_peak((9, 0), 132, 1980, DType::I32, false).is_none());
}

#[test]
fn a_benchmark_run_checks_its_answer() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let (r, c) = bench::matmul(&Device::Cpu, 48, DType::F32, 1, Iterations::Fixed(3))?;
    assert_eq!(c.dims(), [48, 48]);
    assert_eq!(r.stats.samples, 3);
    assert!(r.max_rel_error < bench::tolerance(DType::F32));
    assert!(r.gflop_per_s > 0.0 && r.first_run_s > 0.0);
    // The error measure catches a wrong result.
    let a = accelkit::Tensor::ones((4, 4), DType::F32, &Device::Cpu)?;
    let wrong = accelkit::Tensor::zeros((4, 4), DType::F32, &Device::Cpu)?;
    assert!(bench::sampled_error(&a, &a, &wrong, 8)? > 0.5);
    let e = bench::elementwise(
        &Device::Cpu,
        bench::ElementwiseOp::Add,
        1000,
        DType::F64,
        1,
        Iterations::Fixed(2),
    )?;
    assert_eq!(e.max_rel_error, 0.0);
    assert!(e.gb_per_s > 0.0);
    // exp and sum, checked against f64 on the host: f32's exp within a few units of its
    // last place, a sum of 10^5 values within a few of f32's (relative to the sum of sizes);
    // the bytes counted are two tensors for exp, one for sum.
    for (op, tensors, tol) in [
        (bench::ElementwiseOp::Exp, 2.0, 1e-6),
        (bench::ElementwiseOp::Sum, 1.0, 1e-6),
    ] {
        let size = 100_000;
        let e = bench::elementwise(&Device::Cpu, op, size, DType::F32, 1, Iterations::Fixed(2))?;
        assert!(e.max_rel_error < tol, "{op:?}: {}", e.max_rel_error);
        let bytes = e.gb_per_s * 1e9 * e.stats.median_s;
        let want = tensors * size as f64 * 4.0;
        assert!(
            (bytes - want).abs() < 1.0,
            "{op:?}: {bytes} bytes, want {want}"
        );
    }
    Ok(())
}

#[test]
fn adaptive_iterations_reach_the_minimum_time_and_count() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let few = Iterations::Adaptive { min_time_s: 0.0 };
    let (r, _) = bench::matmul(&Device::Cpu, 8, DType::F32, 0, few)?;
    assert_eq!(r.stats.samples, bench::ADAPTIVE_MIN_SAMPLES);
    let timed = Iterations::Adaptive { min_time_s: 0.05 };
    let (r, _) = bench::matmul(&Device::Cpu, 64, DType::F32, 0, timed)?;
    let measured = r.stats.mean_s * r.stats.samples as f64;
    assert!(
        measured >= 0.05 || r.stats.samples == bench::ADAPTIVE_MAX_SAMPLES,
        "{:?}",
        r.stats
    );
    assert!(r.stats.samples > bench::ADAPTIVE_MIN_SAMPLES);
    Ok(())
}

/// The keys of a JSON object, in the order they are written.
fn keys(v: &serde_json::Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn a_report_reads_back_equal_with_its_keys_in_place() -> accelkit::Result<()> {
    use bench::{Comparison, CopyRun, ElementwiseRun, MatmulRun, Report};
    let (m, _) = bench::matmul(&Device::Cpu, 16, DType::F64, 0, Iterations::Fixed(3))?;
    let matmul = Report {
        benchmark: "matmul".to_string(),
        results: vec![m.clone()],
        comparison: Some(vec![Comparison {
            run: "cpu f64 size 16".to_string(),
            median_s: m.stats.median_s,
            baseline_median_s: None,
            speedup: None,
            against: Some("numpy 2.4.6".to_string()),
        }]),
    };
    let text = serde_json::to_string_pretty(&matmul).unwrap();
    assert_eq!(
        serde_json::from_str::<Report<MatmulRun>>(&text).unwrap(),
        matmul
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&v), ["benchmark", "results", "comparison"]);
    assert_eq!(
        keys(&v["results"][0]),
        [
            "device",
            "dtype",
            "size",
            "warmup",
            "first_run_s",
            "stats",
            "gflop_per_s",
            "peak",
            "percent_of_peak",
            "max_rel_error",
            "device_stats"
        ]
    );
    assert_eq!(
        keys(&v["results"][0]["stats"]),
        [
            "samples",
            "mean_s",
            "median_s",
            "min_s",
            "max_s",
            "stddev_s",
            "q1_s",
            "q3_s",
            "iqr_s",
            "median_ci95_s",
            "outliers"
        ]
    );
    assert_eq!(
        keys(&v["comparison"][0]),
        ["run", "median_s", "baseline_median_s", "speedup", "against"]
    );
    assert_eq!(
        (&v["results"][0]["device"], &v["results"][0]["dtype"]),
        (&"cpu".into(), &"f64".into())
    );

    let e = bench::elementwise(
        &Device::Cpu,
        bench::ElementwiseOp::Scale,
        1000,
        DType::BF16,
        0,
        Iterations::Fixed(2),
    )?;
    let elementwise = Report {
        benchmark: "elementwise".to_string(),
        results: vec![e],
        comparison: None,
    };
    let text = serde_json::to_string(&elementwise).unwrap();
    assert_eq!(
        serde_json::from_str::<Report<ElementwiseRun>>(&text).unwrap(),
        elementwise
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&v), ["benchmark", "results"], "no comparison, no key");
    assert_eq!(v["results"][0]["op"], "scale");

    let c = bench::copy(
        &Device::Cpu,
        bench::CopyKind::D2h,
        bench::HostBuffer::Pageable,
        4096,
        0,
        Iterations::Fixed(2),
    )?;
    let copy = Report {
        benchmark: "copy".to_string(),
        results: vec![c],
        comparison: None,
    };
    let text = serde_json::to_string(&copy).unwrap();
    assert_eq!(
        serde_json::from_str::<Report<CopyRun>>(&text).unwrap(),
        copy
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (&v["results"][0]["kind"], &v["results"][0]["host_memory"]),
        (&"d2h".into(), &"pageable".into())
    );
    Ok(())
}

/// A copy run as reports wrote it before the host-memory choice and the copy peaks: no
/// `host_memory`, `peak`, `percent_of_peak` or `device_stats`.
const OLD_COPY_REPORT: &str = r#"{"schema_version": 1, "kind": "bench", "benchmark": "copy", "results": [
  {"device": "cpu", "kind": "h2d", "size": 1024, "dtype": "f32", "warmup": 3,
   "first_run_s": 1e-5,
   "stats": {"samples": 5, "mean_s": 2e-6, "median_s": 2e-6, "min_s": 1e-6, "max_s": 3e-6,
             "stddev_s": 1e-6, "q1_s": 1.5e-6, "q3_s": 2.5e-6, "iqr_s": 1e-6,
             "median_ci95_s": [1e-6, 3e-6], "outliers": 0},
   "gb_per_s": 0.5, "max_rel_error": 0.0}]}"#;

#[test]
fn an_older_report_reads_with_defaults_and_a_broken_one_says_what_is_wrong() {
    use bench::{CopyRun, HostBuffer, MatmulRun, Report};
    let old: Report<CopyRun> = serde_json::from_str(OLD_COPY_REPORT).unwrap();
    let r = &old.results[0];
    // Copies were all pageable before the choice existed; the peaks were not known.
    assert_eq!(r.host_memory, HostBuffer::Pageable);
    assert_eq!((r.peak.clone(), r.percent_of_peak), (None, None));
    assert_eq!(r.device_stats, None);
    assert_eq!(
        (r.device, r.size, r.stats.median_s),
        (Device::Cpu, 1024, 2e-6)
    );
    assert_eq!(old.comparison, None);

    // A report without runs has none; one whose runs lack a measured field is refused,
    // naming the field.
    let empty: Report<MatmulRun> = serde_json::from_str(r#"{"benchmark": "matmul"}"#).unwrap();
    assert!(empty.results.is_empty());
    let e = serde_json::from_str::<Report<CopyRun>>(
        &OLD_COPY_REPORT.replace("\"median_s\": 2e-6, ", ""),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("missing field `median_s`"), "{e}");
    let e =
        serde_json::from_str::<Report<CopyRun>>(&OLD_COPY_REPORT.replace("\"cpu\"", "\"tpu:0\""))
            .unwrap_err()
            .to_string();
    assert!(e.contains("tpu"), "{e}");

    // JSON has no infinity: serde_json writes an infinite rate as null, which reads as NaN.
    let inf =
        serde_json::from_str::<Report<CopyRun>>(&OLD_COPY_REPORT.replace("0.5", "null")).unwrap();
    assert!(inf.results[0].gb_per_s.is_nan());
}

#[test]
fn a_batched_matmul_benchmark_counts_every_product_and_checks_the_first() {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let (run, c) = bench::matmul_batched(
        &Device::Cpu,
        3,
        24,
        DType::F32,
        1,
        bench::Iterations::Fixed(3),
    )
    .unwrap();
    assert_eq!((run.batch, run.size), (3, 24));
    assert_eq!(c.dims(), &[3, 24, 24]);
    // Three products of 2 * 24^3 flops in the median time.
    let want = 3.0 * 2.0 * 24f64.powi(3) / run.stats.median_s / 1e9;
    assert!(close(run.gflop_per_s, want), "{} {want}", run.gflop_per_s);
    assert!(run.max_rel_error < 1e-5, "{}", run.max_rel_error);
    // The JSON names the batch; a plain product leaves it out (old reports still read).
    let v = serde_json::to_value(&run).unwrap();
    assert_eq!(v["batch"], 3);
    let (one, _) =
        bench::matmul(&Device::Cpu, 8, DType::F32, 1, bench::Iterations::Fixed(2)).unwrap();
    assert!(serde_json::to_value(&one).unwrap().get("batch").is_none());
}

#[test]
fn a_rectangular_benchmark_multiplies_by_b_transposed_when_asked() {
    let _serial = crate::common::lock();
    let fixed = bench::Iterations::Fixed(2);
    // M, N, K all different: a B stored N x K but not transposed on the device would not
    // multiply (K x ... by N x K), and one read as K x N for the check would fail it.
    let (run, c) =
        bench::matmul_shaped(&Device::Cpu, 2, [5, 7, 3], true, DType::F64, 1, fixed).unwrap();
    assert_eq!(c.dims(), &[2, 5, 7]);
    assert_eq!(
        (run.size, run.shape, run.b_transposed),
        (5, Some([5, 7, 3]), true)
    );
    assert_eq!(run.mnk(), [5, 7, 3]);
    assert!(run.max_rel_error < 1e-12, "{}", run.max_rel_error);
    let want = 2.0 * 2.0 * (5 * 7 * 3) as f64 / run.stats.median_s / 1e9;
    assert!(close(run.gflop_per_s, want), "{} {want}", run.gflop_per_s);
    let v = serde_json::to_value(&run).unwrap();
    assert_eq!(
        (v["shape"].clone(), v["b_transposed"].clone()),
        (serde_json::json!([5, 7, 3]), serde_json::json!(true))
    );
    // Square and as stored: the JSON is what it was before shapes existed.
    let (sq, _) =
        bench::matmul_shaped(&Device::Cpu, 1, [6; 3], false, DType::F32, 1, fixed).unwrap();
    let v = serde_json::to_value(&sq).unwrap();
    assert!(
        v.get("shape").is_none() && v.get("b_transposed").is_none(),
        "{v}"
    );
    assert_eq!((sq.size, sq.mnk()), (6, [6; 3]));
    // Square and transposed: the check uses the transposed B too.
    let (t, _) = bench::matmul_shaped(&Device::Cpu, 1, [9; 3], true, DType::F64, 1, fixed).unwrap();
    assert!(t.max_rel_error < 1e-12 && t.shape.is_none() && t.b_transposed);

    // Operands the caller chose: any M x K by K x N, a transposed view included, checked
    // against an f64 loop here; shapes that do not chain are an error, not a panic.
    let a = Tensor::from_vec(
        (0..12).map(|i| i as f64 - 5.0).collect(),
        (4, 3),
        &Device::Cpu,
    )
    .unwrap();
    let w = Tensor::from_vec(
        (0..15).map(|i| (i * 7 % 11) as f64).collect(),
        (5, 3),
        &Device::Cpu,
    )
    .unwrap();
    let (r, c) = bench::matmul_with(&Device::Cpu, &a, &w.t().unwrap(), 0, fixed).unwrap();
    assert_eq!((r.shape, r.size), (Some([4, 5, 3]), 4));
    assert!(r.max_rel_error < 1e-12, "{}", r.max_rel_error);
    let (av, wv, cv) = (
        a.to_vec_f64().unwrap(),
        w.to_vec_f64().unwrap(),
        c.to_vec_f64().unwrap(),
    );
    for i in 0..4 {
        for j in 0..5 {
            let dot: f64 = (0..3).map(|p| av[i * 3 + p] * wv[j * 3 + p]).sum();
            assert_eq!(cv[i * 5 + j], dot, "({i}, {j})");
        }
    }
    let e = bench::matmul_with(&Device::Cpu, &a, &w, 0, fixed)
        .unwrap_err()
        .to_string();
    assert!(e.contains("M x K by a K x N"), "{e}");
}
