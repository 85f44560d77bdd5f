//! The doctor's CPU checklist: the vector instructions the kernels use, AMX's tiles where the
//! CPU has them, and the threads in use against the cores (and a container's CPU quota).

use super::matmul::amx;
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
    v.extend(amx_check(amx::status(), amx::status_f16()));
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

/// Where the CPU has AMX-BF16: whether bf16 products run on its tiles, and where it also has
/// AMX-FP16 whether f16 products do; if not, why and what to do (nothing to say on a CPU
/// without AMX).
fn amx_check(
    bf16: &Result<(), amx::Unavailable>,
    f16: &Result<(), amx::Unavailable>,
) -> Option<Check> {
    const ID: &str = "cpu.amx";
    const TITLE: &str = "AMX tiles for bf16 matmul";
    let fix = |why: &str| {
        if why.contains("ACCEL_CPU_KERNEL") {
            "unset ACCEL_CPU_KERNEL (or set it to amx) to use the tiles".to_string()
        } else if why.contains("self-check") {
            "the tiles computed a wrong product here (a hypervisor that shows AMX but does not \
             run it right?): the vector units compute instead; report it with `accel doctor \
             --json`"
                .to_string()
        } else {
            "Linux 5.16 or later gives a process AMX's tile data (arch_prctl \
             ARCH_REQ_XCOMP_PERM); a VM also needs its hypervisor to pass AMX through"
                .to_string()
        }
    };
    match (bf16, f16) {
        (Ok(()), Ok(())) => Some(check(
            ID,
            TITLE,
            Status::Pass,
            "bf16 products run on the tiles, and f16 products too (AMX-FP16)",
            "",
        )),
        (Ok(()), Err(e)) if e.hardware => Some(check(
            ID,
            TITLE,
            Status::Warn,
            format!(
                "bf16 products run on the tiles; the CPU has AMX-FP16, but f16 products are \
                 converted to f32 on the vector units: {}",
                e.why
            ),
            fix(&e.why),
        )),
        (Ok(()), Err(_)) => Some(check(
            ID,
            TITLE,
            Status::Pass,
            "bf16 products run on the tiles",
            "",
        )),
        (Err(e), _) if e.hardware => Some(check(
            ID,
            TITLE,
            Status::Warn,
            format!(
                "the CPU has AMX-BF16, but bf16 products run on the vector units, several times \
                 slower: {}",
                e.why
            ),
            fix(&e.why),
        )),
        (Err(_), _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(why: &str) -> Result<(), amx::Unavailable> {
        Err(amx::Unavailable {
            hardware: true,
            why: why.into(),
        })
    }

    #[test]
    fn amx_is_reported_only_where_the_cpu_has_it_with_the_reason_and_fix() {
        let none = Err(amx::Unavailable {
            hardware: false,
            why: "this CPU has no AMX-BF16".into(),
        });
        let no_fp16 = || {
            Err(amx::Unavailable {
                hardware: false,
                why: "this CPU has no AMX-FP16".into(),
            })
        };
        let amx_check = |bf16: &Result<(), amx::Unavailable>| amx_check(bf16, &no_fp16());
        assert!(amx_check(&none).is_none());
        let ok = amx_check(&Ok(())).unwrap();
        assert_eq!((ok.id, ok.status), ("cpu.amx", Status::Pass));
        assert_eq!(ok.found, "bf16 products run on the tiles");
        // A CPU with AMX-FP16 (Granite Rapids on): f16 on the tiles too, or why not.
        let both = super::amx_check(&Ok(()), &Ok(())).unwrap();
        assert_eq!(both.status, Status::Pass);
        assert!(both.found.contains("f16 products too"), "{}", both.found);
        let f16_off = super::amx_check(
            &Ok(()),
            &refused("the AMX self-check computed 1 where 2 is right"),
        )
        .unwrap();
        assert_eq!(f16_off.status, Status::Warn);
        assert!(
            f16_off.found.contains("f16 products are converted to f32"),
            "{}",
            f16_off.found
        );
        assert!(f16_off.fix.contains("wrong product"), "{}", f16_off.fix);
        let old = "the Linux kernel cannot give tile data to a process (arch_prctl \
                   ARCH_GET_XCOMP_SUPP: Invalid argument (os error 22); Linux 5.16 or later \
                   needed)";
        let c = amx_check(&refused(old)).unwrap();
        assert_eq!(c.status, Status::Warn);
        assert!(c.found.ends_with(old), "{}", c.found);
        assert!(c.fix.starts_with("Linux 5.16 or later"), "{}", c.fix);
        let capped = amx_check(&refused("ACCEL_CPU_KERNEL caps the kernels below amx")).unwrap();
        assert!(
            capped.fix.starts_with("unset ACCEL_CPU_KERNEL"),
            "{}",
            capped.fix
        );
        let wrong = amx_check(&refused("the AMX self-check computed 1 where 2 is right")).unwrap();
        assert!(wrong.fix.contains("wrong product"), "{}", wrong.fix);
    }
}
