//! The AVX2 loop of `thin_half`'s dots form: the many vectors widened to f32 8 values at a
//! time in registers (`dots_wide`, `Half::load8`), for bf16 and f16 on CPUs without AVX-512.

use super::Half;

/// The dots of `x` (k values) with the `F` f32 vectors at `y`, `ld` apart: `x` widened
/// 8 x `U` values at a time in registers (`Half::load8`) and multiplied into `U`
/// accumulators a few vector (F x U <= 8: with the U widened values and a load they fit
/// the 16 registers; U chains of FMAs hide their latency), the last k % 8 values one at a
/// time. AVX2's form of `avx512::dots_wide`.
///
/// # Safety
/// `x` readable for k values, `y + q * ld` for k values (q < F), `out` at least F long; the
/// CPU has AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dots_wide<S: Half, const F: usize, const U: usize>(
    x: *const S,
    y: *const f32,
    ld: usize,
    k: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); F]; U];
    let mut p = 0;
    while p + 8 * U <= k {
        for (u, acc) in acc.iter_mut().enumerate() {
            let xu = S::load8(x.add(p + 8 * u));
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(xu, _mm256_loadu_ps(y.add(q * ld + p + 8 * u)), *a);
            }
        }
        p += 8 * U;
    }
    while p + 8 <= k {
        let x0 = S::load8(x.add(p));
        for (q, a) in acc[0].iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y.add(q * ld + p)), *a);
        }
        p += 8;
    }
    for (q, o) in out.iter_mut().enumerate().take(F) {
        let mut v = acc[0][q];
        for a in &acc[1..] {
            v = _mm256_add_ps(v, a[q]);
        }
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        let mut s = _mm_cvtss_f32(h);
        for t in p..k {
            s = (*x.add(t)).conv().mul_add(*y.add(q * ld + t), s);
        }
        *o = s;
    }
}
