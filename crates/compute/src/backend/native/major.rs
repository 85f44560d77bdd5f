//! Which CUDA major (12 or 13) a process uses: a pure function of the driver's CUDA version,
//! `ACCEL_CUDA_MAJOR`, what of each major is installed and PyTorch's or JAX's major
//! ([`choose_major`]), with the names, fixes and driver releases its messages use. The library
//! search (`libs::state`) gathers the inputs and loads only the chosen major's files.

use serde::Serialize;

/// The CUDA majors accel can use, newest first. cudarc's bindings are CUDA 13.0's, loaded at
/// run time symbol by symbol; every function accel calls exists, with the same signature, in
/// CUDA 12.0's driver API, NVRTC and cuBLAS (the driver-symbol floor test checks the driver's
/// against CUDA 12.0's `cuda.h`), so one build speaks either. One process uses one major:
/// [`cuda_major`](super::libs::cuda_major) decides it once, before any versioned library is loaded.
pub const CUDA_MAJORS: [u32; 2] = [13, 12];

/// The oldest CUDA version of a driver accel runs on (R525).
pub const DRIVER_FLOOR: (u32, u32) = (12, 0);

/// Which of a major's two needed libraries were found (without loading them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Have {
    /// NVRTC (`libnvrtc.so.N`).
    pub nvrtc: bool,
    /// cuBLAS and cuBLASLt (`libcublas.so.N`, `libcublasLt.so.N`), both.
    pub cublas: bool,
}

impl Have {
    pub(crate) fn count(self) -> u8 {
        self.nvrtc as u8 + self.cublas as u8
    }
}

/// The CUDA major a process uses, and why: a pure function of the driver's CUDA version,
/// `ACCEL_CUDA_MAJOR`, which libraries of each major were found, and the major PyTorch or
/// JAX in the same environment uses (`choose_major`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MajorChoice {
    /// 12 or 13: whose libraries are loaded.
    pub major: u32,
    /// Why this one, in words.
    pub why: String,
    /// Why CUDA cannot work with what is installed, when it cannot (the driver too old for
    /// every library found, a forced major the driver lacks, NVRTC of one major and cuBLAS of
    /// the other).
    pub problem: Option<String>,
    /// The fix for `problem`.
    pub hint: Option<String>,
}

/// Names a CUDA version `12040` as `12.4`.
pub fn cuda_version_text(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// What to install for CUDA `major`'s libraries.
pub fn pips(major: u32) -> &'static str {
    if major == 12 {
        "nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12"
    } else {
        "nvidia-cuda-nvrtc nvidia-cublas"
    }
}

/// The driver release a CUDA major needs (R525 for 12.0, R580 for 13.0).
pub fn driver_for(major: u32) -> &'static str {
    if major >= 13 {
        "580"
    } else {
        "525"
    }
}

