//! A named cause ([`Finding`]) and what the NVIDIA driver's libraries said in this process
//! ([`Driver`]), with the version arithmetic the causes share (a driver branch's newest
//! CUDA). The rules themselves are in each backend's `causes` (CUDA's with its
//! `placement`) and the doctor's `frameworks`.

use super::check::Status;
use super::facts::Machine;

/// One named cause: a stable id for scripts, what was seen, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// Stable id (`nvidia.nouveau`), documented in docs/doctor.md.
    pub cause: &'static str,
    /// The cause in a few words.
    pub title: &'static str,
    pub status: Status,
    pub found: String,
    pub fix: String,
}

pub(crate) fn finding(
    cause: &'static str,
    title: &'static str,
    found: impl Into<String>,
    fix: impl Into<String>,
) -> Finding {
    Finding {
        cause,
        title,
        status: Status::Fail,
        found: found.into(),
        fix: fix.into(),
    }
}

/// What the NVIDIA driver's libraries said in this process.
#[derive(Debug, Clone, Default)]
pub(crate) struct Driver {
    /// libcuda as loaded (canonical path), or the reason it is not.
    pub libcuda: Option<String>,
    pub libcuda_problem: Option<String>,
    /// The user-space driver's version from its file name (`580.95.05`).
    pub libcuda_version: Option<String>,
    /// `cuDriverGetVersion` (12080 for 12.8).
    pub cuda_version: Option<u32>,
    /// The CUDA probe: its reason when unavailable, and the devices' compute capabilities.
    pub unavailable: Option<String>,
    pub unavailable_hint: Option<String>,
    pub ccs: Vec<(u32, u32)>,
    /// NVML's start: the driver version, or its error.
    pub nvml_version: Option<String>,
    pub nvml_error: Option<String>,
    /// GPUs in MIG mode (NVML).
    pub mig_enabled: bool,
    /// The test computation on `cuda:0`, when it failed.
    pub compute_error: Option<String>,
}

impl Driver {
    /// The `CUDA_ERROR_*` name in the probe's reason or the computation's error.
    pub(crate) fn cu_error(&self) -> Option<&str> {
        self.unavailable
            .as_deref()
            .and_then(cu_error_in)
            .or_else(|| self.compute_error.as_deref().and_then(cu_error_in))
    }

    pub(crate) fn cuda_works(&self) -> bool {
        self.unavailable.is_none() && !self.ccs.is_empty()
    }

    /// The user-space driver's version, from libcuda's file or NVML.
    pub(crate) fn user_version(&self) -> Option<&str> {
        self.libcuda_version
            .as_deref()
            .or(self.nvml_version.as_deref())
    }
}

/// `CUDA_ERROR_SYSTEM_NOT_READY` out of a message.
pub(crate) fn cu_error_in(s: &str) -> Option<&str> {
    let at = s.find("CUDA_ERROR_")?;
    let rest = &s[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The driver branch (`580`) of a version (`580.82.07`).
pub(crate) fn branch(v: &str) -> Option<u32> {
    v.split('.').next()?.parse().ok()
}

/// The newest CUDA a driver branch supports (12080 for R570), from NVIDIA's table of
/// toolkit and minimum driver versions (Linux).
pub(crate) fn cuda_of_branch(b: u32) -> Option<u32> {
    const TABLE: [(u32, u32); 21] = [
        (590, 13010),
        (580, 13000),
        (575, 12090),
        (570, 12080),
        (565, 12070),
        (560, 12060),
        (555, 12050),
        (550, 12040),
        (545, 12030),
        (535, 12020),
        (530, 12010),
        (525, 12000),
        (520, 11080),
        (515, 11070),
        (510, 11060),
        (495, 11050),
        (470, 11040),
        (465, 11030),
        (460, 11020),
        (455, 11010),
        (450, 11000),
    ];
    TABLE.iter().find(|(min, _)| b >= *min).map(|(_, c)| *c)
}

/// The CUDA version this machine's driver supports: `cuDriverGetVersion`, else the kernel
/// module's branch.
pub(crate) fn driver_cuda(m: &Machine, d: &Driver) -> Option<u32> {
    d.cuda_version.or_else(|| {
        m.module_version
            .as_deref()
            .or(d.user_version())
            .and_then(branch)
            .and_then(cuda_of_branch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_name_is_found_inside_a_message() {
        assert_eq!(
            cu_error_in("cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY (802)"),
            Some("CUDA_ERROR_SYSTEM_NOT_READY")
        );
        assert_eq!(cu_error_in("no error here"), None);
    }

    #[test]
    fn a_branch_maps_to_the_newest_cuda_it_runs() {
        assert_eq!(cuda_of_branch(470), Some(11040));
        assert_eq!(cuda_of_branch(535), Some(12020));
        assert_eq!(cuda_of_branch(580), Some(13000));
        assert_eq!(cuda_of_branch(595), Some(13010));
        assert_eq!(cuda_of_branch(440), None);
    }
}
