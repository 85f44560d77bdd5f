//! Settings every backend reads: whether f32 matmul may use TF32 (PyTorch's
//! `torch.backends.cuda.matmul.allow_tf32`), which CUDA's cuBLAS calls and XLA's
//! dot-precision both follow.

use std::sync::atomic::{AtomicBool, Ordering};

/// TF32 for f32 matmul (`torch.backends.cuda.matmul.allow_tf32`); off by default, as in
/// PyTorch, because it rounds inputs to 10 mantissa bits.
static ALLOW_TF32: AtomicBool = AtomicBool::new(false);

pub(crate) fn set_allow_tf32(on: bool) {
    ALLOW_TF32.store(on, Ordering::Relaxed);
}

pub(crate) fn allow_tf32() -> bool {
    ALLOW_TF32.load(Ordering::Relaxed)
}
