//! `accel doctor`: why a device is or is not usable, step by step. For every backend an
//! ordered checklist; each check is PASS / FAIL / WARN / SKIP with what was found (paths,
//! versions, environment variables) and, for every FAIL and WARN, the fix in a sentence or two.
//!
//! Every check reads files, the environment and the probes' results; the probes themselves
//! are time-limited (PJRT plugins: `ACCEL_PJRT_TIMEOUT`), so the doctor never hangs.

mod frameworks;
mod host;
mod verdict;

pub use crate::base::check::{Check, Section, Status};
pub use crate::base::facts::Roots;

use std::time::Instant;

use serde::Serialize;

use crate::backend::native::libs::SearchEnv;
use crate::{BackendKind, Device, Tensor};

/// The whole diagnosis.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// Every backend's checklist, in `BackendKind::ALL` order (mps under wgpu's Metal).
    pub sections: Vec<Section>,
    /// The device `Device::best()` picks.
    pub best_device: Device,
    /// Whether a small computation on the best device gave the right answer.
    pub best_device_works: bool,
    /// Seconds the diagnosis took.
    pub seconds: f64,
}

/// Runs every check on this machine.
pub fn diagnose() -> Diagnosis {
    diagnose_at(&Roots::default())
}

/// Runs every check, reading the machine's files under `roots` (a test points them at a
/// tree; the driver libraries and the Python environments are found as usual).
pub fn diagnose_at(roots: &Roots) -> Diagnosis {
    let t0 = Instant::now();
    // A diagnosis probes the machine as it is now: no helper's answer kept from an earlier
    // run (`backend::kept_probes`) is taken, and the new answers are kept instead.
    crate::base::probe_child::fresh_answers();
    // A diagnosis loads every CUDA library it finds, driver or not: a broken or mismatched
    // file must show here (listing devices only finds them).
    #[cfg(feature = "cuda")]
    crate::backend::native::libs::load_without_driver();
    let env = SearchEnv::from_process();
    let machine = crate::base::facts::Machine::read(roots);
    let python = crate::backend::native::pyfacts::Python::read(
        &crate::backend::native::libs::python_environments(&env),
    );
    let mut sections = Vec::new();
    for kind in [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Xla,
        BackendKind::Wgpu,
    ] {
        let t = Instant::now();
        let probe = crate::backend::registry::probe(kind);
        let probe_seconds = t.elapsed().as_secs_f64();
        let available = matches!(probe.availability, crate::Availability::Available { .. });
        let (checks, found, applies) = match kind {
            BackendKind::Cpu => (crate::backend::cpu::doctor::cpu_checks(), Vec::new(), true),
            BackendKind::Cuda => {
                let driver = verdict::driver_facts(probe, roots);
                let mut found = crate::backend::cuda::causes::nvidia(&machine, &driver);
                let gpu = machine.nvidia_gpu() || available;
                if gpu {
                    let fw = frameworks::causes(&machine, &driver, &python);
                    // PyTorch's "driver too old" names the same cause with the framework's
                    // fix: it replaces accel's own.
                    if fw.iter().any(|f| f.cause == "torch.driver_too_old") {
                        found.retain(|f| f.cause != "nvidia.driver_too_old");
                    } else if frameworks::runs_on_driver(&python, &driver) {
                        // accel's own floor (CUDA 12), where the user's PyTorch runs: a warning.
                        for f in found
                            .iter_mut()
                            .filter(|f| f.cause == "nvidia.driver_too_old")
                        {
                            f.status = Status::Warn;
                        }
                    }
                    // A framework's own build (PyTorch without CUDA, JAX without its plugin)
                    // comes before causes that only say the driver's libraries are missing.
                    let soft = ["nvidia.libcuda_missing", "cuda.unavailable"];
                    if found.iter().all(|f| soft.contains(&f.cause)) {
                        let mut fw = fw;
                        fw.append(&mut found);
                        found = fw;
                    } else {
                        found.extend(fw);
                    }
                }
                let applies = gpu || !found.is_empty() || machine.wsl.is_some();
                let checks = crate::backend::cuda::doctor::cuda_checks(&env, &machine, probe);
                (checks, found, applies)
            }
            BackendKind::Xla => {
                let checks = crate::backend::xla::doctor::xla_checks(probe_seconds);
                let libtpu = crate::backend::xla::plugins()
                    .iter()
                    .any(|p| p.path.file_name().is_some_and(|n| n == "libtpu.so"));
                let found = crate::backend::xla::causes::tpu(&machine, &python, libtpu);
                let applies = available || !found.is_empty();
                (checks, found, applies)
            }
            // Every kind is named: a new backend does not compile until it has a section.
            BackendKind::Wgpu | BackendKind::Mps => {
                let mut found = crate::backend::wgpu::causes::gpu_api(&machine);
                if let Some(mac) = crate::backend::wgpu::causes::this_mac(&python) {
                    found.extend(crate::backend::wgpu::causes::apple(&mac));
                }
                let applies = available || !found.is_empty();
                let mps = || crate::backend::registry::probe(BackendKind::Mps);
                let checks = crate::backend::wgpu::doctor::gpu_api_checks(probe, mps);
                (checks, found, applies)
            }
        };
        sections.push(verdict::section(
            kind,
            probe_seconds,
            available,
            applies,
            found,
            checks,
        ));
    }
    // Checks about accel's own settings go with the first section (they apply to every
    // backend), after the probes, which is when untrusted folders have been met.
    if let Some(first) = sections.first_mut() {
        first.checks.extend(
            host::environment_checks()
                .into_iter()
                .map(verdict::with_own_cause),
        );
    }
    let best_device = Device::best();
    let best_device_works = Tensor::ones((2, 2), crate::DType::F32, &best_device)
        .and_then(|t| t.matmul(&t))
        .and_then(|t| t.sum_all())
        .and_then(|t| t.to_vec_f64())
        .is_ok_and(|v| v == [8.0]);
    Diagnosis {
        sections,
        best_device,
        best_device_works,
        seconds: t0.elapsed().as_secs_f64(),
    }
}
