//! The doctor's CPU checklist: the vector instructions the kernels use, and the threads in
//! use against the cores (and a container's CPU quota).

use crate::base::check::{check, Check, Status};

pub(crate) fn cpu_checks() -> Vec<Check> {
    let info = crate::base::system::cpu_info();
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
