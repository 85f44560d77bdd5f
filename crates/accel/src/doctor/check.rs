//! One check of the doctor's checklists, and its status. Each backend's checklist lives in
//! its own file beside this one (`host`, `nvidia`, `xla`, `gpu_api`).

use serde::Serialize;

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
}

pub(super) fn check(
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
    }
}
