//! bf16 tiles with AVX512_BF16: the parent's tiles of dot products (`x @ W.t()` of a Linear
//! layer on a batch, nothing packed) with 32 pairs of bf16 products a `vdpbf16ps` (as the
//! blocked path's AVX512_BF16 kernel multiplies: subnormal inputs count as zero), summed in
//! f32. The blocked path packs all of B into pairs, which for a few rows and a large W costs
//! more than the product: bf16 32 x 4096 by a transposed 4096 x 4096 read 212-220 GFLOP/s
//! there against PyTorch's 267-283, and 324 here (Zen 4, two threads; `MAX_M_BF16`).

use half::bf16;

use super::*;

tile_kernel!(
    tile_bf16,
    half::bf16 => f32,
    "avx512f,avx512bw,avx512bf16",
    __m512,
    _mm512_setzero_ps,
    32,
    u32,
    "kortestd",
    "vmovdqu16",
    "vdpbf16ps",
    sums_f32
);

/// Most rows of C the bf16 tiles take (from MIN_M): beyond, packing B is repaid. Zen 4, two
/// threads, B transposed, calls of each alternated in one process, tiles against the
/// blocked path (median ratio): 8 x 1024 x 1024 2.31x (291 GFLOP/s against 125), 16 x 1024
/// 1.65x, 32 x 1024 1.18x, 64 x 1024 1.10x, 96 x 1024 1.15x, 128 x 1024 1.00x; 8 x 4096 x
/// 4096 2.63x (205 against 77), 32 x 4096 1.52x (324 against 212), 64 x 4096 1.33x, 128 x
/// 4096 1.13x, 160 x 2048 x 2048 0.89x, 192 x 4096 0.94x, 256 x 4096 0.96x.
pub(in super::super) const MAX_M_BF16: usize = 128;

/// Whether these tiles run here: AVX512_BF16 and AVX512BW, and AVX-512 allowed by
/// `ACCEL_CPU_KERNEL` (also what `thin_half`'s `rows_pairs` needs).
pub(in super::super) fn usable() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::super::kernel::bf16_dot_usable() && std::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether an m x k by k x n bf16 product takes these tiles here: `usable`, A's rows and B's
/// columns contiguous, MIN_M..=MAX_M_BF16 rows, more than TC columns, k from MIN_K.
fn takes(m: usize, n: usize, k: usize, a: MatRef<bf16>, b: MatRef<bf16>) -> bool {
    usable() && a.cs == 1 && b.rs == 1 && (MIN_M..=MAX_M_BF16).contains(&m) && n > TC && k >= MIN_K
}

/// bf16 C = A B accumulated in f32 through these tiles where `takes` says so (returns false,
/// touching nothing, otherwise), on up to `threads` threads: m x k by k x n, C row-major.
///
/// # Safety
/// As for the parent's `gemm`.
pub(in super::super) unsafe fn gemm_bf16(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<bf16>,
    b: MatRef<bf16>,
    c: &mut [f32],
    threads: usize,
) -> bool {
    if !takes(m, n, k, a, b) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let cp = OutPtr(c.as_mut_ptr());
        // SAFETY: the caller's contract covers A. (Rows 4 KiB apart copied: `unaliased`.)
        let (_copy, a) = unsafe { unaliased(m, k, a) };
        // A chunk of k whose B block (TC columns) fills B_BLOCK_BYTES, as f32's.
        let chunk = (B_BLOCK_BYTES[0] / TC / 2).max(64) / 64 * 64;
        in_units(n, TC, m * n * k, threads, |cols| {
            // SAFETY: the caller's contract covers A, B and C, and `takes` the strides and
            // the CPU's features; each unit writes only its own columns of C and is claimed
            // once, and nothing reads C until every thread has returned.
            unsafe { run(0..m, cols, (k, chunk), a, b, (cp.get(), n), tile_bf16) }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (c, threads);
    true
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{naive, values, view};
    use super::*;

    /// Edges in every direction (rows, columns, k not a multiple of 32 pairs, odd k), k over
    /// several chunks, the bounds of m, one and two threads, against the naive loop in f64
    /// over the same bf16 values; and the shapes it declines leave C alone.
    #[test]
    fn bf16_tiles_match_the_naive_loop() {
        if !usable() {
            accelkit_testkit::skip(
                "avx512bf16",
                "this CPU has no AVX512_BF16 (or ACCEL_CPU_KERNEL forbids AVX-512)",
                "bf16_tiles_match_the_naive_loop",
            );
            return;
        }
        for (m, n, k) in [
            (MIN_M, TC + 1, MIN_K),
            (3, 50, 77),
            (8, 40, 513),
            (13, 50, 100),
            (32, 61, 257),
            (MAX_M_BF16, 37, 1100),
            (23, 300, 2100),
            // A's rows 4 KiB apart: copied (`unaliased`).
            (MAX_M_BF16, 37, 2048),
        ] {
            let a: Vec<bf16> = values(m * k, 3).into_iter().map(bf16::from_f64).collect();
            let b: Vec<bf16> = values(k * n, 4).into_iter().map(bf16::from_f64).collect();
            let (af, bf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| x.into()).collect(),
                b.iter().map(|&x| x.into()).collect(),
            );
            // A row-major, B transposed: stored n x k, read with strides (1, k).
            let want = naive(m, n, k, (&af, k, 1), (&bf, 1, k));
            let (ar, br) = (view(&a, k, 1), view(&b, 1, k));
            for threads in [1, 2] {
                let mut c = vec![7.0f32; m * n];
                // SAFETY: the views cover the m x k and n x k values; c holds m * n.
                assert!(unsafe { gemm_bf16(m, n, k, ar, br, &mut c, threads) });
                for (e, (&g, want)) in c.iter().zip(&want).enumerate() {
                    assert!(
                        (g as f64 - want).abs() <= 1e-6 * k as f64,
                        "{m}x{n}x{k} threads {threads} at {e}: {g}, naive {want}"
                    );
                }
            }
        }
        for (m, n, k, (ars, acs), (brs, bcs)) in [
            (MIN_M - 1, 50, 100, (100, 1), (1, 100)),
            (MAX_M_BF16 + 1, 50, 100, (100, 1), (1, 100)),
            (20, TC, 100, (100, 1), (1, 100)),
            (20, 50, MIN_K - 1, (MIN_K - 1, 1), (1, MIN_K - 1)),
            (20, 50, 100, (100, 1), (50, 1)),
        ] {
            let (a, b) = (vec![bf16::ONE; 200 * 200], vec![bf16::ONE; 200 * 200]);
            let (ar, br) = (view(&a, ars, acs), view(&b, brs, bcs));
            let mut c = vec![7.0f32; m * n];
            // SAFETY: every view reads inside the 200 x 200 values; c holds m * n.
            assert!(
                !unsafe { gemm_bf16(m, n, k, ar, br, &mut c, 2) },
                "{m}x{n}x{k}"
            );
            assert!(c.iter().all(|&x| x == 7.0), "a refused product wrote C");
        }
    }
}