/// Decides the CUDA major: `forced` (`ACCEL_CUDA_MAJOR`) when set; otherwise, among the
/// majors the driver supports (all, when there is no driver), the one with the most of NVRTC
/// and cuBLAS found, ties going to `framework()`'s major (PyTorch's or JAX's in the same
/// environment: a look through the Python environments, so it is called only on a tie), then
/// to the newest. `driver` is `cuDriverGetVersion`'s number (12040 for
/// 12.4). `found` lists, per major, what was found.
pub fn choose_major(
    driver: Option<u32>,
    forced: Option<u32>,
    found: &[(u32, Have)],
    framework: impl FnOnce() -> Option<u32>,
) -> MajorChoice {
    let have = |m: u32| {
        found
            .iter()
            .find(|(x, _)| *x == m)
            .map_or(Have::default(), |(_, h)| *h)
    };
    let driver_major = driver.map(|v| v / 1000);
    let driver_text = driver.map(cuda_version_text);
    let supports = |m: u32| driver_major.is_none_or(|d| m <= d);
    if let Some(m) = forced {
        let (problem, hint) = match (&driver_text, supports(m)) {
            (Some(d), false) => (
                Some(format!(
                    "ACCEL_CUDA_MAJOR={m}, but the driver supports CUDA {d}: CUDA {m} needs \
                     driver {} or newer",
                    driver_for(m)
                )),
                Some(format!(
                    "unset ACCEL_CUDA_MAJOR (or set it to {}), or update the NVIDIA driver to \
                     {} or newer",
                    driver_major.unwrap_or(12),
                    driver_for(m)
                )),
            ),
            _ => (None, None),
        };
        return MajorChoice {
            major: m,
            why: format!("ACCEL_CUDA_MAJOR={m}"),
            problem,
            hint,
        };
    }
    let usable: Vec<u32> = CUDA_MAJORS
        .iter()
        .copied()
        .filter(|&m| supports(m))
        .collect();
    let best_count = usable.iter().map(|&m| have(m).count()).max().unwrap_or(0);
    let tied: Vec<u32> = usable
        .iter()
        .copied()
        .filter(|&m| have(m).count() == best_count)
        .collect();
    let framework = if tied.len() > 1 { framework() } else { None };
    let major = framework
        .filter(|f| tied.contains(f))
        .or(tied.first().copied())
        .unwrap_or(12);
    let driver_note = driver_text.as_ref().map_or_else(
        || "no NVIDIA driver here, so any major".to_string(),
        |d| format!("the driver supports CUDA {d}"),
    );
    let complete = best_count == 2;
    let mut why = match (complete, tied.len()) {
        (true, 1) => format!("{driver_note}; CUDA {major}'s NVRTC and cuBLAS were found"),
        (true, _) if framework == Some(major) => format!(
            "{driver_note}; CUDA 12 and 13 libraries were both found, and PyTorch or JAX here \
             uses CUDA {major}"
        ),
        (true, _) => format!(
            "{driver_note}; CUDA 12 and 13 libraries were both found: the newest the driver \
             supports"
        ),
        (false, _) if best_count == 0 => {
            format!("{driver_note}; no CUDA {major} NVRTC or cuBLAS found yet")
        }
        (false, _) => format!("{driver_note}; only part of CUDA {major}'s libraries found"),
    };
    if !complete && tied.len() > 1 && framework == Some(major) {
        why.push_str(&format!(" (PyTorch or JAX here uses CUDA {major})"));
    }
    let mut problem = None;
    let mut hint = None;
    // Libraries the driver is too old for, when nothing it supports was found.
    let too_new: Vec<u32> = CUDA_MAJORS
        .iter()
        .copied()
        .filter(|&m| !supports(m) && have(m).count() > 0)
        .collect();
    if let (Some(d), Some(&new), 0) = (&driver_text, too_new.first(), best_count) {
        problem = Some(format!(
            "the driver supports CUDA {d}; the libraries found are CUDA {new}, which needs \
             driver {} or newer",
            driver_for(new)
        ));
        hint = Some(format!(
            "`pip install {}` (the CUDA {major} wheels, which this driver runs), or update the \
             NVIDIA driver to {} or newer for CUDA {new}",
            pips(major),
            driver_for(new)
        ));
    } else if !complete && best_count > 0 {
        // NVRTC of one major and cuBLAS of another: never both majors in one process.
        let h = have(major);
        let other = usable.iter().copied().find(|&m| {
            m != major && ((!h.nvrtc && have(m).nvrtc) || (!h.cublas && have(m).cublas))
        });
        if let Some(o) = other {
            let (mine, theirs) = if h.nvrtc {
                ("NVRTC", "cuBLAS")
            } else {
                ("cuBLAS", "NVRTC")
            };
            problem = Some(format!(
                "{mine} was found for CUDA {major} and {theirs} only for CUDA {o}: accel uses \
                 one CUDA major in a process, and it has no complete set"
            ));
            hint = Some(format!(
                "install the missing one of the same major: `pip install {}` (CUDA {major}) or \
                 `pip install {}` (CUDA {o}); or set ACCEL_CUDA_MAJOR",
                pips(major),
                pips(o)
            ));
            why.push_str(&format!(" (and part of CUDA {o}'s)"));
        }
    }
    MajorChoice {
        major,
        why,
        problem,
        hint,
    }
}

