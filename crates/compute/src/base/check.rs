//! One check of the doctor's checklists, and its status. Each backend's checklist lives in
//! the backend's folder (`backend::cpu::doctor`, `backend::cuda::doctor`,
//! `backend::xla::doctor`, `backend::wgpu::doctor`); `doctor::diagnose_at` runs them.

use serde::Serialize;

use crate::BackendKind;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Broken: this backend cannot work until it is fixed.
    Fail,
    /// Works, but not as well as it could, or a trap is set.
    Warn,
    /// Does not apply here.
    Skip,
}

/// One check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable key (`cuda.kernel_driver`), for scripts.
    pub id: &'static str,
    /// What is checked, in a few words.
    pub title: &'static str,
    /// The outcome.
    pub status: Status,
    /// What was found: paths, versions, variables.
    pub found: String,
    /// What to do, for every FAIL and WARN; empty otherwise.
    pub fix: String,
    /// For every FAIL and WARN: the stable id of its cause (`nvidia.nouveau`; the check's own
    /// id where no deeper cause is known), listed in docs/doctor.md. None otherwise.
    pub cause: Option<&'static str>,
    /// Set when this check fails only because of the section's cause (its id): fix that, and
    /// this passes.
    pub consequence_of: Option<&'static str>,
}

pub(crate) fn check(
    id: &'static str,
    title: &'static str,
    status: Status,
    found: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        found: found.into(),
        fix: fix.into(),
        cause: None,
        consequence_of: None,
    }
}

/// One backend's checklist.
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// The backend.
    pub backend: BackendKind,
    /// Seconds its probe took (the first time it ran in this process).
    pub probe_seconds: f64,
    /// Whether the backend can be used (through accel, PyTorch or JAX) as things stand.
    pub usable: bool,
    /// Why not: the root cause's stable id (`nvidia.nouveau`), None when usable or when the
    /// backend does not apply here.
    pub cause: Option<&'static str>,
    /// The checks, in order: the first is the verdict (`cuda.verdict`), naming the root cause
    /// and its fix; other causes follow; a check that fails only because of the root cause
    /// says so (`consequence_of`).
    pub checks: Vec<Check>,
}
