//! Which matmul kernel wgpu devices run: chosen by name (`accelkit::wgpu::set_matmul_kernel`)
//! or by `ACCEL_WGPU_MATMUL`; compiled in every build, so the public setter exists without
//! the `wgpu` feature too.

/// The matmul kernels of wgpu devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatmulChoice {
    /// 128x128 blocks of C on software adapters and for products of at least 1024x1024,
    /// else 64x64 (the default).
    Auto,
    /// 64x64 blocks, 4x4 per thread.
    Blocked,
    /// 128x128 blocks, 8x8 per thread.
    Blocked128,
    /// One thread per output, no workgroup memory: a reference to compare with.
    Simple,
}

impl MatmulChoice {
    const ALL: [MatmulChoice; 4] = [
        MatmulChoice::Auto,
        MatmulChoice::Blocked,
        MatmulChoice::Blocked128,
        MatmulChoice::Simple,
    ];

    fn name(self) -> &'static str {
        match self {
            MatmulChoice::Auto => "auto",
            MatmulChoice::Blocked => "blocked",
            MatmulChoice::Blocked128 => "blocked128",
            MatmulChoice::Simple => "simple",
        }
    }

    fn from_name(name: &str) -> Option<MatmulChoice> {
        MatmulChoice::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The matmul kernel wgpu devices run, as an index into `MatmulChoice::ALL`; u8::MAX = not
/// read from the environment yet.
static MATMUL_KERNEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(u8::MAX);

/// Chooses the matmul kernel of wgpu devices by name: "auto", "blocked", "blocked128" or
/// "simple" (see `MatmulChoice`). The environment variable `ACCEL_WGPU_MATMUL` sets it too.
pub(crate) fn set_matmul_kernel(kernel: &str) -> crate::Result<()> {
    let k = MatmulChoice::from_name(kernel).ok_or_else(|| {
        let names: Vec<&str> = MatmulChoice::ALL.iter().map(|k| k.name()).collect();
        crate::Error::invalid(
            "set_matmul_kernel",
            format!("unknown kernel {kernel:?}; expected one of {names:?}"),
        )
    })?;
    MATMUL_KERNEL.store(k as u8, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The matmul kernel chosen.
pub(crate) fn matmul_choice() -> MatmulChoice {
    use std::sync::atomic::Ordering::Relaxed;
    let i = MATMUL_KERNEL.load(Relaxed);
    if i == u8::MAX {
        // A bad value is reported by `accel doctor` (base::env::problems) and means auto here.
        let env = crate::base::env::choice(
            "ACCEL_WGPU_MATMUL",
            &["auto", "blocked", "blocked128", "simple"],
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        let k = MatmulChoice::from_name(&env).unwrap_or(MatmulChoice::Auto);
        let _ = MATMUL_KERNEL.compare_exchange(u8::MAX, k as u8, Relaxed, Relaxed);
    }
    MatmulChoice::ALL[MATMUL_KERNEL.load(Relaxed) as usize]
}

/// The name of the matmul kernel chosen: one of the names [`set_matmul_kernel`] takes.
pub(crate) fn matmul_kernel() -> &'static str {
    matmul_choice().name()
}
