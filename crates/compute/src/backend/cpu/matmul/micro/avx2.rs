//! The AVX2+FMA micro-kernels (6 x 16 f32, 6 x 8 f64) and their twins over unpacked
//! operands (the small path), for CPUs without AVX-512 (Zen 2/3, older Intel) and for
//! `ACCEL_CPU_KERNEL=avx2`.
use std::arch::x86_64::*;

/// One k step of a 6-row tile: for each row i its A value broadcast from `$addr` (an
/// expression of `$i`), two FMAs (with B's vectors `$b0`, `$b1`) into `$acc[i]`.
macro_rules! fma_rows {
    ($bcast:ident, $fma:ident, $b0:ident, $b1:ident, $acc:ident, $i:ident => $addr:expr) => {
        fma_rows!(@row $bcast, $fma, $b0, $b1, $acc, $i => $addr, [0, 1, 2, 3, 4, 5]);
    };
    (@row $bcast:ident, $fma:ident, $b0:ident, $b1:ident, $acc:ident, $i:ident => $addr:expr,
     [$($n:literal),*]) => {
        $({
            let $i: usize = $n;
            let x = $bcast(&*$addr);
            $acc[$n][0] = $fma(x, $b0, $acc[$n][0]);
            $acc[$n][1] = $fma(x, $b1, $acc[$n][1]);
        })*
    };
}

/// Stores (or, with `$accumulate`, adds) a 6 x NR tile's accumulators `$acc` to C at `$c`
/// (rows `$ldc` apart): whole vectors for a full tile, else through a buffer, only the
/// mr x nr valid part.
macro_rules! store_tile {
    ($t:ty, $lanes:expr, $acc:ident, ($c:ident, $ldc:ident, $mr:ident, $nr:ident),
     $accumulate:expr, $load:ident, $add:ident, $store:ident) => {{
        const NR: usize = 2 * $lanes;
        if $mr == 6 && $nr == NR {
            for (i, [lo, hi]) in $acc.into_iter().enumerate() {
                let p = $c.add(i * $ldc);
                if $accumulate {
                    $store(p, $add($load(p), lo));
                    $store(p.add($lanes), $add($load(p.add($lanes)), hi));
                } else {
                    $store(p, lo);
                    $store(p.add($lanes), hi);
                }
            }
        } else {
            let mut tmp = [0 as $t; 6 * NR];
            for (i, [lo, hi]) in $acc.into_iter().enumerate() {
                $store(tmp.as_mut_ptr().add(i * NR), lo);
                $store(tmp.as_mut_ptr().add(i * NR + $lanes), hi);
            }
            for i in 0..$mr {
                for j in 0..$nr {
                    let dst = $c.add(i * $ldc + j);
                    let v = tmp[i * NR + j];
                    *dst = if $accumulate { *dst + v } else { v };
                }
            }
        }
    }};
}

