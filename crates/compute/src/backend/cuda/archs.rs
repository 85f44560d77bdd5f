//! The NVIDIA architectures accel's kernels are built for (Turing to Blackwell), and which
//! NVRTC targets which: the check `kernels::compile` makes before asking NVRTC, so that an
//! architecture the compiler lacks is an error naming both and the fix.

/// The architectures accel's kernels are compiled and tested for, Turing to Blackwell: T4
/// (7.5), A100 (8.0), A10/RTX 30 (8.6), L4/RTX 40 (8.9), H100/H200 (9.0), B200 (10.0), RTX PRO
/// 6000 Blackwell/RTX 50 (12.0).
#[cfg(test)]
pub const ARCHS: [&str; 7] = [
    "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120",
];

/// `sm_XY` for compute capability X.Y.
pub fn arch_of(cc: (u32, u32)) -> String {
    format!("sm_{}{}", cc.0, cc.1)
}

/// The oldest NVRTC (major, minor) that targets compute capability `cc`, and the newest major
/// that still does (CUDA 13 dropped Maxwell, Pascal and Volta: sm_75 is its floor).
fn nvrtc_range(cc: (u32, u32)) -> ((u32, u32), u32) {
    let first = match cc {
        (10, 3) | (12, 1) => (12, 9),
        (10, _) | (12, _) => (12, 8),
        (11, _) => (13, 0),
        (8, 9) | (9, _) => (11, 8),
        _ => (11, 0),
    };
    let last = if cc < (7, 5) { 12 } else { u32::MAX };
    (first, last)
}

/// Whether NVRTC `nvrtc` (`12.9`, or a bare major `13`) can compile for compute capability
/// `cc`: `Err` names the architecture, the compiler's version and the fix.
pub fn arch_supported_by(cc: (u32, u32), nvrtc: &str) -> Result<(), String> {
    let mut it = nvrtc.split('.').map(|x| x.trim().parse::<u32>().ok());
    let major = it.next().flatten().unwrap_or(0);
    let minor = it.next().flatten().unwrap_or(u32::MAX);
    let arch = arch_of(cc);
    let ((fa, fb), last) = nvrtc_range(cc);
    if major > last {
        return Err(format!(
            "NVRTC {nvrtc} cannot compile for {arch} (compute capability {}.{}): CUDA {major} \
             dropped every architecture before sm_75; use CUDA 12 (`pip install \
             nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12`, and ACCEL_CUDA_MAJOR=12 if CUDA 13 is \
             installed too)",
            cc.0, cc.1
        ));
    }
    if (major, minor) < (fa, fb) {
        return Err(format!(
            "NVRTC {nvrtc} cannot compile for {arch} (compute capability {}.{}): it needs \
             NVRTC {fa}.{fb} or newer (`pip install -U nvidia-cuda-nvrtc-cu12` for CUDA 12, \
             or `nvidia-cuda-nvrtc` for CUDA 13)",
            cc.0, cc.1
        ));
    }
    Ok(())
}

/// Whether this process's CUDA major (12 or 13) can compile for compute capability `cc`.
pub fn arch_supported(cc: (u32, u32), major: u32) -> Result<(), String> {
    arch_supported_by(cc, &major.to_string())
}

/// Compute capability of `sm_XY` / `sm_XYZ` (`sm_120` is 12.0); None for anything else.
pub fn parse_arch(arch: &str) -> Option<(u32, u32)> {
    let d = arch.strip_prefix("sm_")?;
    if d.len() < 2 || !d.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (maj, min) = d.split_at(d.len() - 1);
    Some((maj.parse().ok()?, min.parse().ok()?))
}

#[cfg(test)]
mod arch_tests {
    use super::*;

    #[test]
    fn each_compiler_major_targets_its_architectures() {
        for a in ARCHS {
            let cc = parse_arch(a).unwrap();
            assert_eq!(arch_of(cc), a);
            assert!(arch_supported_by(cc, "12.9").is_ok(), "{a} with NVRTC 12.9");
            assert!(arch_supported_by(cc, "13.0").is_ok(), "{a} with NVRTC 13.0");
        }
        assert_eq!(parse_arch("sm_120"), Some((12, 0)));
        assert_eq!(parse_arch("sm_75"), Some((7, 5)));
        assert_eq!(parse_arch("compute_90"), None);
        assert_eq!(parse_arch("sm_9"), None);
        // Volta with CUDA 13: the arch, the compiler's version and the fix.
        let e = arch_supported_by((7, 0), "13.0").unwrap_err();
        assert!(e.contains("sm_70") && e.contains("NVRTC 13.0"), "{e}");
        assert!(e.contains("nvidia-cuda-nvrtc-cu12"), "{e}");
        assert!(arch_supported_by((7, 0), "12.9").is_ok());
        assert!(arch_supported((7, 0), 12).is_ok() && arch_supported((7, 0), 13).is_err());
        // Blackwell needs NVRTC 12.8.
        let e = arch_supported_by((12, 0), "12.6").unwrap_err();
        assert!(e.contains("sm_120") && e.contains("12.8"), "{e}");
        assert!(arch_supported_by((10, 0), "12.8").is_ok());
    }
}