/// The JAX extra whose CUDA plugin fits a driver that supports CUDA `driver` (12040 for
/// 12.4): `jax[cuda12]` below CUDA 13, `jax[cuda13]` from it; both named when the driver is
/// unknown.
pub fn jax_cuda_extra(driver: Option<u32>) -> &'static str {
    match driver {
        Some(v) if v < 13000 => "`pip install \"jax[cuda12]\"`",
        Some(_) => "`pip install \"jax[cuda13]\"`",
        None => {
            "`pip install \"jax[cuda12]\"` (driver 525 to 575) or `\"jax[cuda13]\"` (580 and newer)"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Have = Have {
        nvrtc: true,
        cublas: true,
    };
    const NVRTC: Have = Have {
        nvrtc: true,
        cublas: false,
    };
    const CUBLAS: Have = Have {
        nvrtc: false,
        cublas: true,
    };
    const NONE: Have = Have {
        nvrtc: false,
        cublas: false,
    };

    fn pick(driver: Option<u32>, f: &[(u32, Have)], fw: Option<u32>) -> MajorChoice {
        choose_major(driver, None, f, || fw)
    }

    #[test]
    fn the_major_follows_the_driver_and_what_is_installed() {
        let all = [(13, BOTH), (12, BOTH)];
        let only12 = [(13, NONE), (12, BOTH)];
        let only13 = [(13, BOTH), (12, NONE)];
        // (driver, found, framework) -> (major, a problem?)
        type Row<'a> = (Option<u32>, &'a [(u32, Have)], Option<u32>, u32, bool);
        let table: &[Row] = &[
            // R525 (12.0), Colab's R550 (12.4), R570 (12.8): CUDA 12 only, however new the
            // libraries installed beside them.
            (Some(12000), &all, None, 12, false),
            (Some(12040), &all, None, 12, false),
            (Some(12080), &all, Some(13), 12, false),
            (Some(12040), &only12, None, 12, false),
            // R580 (13.0) and later: the newest complete set, unless PyTorch/JAX here uses
            // the other and both are complete.
            (Some(13000), &all, None, 13, false),
            (Some(13010), &all, Some(12), 12, false),
            (Some(13010), &only12, None, 12, false),
            (Some(13000), &only13, Some(12), 13, false),
            // No driver (a CPU machine compiling kernels): any major.
            (None, &only12, None, 12, false),
            (None, &all, None, 13, false),
            (None, &[(13, NVRTC), (12, NONE)], None, 13, false),
            // The driver is too old for everything found.
            (Some(12040), &only13, None, 12, true),
            // NVRTC of one major and cuBLAS of the other.
            (Some(13000), &[(13, CUBLAS), (12, NVRTC)], None, 13, true),
            (Some(12040), &[(13, CUBLAS), (12, NVRTC)], None, 12, false),
            (None, &[(13, NVRTC), (12, CUBLAS)], None, 13, true),
            // Nothing at all: the newest the driver supports, and no problem beyond the
            // missing libraries themselves.
            (Some(12040), &[], None, 12, false),
            (Some(13000), &[], None, 13, false),
        ];
        for (i, (driver, found, fw, want, problem)) in table.iter().enumerate() {
            let c = pick(*driver, found, *fw);
            assert_eq!(c.major, *want, "row {i}: {c:?}");
            assert_eq!(c.problem.is_some(), *problem, "row {i}: {c:?}");
            assert_eq!(c.problem.is_some(), c.hint.is_some(), "row {i}: {c:?}");
        }
    }

    #[test]
    fn the_refusals_say_both_versions_and_both_fixes() {
        let c = pick(Some(12040), &[(13, BOTH), (12, NONE)], None);
        let p = c.problem.unwrap();
        assert!(p.contains("the driver supports CUDA 12.4"), "{p}");
        assert!(p.contains("CUDA 13") && p.contains("580"), "{p}");
        let h = c.hint.unwrap();
        assert!(
            h.contains("nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12"),
            "{h}"
        );
        assert!(h.contains("580"), "{h}");

        let c = pick(Some(13000), &[(13, CUBLAS), (12, NVRTC)], None);
        let p = c.problem.unwrap();
        assert!(
            p.contains("cuBLAS was found for CUDA 13 and NVRTC only for CUDA 12"),
            "{p}"
        );
        assert!(c
            .hint
            .unwrap()
            .contains("pip install nvidia-cuda-nvrtc nvidia-cublas"));

        // A forced major the driver lacks is refused with both versions; one it has is used.
        let c = choose_major(Some(12040), Some(13), &[(13, BOTH), (12, BOTH)], || None);
        assert_eq!(c.major, 13);
        assert!(c
            .problem
            .unwrap()
            .contains("ACCEL_CUDA_MAJOR=13, but the driver supports CUDA 12.4"));
        let c = choose_major(Some(13000), Some(12), &[(13, BOTH), (12, BOTH)], || None);
        assert_eq!((c.major, c.problem), (12, None));
        assert_eq!(c.why, "ACCEL_CUDA_MAJOR=12");
    }

    #[test]
    fn the_jax_hint_names_the_plugin_the_driver_runs() {
        assert!(jax_cuda_extra(Some(12040)).contains("jax[cuda12]"));
        assert!(!jax_cuda_extra(Some(12040)).contains("cuda13"));
        assert!(jax_cuda_extra(Some(13000)).contains("jax[cuda13]"));
        let both = jax_cuda_extra(None);
        assert!(both.contains("cuda12") && both.contains("cuda13"), "{both}");
    }
}