/// Generates a 6 x (2 * LANES) AVX2+FMA micro-kernel (12 accumulators, 2 B vectors and one
/// broadcast A value live in the 16 ymm registers) and its twin over A and B where they
/// lie (the small path, `kernel::SmallKernel`).
macro_rules! kernels {
    ($name:ident, $small:ident, $t:ty, $lanes:expr, $zero:ident, $load:ident, $bcast:ident,
     $fma:ident, $add:ident, $store:ident) => {
        /// # Safety
        /// The CPU must support AVX2 and FMA (`Accum::kernel` checks with
        /// `is_x86_feature_detected!` before handing this out). Pointers as for
        /// `kernel::MicroKernel`: `a` readable for kc * 6 values, `b` for kc * NR, `c`
        /// readable and writable for rows 0..mr, columns 0..nr at stride `ldc`, and, when
        /// mr == 6 and nr == NR, the whole 6 x NR tile (full-width vector stores).
        #[target_feature(enable = "avx2,fma")]
        pub(crate) unsafe fn $name(
            kc: usize,
            mut a: *const $t,
            mut b: *const $t,
            c: *mut $t,
            ldc: usize,
            accumulate: bool,
            mr: usize,
            nr: usize,
            next: super::Prefetch,
        ) {
            const NR: usize = 2 * $lanes;
            const PF_A: usize = 384;
            next.burst(0);
            let mut acc = [[$zero(); 2]; 6];
            // Bring the C tile towards L1 while the loop runs: it is read at the end,
            // and its rows are far apart.
            // Prefetch addresses are computed with `wrapping_add`: for an edge tile (mr < 6
            // or nr < NR) at the bottom/right of C they can point past C's allocation,
            // which `add` must not do; a prefetch of any address never faults.
            for i in 0..6 {
                let p = c.wrapping_add(i * ldc) as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(NR * std::mem::size_of::<$t>() - 1));
            }
            // One k step: two B vectors, six broadcast A values, twelve FMAs.
            macro_rules! step {
                ($u:expr) => {{
                    let bp = b.add($u * NR);
                    let ap = a.add($u * 6);
                    let b0 = $load(bp);
                    let b1 = $load(bp.add($lanes));
                    fma_rows!($bcast, $fma, b0, b1, acc, i => ap.add(i));
                }};
            }
            // Unrolled by 4, with one prefetch of the A panel per cache line consumed.
            // PF_A = 384 bytes ahead passes the end of `apack` for the last tiles of a
            // block: `wrapping_add` (a prefetch never faults); the loads stay inside the
            // packed panels.
            for _ in 0..kc / 4 {
                _mm_prefetch::<_MM_HINT_T0>((a as *const i8).wrapping_add(PF_A));
                step!(0);
                step!(1);
                step!(2);
                step!(3);
                a = a.add(24);
                b = b.add(4 * NR);
            }
            for _ in 0..kc % 4 {
                step!(0);
                a = a.add(6);
                b = b.add(NR);
            }
            store_tile!($t, $lanes, acc, (c, ldc, mr, nr), accumulate, $load, $add, $store);
        }

        /// # Safety
        /// The CPU must support AVX2 and FMA. As for `kernel::SmallKernel`: A's element
        /// (i, p) at `a + i * rsa + p * csa` readable for i < mr (1 <= mr <= 6) and p < k
        /// (rows past `mr` read row `mr - 1` again and are not stored); NR values at
        /// `b + p * rsb` readable for p < k; `c` writable for rows 0..mr, columns 0..nr at
        /// stride `ldc` (the whole 6 x NR tile when mr == 6 and nr == NR). C is written,
        /// not accumulated.
        #[target_feature(enable = "avx2,fma")]
        pub(crate) unsafe fn $small(
            k: usize,
            a: *const $t,
            rsa: usize,
            csa: usize,
            b: *const $t,
            rsb: usize,
            c: *mut $t,
            ldc: usize,
            mr: usize,
            nr: usize,
        ) {
            const NR: usize = 2 * $lanes;
            // B's rows are prefetched 8 steps ahead (as `strided_loop!` does for
            // AVX-512): rows far apart defeat the hardware's stream prefetch.
            let ahead = 8 * rsb * std::mem::size_of::<$t>();
            debug_assert!((1..=6).contains(&mr));
            let rows: [*const $t; 6] = std::array::from_fn(|i| a.add(i.min(mr - 1) * rsa));
            let mut acc = [[$zero(); 2]; 6];
            let (mut bp, mut off) = (b, 0usize);
            for _ in 0..k {
                let pf = (bp as *const i8).wrapping_add(ahead);
                _mm_prefetch::<_MM_HINT_T0>(pf);
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(NR * std::mem::size_of::<$t>() - 1));
                let b0 = $load(bp);
                let b1 = $load(bp.add($lanes));
                fma_rows!($bcast, $fma, b0, b1, acc, i => rows[i].add(off));
                bp = bp.wrapping_add(rsb);
                off += csa;
            }
            store_tile!($t, $lanes, acc, (c, ldc, mr, nr), false, $load, $add, $store);
        }
    };
}

kernels!(
    kernel_f32,
    small_f32,
    f32,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_broadcast_ss,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_storeu_ps
);
kernels!(
    kernel_f64,
    small_f64,
    f64,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_broadcast_sd,
    _mm256_fmadd_pd,
    _mm256_add_pd,
    _mm256_storeu_pd
);
