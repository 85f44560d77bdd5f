//! Each section's verdict: usable, or not because of one named cause, which comes first;
//! the checks that fail only because of it are marked as its consequences.

use crate::base::check::{check, Check, Section, Status};
use crate::base::finding::{Driver, Finding};
use crate::probe::Probe;
use crate::{Availability, BackendKind};

/// What the CUDA probe and the driver libraries said, for the causes.
/// Paths are shown as the machine knows them: under `roots.rootfs` when a test moved it.
pub(super) fn driver_facts(probe: &Probe, roots: &crate::base::facts::Roots) -> Driver {
    let mut d = Driver::default();
    if let Some(l) = crate::cuda::libraries()
        .iter()
        .find(|l| l.name == crate::backend::native::libs::LibName::Cuda)
    {
        if l.is_loaded() {
            let p = l
                .path
                .as_deref()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
            d.libcuda = p.as_ref().map(|p| match p.strip_prefix(&roots.rootfs) {
                Ok(rest) if roots.rootfs != std::path::Path::new("/") => {
                    format!("/{}", rest.display())
                }
                _ => p.display().to_string(),
            });
            d.libcuda_version = p.as_ref().and_then(|p| {
                let name = p.file_name()?.to_string_lossy().into_owned();
                let v = name.split_once(".so.")?.1.to_string();
                (v.matches('.').count() >= 1 && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
                    .then_some(v)
            });
        } else {
            d.libcuda_problem = l.problem.clone();
        }
    }
    d.cuda_version = crate::backend::native::libs::driver_cuda_version();
    match &probe.availability {
        Availability::Available { devices } => {
            d.ccs = devices
                .iter()
                .filter_map(|x| x.caps.compute_capability)
                .collect();
            // A context and a small computation: what a framework does first.
            let dev = crate::Device::Cuda(0);
            if let Err(e) = crate::Tensor::ones((2, 2), crate::DType::F32, &dev)
                .and_then(|t| t.matmul(&t))
                .and_then(|t| t.to_vec_f64())
            {
                d.compute_error = Some(e.to_string());
            }
        }
        Availability::Unavailable { reason, hint } => {
            d.unavailable = Some(reason.clone());
            d.unavailable_hint = Some(hint.clone());
        }
    }
    if d.libcuda.is_some()
        || crate::cuda::libraries()
            .iter()
            .any(|l| l.name == crate::backend::native::libs::LibName::Nvml)
    {
        match crate::telemetry::nvidia::nvml_state() {
            Ok(v) => d.nvml_version = v,
            Err(e) => d.nvml_error = Some(e.to_string()),
        }
        d.mig_enabled = d.nvml_error.is_none() && crate::telemetry::nvidia::mig_enabled();
    }
    d
}

/// A check that fails or warns names itself as its cause (no deeper one is known).
pub(super) fn with_own_cause(mut c: Check) -> Check {
    if matches!(c.status, Status::Fail | Status::Warn) && c.cause.is_none() {
        c.cause = Some(c.id);
    }
    c
}

fn verdict_id(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Cpu => "cpu.verdict",
        BackendKind::Cuda => "cuda.verdict",
        BackendKind::Xla => "xla.verdict",
        BackendKind::Mps => "mps.verdict",
        BackendKind::Wgpu => "wgpu.verdict",
    }
}

/// One section: the verdict first, then the causes after the root one, then the checks.
pub(super) fn section(
    kind: BackendKind,
    probe_seconds: f64,
    available: bool,
    applies: bool,
    found: Vec<Finding>,
    checks: Vec<Check>,
) -> Section {
    let id = verdict_id(kind);
    let mut out = Vec::new();
    let root = found.first().map(|f| f.cause);
    let mut checks: Vec<Check> = checks.into_iter().map(with_own_cause).collect();
    let usable;
    if let Some(first) = found.first() {
        // A cause that only warns (accel's own floor where the user's framework runs) leaves
        // the backend usable as it was.
        usable = first.status != Status::Fail && available;
        let mut v = check(
            id,
            "verdict",
            first.status,
            format!("{}: {}", first.title, first.found),
            first.fix.clone(),
        );
        v.cause = Some(first.cause);
        out.push(v);
        for f in &found[1..] {
            let mut c = check(f.cause, f.title, f.status, f.found.clone(), f.fix.clone());
            c.cause = Some(f.cause);
            out.push(c);
        }
        for c in checks.iter_mut().filter(|_| first.status == Status::Fail) {
            if c.status == Status::Fail {
                c.consequence_of = root;
                c.cause = root;
            }
        }
    } else if let Some(f) = checks.iter().find(|c| c.status == Status::Fail) {
        usable = false;
        let mut v = check(
            id,
            "verdict",
            Status::Fail,
            format!("{}: {}", f.title, f.found),
            f.fix.clone(),
        );
        v.cause = Some(f.id);
        out.push(v);
    } else {
        usable = available;
        out.push(if available {
            check(id, "verdict", Status::Pass, "usable", "")
        } else if applies {
            let w = checks.iter().find(|c| c.status == Status::Warn);
            let mut v = check(
                id,
                "verdict",
                Status::Warn,
                format!(
                    "not usable here{}",
                    w.map(|w| format!(": {}", w.found)).unwrap_or_default()
                ),
                w.map(|w| w.fix.clone())
                    .unwrap_or_else(|| "see the checks below".into()),
            );
            v.cause = Some(w.map_or(id, |w| w.id));
            v
        } else {
            check(
                id,
                "verdict",
                Status::Skip,
                "not on this machine (see the checks below)",
                "",
            )
        });
    }
    out.extend(checks);
    Section {
        backend: kind,
        probe_seconds,
        usable,
        cause: out[0].cause,
        checks: out,
    }
}
