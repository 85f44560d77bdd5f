//! `accel doctor`: why a device is or is not usable, step by step. For every backend an
//! ordered checklist; each check is PASS / FAIL / WARN / SKIP with what was found (paths,
//! versions, environment variables) and, for every FAIL and WARN, the fix in a sentence or two.
//!
//! Every check reads files, the environment and the probes' results; the probes themselves
//! are time-limited (PJRT plugins: `ACCEL_PJRT_TIMEOUT`), so the doctor never hangs.

mod check;
mod gpu_api;
mod host;
mod nvidia;
mod xla;

pub use check::{Check, Status};

use std::time::Instant;

use serde::Serialize;

use crate::backend::native::libs::SearchEnv;
use crate::{BackendKind, Device, Tensor};

/// One backend's checklist.
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// The backend.
    pub backend: BackendKind,
    /// Seconds its probe took (the first time it ran in this process).
    pub probe_seconds: f64,
    /// The checks, in order.
    pub checks: Vec<Check>,
}

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

/// Runs every check.
pub fn diagnose() -> Diagnosis {
    let t0 = Instant::now();
    // A diagnosis probes the machine as it is now: no helper's answer kept from an earlier
    // run (`backend::kept_probes`) is taken, and the new answers are kept instead.
    crate::base::probe_child::fresh_answers();
    // A diagnosis loads every CUDA library it finds, driver or not: a broken or mismatched
    // file must show here (listing devices only finds them).
    #[cfg(feature = "cuda")]
    crate::backend::native::libs::load_without_driver();
    let env = SearchEnv::from_process();
    let mut sections = Vec::new();
    for kind in [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Xla,
        BackendKind::Wgpu,
    ] {
        let t = Instant::now();
        crate::backend::registry::probe(kind);
        let probe_seconds = t.elapsed().as_secs_f64();
        let checks = match kind {
            BackendKind::Cpu => host::cpu_checks(),
            BackendKind::Cuda => nvidia::cuda_checks(&env),
            BackendKind::Xla => xla::xla_checks(probe_seconds),
            _ => gpu_api::gpu_api_checks(),
        };
        sections.push(Section {
            backend: kind,
            probe_seconds,
            checks,
        });
    }
    // Checks about accel's own settings go with the first section (they apply to every
    // backend), after the probes, which is when untrusted folders have been met.
    if let Some(first) = sections.first_mut() {
        first.checks.extend(host::environment_checks());
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
