//! The host's checks (SIMD, threads) and accel's own settings (`ACCEL_*` variables, folders
//! refused as sources of native code, the runtime folder).

use super::check::{check, Check, Status};

// ---- CPU ------------------------------------------------------------------------------------

pub(super) fn cpu_checks() -> Vec<Check> {
    let info = crate::system::cpu_info();
    let has = |f: &str| info.simd.iter().any(|s| s == f);
    let mut v = vec![if has("avx2") && has("fma") {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Pass,
            format!("{}: {}", info.brand, info.simd.join(" ")),
            "",
        )
    } else if cfg!(target_arch = "x86_64") {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Warn,
            format!("{}: {} (no AVX2+FMA)", info.brand, info.simd.join(" ")),
            "the matmul runs its portable kernel, several times slower; a CPU with AVX2 and \
             FMA (Intel since 2013, AMD since 2015) runs the fast one",
        )
    } else {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Pass,
            format!("{} (the portable kernels, auto-vectorised)", info.brand),
            "",
        )
    }];
    let threads = crate::base::threads::threads();
    let env = std::env::var("RAYON_NUM_THREADS").ok();
    // A container's CPU quota sizes the pool (rounded to the nearest CPU: `threads_for`).
    #[cfg(target_os = "linux")]
    let quota = crate::base::cpuset::quota()
        .map(|q| format!("; the cgroup's quota is {q:.2} CPUs"))
        .unwrap_or_default();
    #[cfg(not(target_os = "linux"))]
    let quota = String::new();
    v.push(if threads < info.logical_cores {
        check(
            "cpu.threads",
            "cores and threads in use",
            Status::Warn,
            format!(
                "{threads} threads on {} logical cores ({} physical){}{quota}",
                info.logical_cores,
                info.physical_cores,
                env.map(|e| format!("; RAYON_NUM_THREADS={e}"))
                    .unwrap_or_default()
            ),
            "unset RAYON_NUM_THREADS (or raise it) to compute on every core",
        )
    } else {
        check(
            "cpu.threads",
            "cores and threads in use",
            Status::Pass,
            format!(
                "{threads} threads on {} logical cores ({} physical){quota}",
                info.logical_cores, info.physical_cores
            ),
            "",
        )
    });
    v
}

/// The `ACCEL_*` variables (every one range-checked by `base::env`) and the folders and
/// programs the library search refused to take native code from.
pub(super) fn environment_checks() -> Vec<Check> {
    let problems = crate::base::env::problems();
    let mut v = vec![if problems.is_empty() {
        let set: Vec<String> = crate::base::env::KNOWN
            .iter()
            .filter_map(|(k, _)| {
                std::env::var_os(k).map(|v| format!("{k}={}", v.to_string_lossy()))
            })
            .collect();
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Pass,
            if set.is_empty() {
                "none set".to_string()
            } else {
                set.join(", ")
            },
            "",
        )
    } else {
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Fail,
            problems.join("; "),
            "correct or unset the variables named",
        )
    }];
    v.push(match crate::base::env::runtime_dir_refused() {
        Some(why) => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Warn,
            why,
            "remove that folder (it was not made by you, or others can enter it), or set \
             XDG_RUNTIME_DIR to a private folder of yours",
        ),
        None => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Pass,
            std::env::var_os("XDG_RUNTIME_DIR")
                .map_or("unset".to_string(), |v| v.to_string_lossy().into_owned()),
            "",
        ),
    });
    let skipped = crate::backend::native::trust::skipped_so_far();
    v.push(if skipped.is_empty() {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Pass,
            "none",
            "",
        )
    } else {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Warn,
            skipped
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; "),
            "accel loads libraries and plugins only from folders that you or root own and no one \
             else may write, up to / (as git's safe.directory); fix the owner or mode (chown, \
             chmod go-w) of the folder named, or, if you trust whoever else may write it, list \
             it in ACCEL_TRUSTED_DIRS",
        )
    });
    v
}
