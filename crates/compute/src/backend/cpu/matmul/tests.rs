//! Every micro-kernel this CPU can run, forced one at a time with small caches (so that
//! the MC, KC and NC loops all take several turns and every tile kind, full and edge,
//! occurs), on odd shapes and transposed views, against a naive f64 loop.
use super::kernel::{Caches, CpuKernel, Rule};
use super::micro::*;
use super::pack::*;
use super::*;

/// Caches small enough for several blocks at these sizes.
pub(super) const TINY: Caches = Caches {
    l1d: 4 << 10,
    l2: 2 << 10,
    l3: 16 << 10,
};

pub(super) fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

/// A strided view of `v`: element (i, j) at `i * rs + j * cs`.
pub(super) fn view<T>(v: &[T], rs: usize, cs: usize) -> MatRef<T> {
    MatRef {
        ptr: v.as_ptr(),
        rs,
        cs,
    }
}

/// The textbook product of (m x k) by (k x n) given as strided views, in f64.
pub(super) fn naive(
    m: usize,
    n: usize,
    k: usize,
    a: (&[f64], usize, usize),
    b: (&[f64], usize, usize),
) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a.0[i * a.1 + p * a.2] * b.0[p * b.1 + j * b.2])
                .sum();
        }
    }
    c
}

/// Asserts that every value of C is within `tol` x k of `naive`'s `want`, relative to the
/// value (at least 1); `what` names the case in a failure, followed by the index.
pub(super) fn assert_near<D: Copy + Into<f64>>(
    c: &[D],
    want: &[f64],
    k: usize,
    tol: f64,
    what: impl Fn() -> String,
) {
    for (idx, (g, w)) in c.iter().zip(want).enumerate() {
        let g: f64 = (*g).into();
        assert!(
            (g - w).abs() <= tol * k as f64 * w.abs().max(1.0),
            "{} at {idx}: {g}, naive {w}",
            what()
        );
    }
}

pub(super) const SHAPES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (14, 32, 8),
    (15, 33, 17),
    (29, 70, 131),
    (57, 9, 300),
    (100, 130, 97),
];

/// Runs `kern` on every shape, A and B row-major and transposed, on 1 and 2 threads, and
/// compares with the naive loop within `tol` x k.
fn check<S: Copy + Send + Sync + 'static, P: PackFrom<S>, D: Accum + Into<f64>>(
    kern: &CpuKernel<P, D>,
    to: impl Fn(f64) -> S,
    back: impl Fn(S) -> f64,
    tol: f64,
) {
    check_shapes(kern, &SHAPES, &[1, 2], to, back, tol)
}

/// As `check`, on the given (m, n, k) shapes and thread counts.
fn check_shapes<S: Copy + Send + Sync + 'static, P: PackFrom<S>, D: Accum + Into<f64>>(
    kern: &CpuKernel<P, D>,
    shapes: &[(usize, usize, usize)],
    thread_counts: &[usize],
    to: impl Fn(f64) -> S,
    back: impl Fn(S) -> f64,
    tol: f64,
) {
    // SAFETY: `check_with` passes views over m x k and k x n values and a C of m * n; the
    // kernel was checked usable by the caller.
    let run = |m, n, k, a, b, c: &mut [D], threads, f: Finish<D>| unsafe {
        gemm_with(kern, m, n, k, a, b, c, threads, Some(f))
    };
    check_with(kern.name, shapes, thread_counts, to, back, tol, run)
}

/// The body of `check_shapes`, for any product function `run`.
fn check_with<S: Copy + Send + Sync + 'static, D: Accum + Into<f64>>(
    name: &str,
    shapes: &[(usize, usize, usize)],
    thread_counts: &[usize],
    to: impl Fn(f64) -> S,
    back: impl Fn(S) -> f64,
    tol: f64,
    run: impl Fn(usize, usize, usize, MatRef<S>, MatRef<S>, &mut [D], usize, Finish<D>),
) {
    for &(m, n, k) in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a: Vec<S> = values(m * k, 1).into_iter().map(&to).collect();
            let b: Vec<S> = values(k * n, 2).into_iter().map(&to).collect();
            let (af, bf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| back(x)).collect(),
                b.iter().map(|&x| back(x)).collect(),
            );
            // A transposed: stored k x m, read with strides (1, m).
            let (ars, acs) = if ta { (1, m) } else { (k, 1) };
            let (brs, bcs) = if tb { (1, k) } else { (n, 1) };
            let want = naive(m, n, k, (&af, ars, acs), (&bf, brs, bcs));
            for &threads in thread_counts {
                let mut c = vec![D::default(); m * n];
                let ar = view(&a, ars, acs);
                let br = view(&b, brs, bcs);
                // `finish` must see every element of C once, already final.
                let seen = std::sync::Mutex::new(vec![None::<f64>; m * n]);
                let record =
                    |cp: *const D, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
                        let mut seen = seen.lock().unwrap();
                        for r in rows {
                            for j in cols.clone() {
                                assert!(seen[r * n + j].is_none(), "({r}, {j}) finished twice");
                                // SAFETY: (r, j) is inside C (m x n at cp), per Finish's contract,
                                // which the assertions here check.
                                seen[r * n + j] = Some(unsafe { *cp.add(r * n + j) }.into());
                            }
                        }
                    };
                // The views cover exactly the m x k and k x n values allocated above.
                run(m, n, k, ar, br, &mut c, threads, &record);
                let seen = seen.into_inner().unwrap();
                for (idx, (g, s)) in c.iter().zip(&seen).enumerate() {
                    let g: f64 = (*g).into();
                    assert_eq!(
                        *s,
                        Some(g),
                        "{m}x{n}x{k} threads={threads}: finish at {idx}"
                    );
                }
                assert_near(&c, &want, k, tol, || {
                    format!("{name} {m}x{n}x{k} ta={ta} tb={tb} threads={threads}")
                });
            }
        }
    }
}

/// The portable f32 kernel (6 x 16, any CPU) with the blocking `caches` give it.
fn portable_f32(caches: Caches) -> CpuKernel<f32, f32> {
    CpuKernel::blocked(
        "portable",
        (6, 16),
        generic_kernel::<f32, 6, 16>,
        caches,
        Rule::L1Panel,
    )
}

/// The AVX-512 kernels with the blocking `caches` give them (the CPU must have the
/// features: callers check).
#[cfg(target_arch = "x86_64")]
fn avx512_f32(caches: Caches) -> CpuKernel<f32, f32> {
    let mut k = CpuKernel::blocked(
        "avx512",
        (14, 32),
        avx512::kernel_f32,
        caches,
        Rule::L2Panel,
    );
    // Row-major A then goes through the packing kernel, transposed A through pack_a.
    k.packing = Some(avx512::packing_f32);
    k
}
#[cfg(target_arch = "x86_64")]
fn avx512_f64(caches: Caches) -> CpuKernel<f64, f64> {
    let mut k = CpuKernel::blocked(
        "avx512",
        (14, 16),
        avx512::kernel_f64,
        caches,
        Rule::L2Panel,
    );
    // Row-major A then goes through the packing kernel, transposed A through pack_a.
    k.packing = Some(avx512::packing_f64);
    k
}
#[cfg(target_arch = "x86_64")]
fn avx512_bf16(caches: Caches) -> CpuKernel<Bf16Pair, f32> {
    CpuKernel::blocked(
        "avx512-bf16",
        (14, 32),
        avx512::kernel_bf16,
        caches,
        Rule::L2Panel,
    )
}

#[test]
fn every_f32_and_f64_kernel_this_cpu_has_matches_the_naive_loop() {
    let k = portable_f32(TINY);
    assert!(
        k.kc < 64 * 4 && k.mc < 200,
        "TINY gives several blocks: {} {}",
        k.kc,
        k.mc
    );
    check(&k, |x| x as f32, |x| x as f64, 1e-6);
    // f16 and bf16 operands, widened to f32 while packing (`PackFrom::run`): the naive loop
    // runs on the same 16-bit values, so only f32's sums round.
    let f16_in = (half::f16::from_f64, |x: half::f16| x.to_f64());
    let bf16_in = (bf16::from_f64, |x: bf16| x.to_f64());
    check(&k, f16_in.0, f16_in.1, 1e-6);
    check(&k, bf16_in.0, bf16_in.1, 1e-6);
    let k = CpuKernel::blocked(
        "portable",
        (6, 8),
        generic_kernel::<f64, 6, 8>,
        TINY,
        Rule::L1Panel,
    );
    check(&k, |x| x, |x| x, 1e-15);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            let k = CpuKernel::blocked("avx2", (6, 16), avx2::kernel_f32, TINY, Rule::L1Panel);
            check(&k, |x| x as f32, |x| x as f64, 1e-6);
            check(&k, f16_in.0, f16_in.1, 1e-6);
            check(&k, bf16_in.0, bf16_in.1, 1e-6);
            check(
                &CpuKernel::blocked("avx2", (6, 8), avx2::kernel_f64, TINY, Rule::L1Panel),
                |x| x,
                |x| x,
                1e-15,
            );
        } else {
            println!("skipped: avx2: this CPU has no AVX2+FMA");
        }
        if std::is_x86_feature_detected!("avx512f") {
            check(&avx512_f32(TINY), |x| x as f32, |x| x as f64, 1e-6);
            check(&avx512_f32(TINY), f16_in.0, f16_in.1, 1e-6);
            check(&avx512_f32(TINY), bf16_in.0, bf16_in.1, 1e-6);
            check(&avx512_f64(TINY), |x| x, |x| x, 1e-15);
        } else {
            accelkit_testkit::skip(
                "avx512",
                "this CPU has no avx512f",
                "every_f32_and_f64_kernel_this_cpu_has_matches_the_naive_loop",
            );
        }
    }
}

/// Caches that give KC slices deep enough (112 packed steps and more) for the AVX-512
/// kernels' k loop to prefetch C's rows and the next B micro-panel as it runs, rather than
/// all at once before it: KC = 200 packed steps of f32 and f64, 200 pairs of bf16.
const DEEP: Caches = Caches {
    l1d: 48 << 10,
    l2: 200 << 10,
    l3: 256 << 10,
};

/// k = 113 (one slice of 28 unrolled turns, the fewest that spread the prefetch), 450 and
/// 1000 (several slices, full and edge tiles).
const DEEP_SHAPES: [(usize, usize, usize); 3] = [(15, 33, 113), (31, 70, 450), (20, 40, 1000)];

#[test]
fn avx512_kernels_over_deep_slices_match_the_naive_loop() {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        let k = avx512_f32(DEEP);
        assert_eq!(k.kc, 200);
        check_shapes(&k, &DEEP_SHAPES, &[1, 2], |x| x as f32, |x| x as f64, 1e-6);
        // f16 and bf16 widened while packing, in several runs of `pack::WIDE_STEPS` a slice.
        let f16_in = (half::f16::from_f64, |x: half::f16| x.to_f64());
        check_shapes(&k, &DEEP_SHAPES, &[1, 2], f16_in.0, f16_in.1, 1e-6);
        let bf16_in = (bf16::from_f64, |x: bf16| x.to_f64());
        check_shapes(&k, &DEEP_SHAPES, &[1, 2], bf16_in.0, bf16_in.1, 1e-6);
        let k = avx512_f64(DEEP);
        assert_eq!(k.kc, 200);
        check_shapes(&k, &DEEP_SHAPES, &[1, 2], |x| x, |x| x, 1e-15);
        if std::is_x86_feature_detected!("avx512bf16") {
            let k = avx512_bf16(DEEP);
            assert_eq!(k.kc, 400);
            check_shapes(
                &k,
                &DEEP_SHAPES,
                &[1, 2],
                bf16::from_f64,
                |x: bf16| x.to_f64(),
                1e-6,
            );
        } else {
            accelkit_testkit::skip(
                "avx512",
                "this CPU has no avx512_bf16",
                "avx512_kernels_over_deep_slices_match_the_naive_loop",
            );
        }
        return;
    }
    accelkit_testkit::skip(
        "avx512",
        "this CPU has no avx512f",
        "avx512_kernels_over_deep_slices_match_the_naive_loop",
    );
}

/// Above PARALLEL_MIN_FLOPS, so that two threads split C over many KC slices and MC blocks
/// (TINY caches): 260 rows and 300 columns in shares of columns, each thread packing its
/// own micro-panels (`COLUMNS_MAX_ROWS`); 800 rows in shares of rows, the two threads
/// packing each B panel together (each a range of its k steps).
const PARALLEL_SHAPES: [(usize, usize, usize); 2] = [(260, 300, 231), (800, 96, 64)];

#[test]
fn two_threads_over_many_slices_match_the_naive_loop() {
    let (m, n, k) = PARALLEL_SHAPES[0];
    assert!(m * n * k >= PARALLEL_MIN_FLOPS);
    let k32 = portable_f32(TINY);
    check_shapes(
        &k32,
        &PARALLEL_SHAPES,
        &[1, 2],
        |x| x as f32,
        |x| x as f64,
        1e-6,
    );
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        let k = avx512_f32(TINY);
        check_shapes(
            &k,
            &PARALLEL_SHAPES,
            &[1, 2],
            |x| x as f32,
            |x| x as f64,
            1e-6,
        );
        let k = avx512_f64(TINY);
        check_shapes(&k, &PARALLEL_SHAPES, &[1, 2], |x| x, |x| x, 1e-15);
        if std::is_x86_feature_detected!("avx512bf16") {
            let k = avx512_bf16(TINY);
            check_shapes(
                &k,
                &PARALLEL_SHAPES,
                &[1, 2],
                bf16::from_f64,
                |x: bf16| x.to_f64(),
                1e-6,
            );
        }
    }
}

/// C of at most two blocks of rows on two threads: each thread packs the micro-panels of its
/// own share of columns (`Split::columns`, `gemm_with`'s `own_panels`), over several KC
/// slices and NC panels (TINY caches): at 2 x MC rows (where `Split::new` would share rows)
/// and one row under 4 tiles a thread (where it shares columns itself).
fn check_own_panels<S: Copy + Send + Sync + 'static, P: PackFrom<S>, D: Accum + Into<f64>>(
    kern: &CpuKernel<P, D>,
    to: impl Fn(f64) -> S,
    back: impl Fn(S) -> f64,
    tol: f64,
) {
    let (mr, mc) = (kern.mr, kern.mc);
    let shapes = [(2 * mc, 700, 231), (2 * mr * 4 - 1, 700, 231)];
    for (m, n, k) in shapes {
        assert!(m * n * k >= PARALLEL_MIN_FLOPS && n > kern.nc && k > kern.kc);
    }
    assert!(Split::new(2, (2 * mc, kern.nc), (mr, kern.nr), mc).rows);
    check_shapes(kern, &shapes, &[2], to, back, tol);
}

#[test]
fn two_threads_on_shares_of_columns_match_the_naive_loop() {
    check_own_panels(&portable_f32(TINY), |x| x as f32, |x| x as f64, 1e-6);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        check_own_panels(&avx512_f32(TINY), |x| x as f32, |x| x as f64, 1e-6);
        check_own_panels(&avx512_f64(TINY), |x| x, |x| x, 1e-15);
    } else {
        accelkit_testkit::skip(
            "avx512",
            "this CPU has no avx512f (the portable kernel ran)",
            "two_threads_on_shares_of_columns_match_the_naive_loop",
        );
    }
    // The shares cover the block's columns once, in whole micro-panels, each with all rows.
    for (m, nc, nr) in [(48usize, 700usize, 16usize), (112, 128, 32), (10, 20, 16)] {
        let s = Split::columns(2, (m, nc), (6, nr));
        let mut seen = vec![0u8; nc];
        for u in 0..s.units {
            let (rows, (j0, j1)) = s.unit(u);
            assert!(rows == (0..m) && j0.is_multiple_of(nr) && j0 <= j1 && j1 <= nc);
            seen[j0..j1].iter_mut().for_each(|x| *x += 1);
        }
        assert!(seen.iter().all(|&x| x == 1), "{m}x{nc}: {seen:?}");
    }
}

/// A row-major A whose rows are further apart than k (a block of a wider matrix), through
/// the packing kernels (`PackingKernel`): over several KC slices and MC blocks (TINY
/// caches), on one and two threads, with fewer rows than a tile (no whole tile: `pack_a`
/// alone), one tile and a partial one, and blocks of whole and partial tiles.
#[test]
fn a_block_of_a_wider_a_through_the_packing_kernels_matches_the_naive_loop() {
    fn run<T: Accum + PackFrom<T> + Into<f64> + Copy + Send + Sync + 'static>(
        kern: &CpuKernel<T, T>,
        to: impl Fn(f64) -> T,
        tol: f64,
    ) {
        for (m, n, k) in [(10, 40, 50), (27, 33, 131), (260, 300, 231)] {
            let lda = k + 5;
            let a: Vec<T> = values(m * lda, 3).into_iter().map(&to).collect();
            let b: Vec<T> = values(k * n, 4).into_iter().map(&to).collect();
            let af: Vec<f64> = a.iter().map(|&x| x.into()).collect();
            let bf: Vec<f64> = b.iter().map(|&x| x.into()).collect();
            let want = naive(m, n, k, (&af, lda, 1), (&bf, n, 1));
            for threads in [1, 2] {
                let mut c = vec![T::default(); m * n];
                // SAFETY: the views cover m rows of lda >= k values and k x n values, all
                // allocated above; c holds m * n; the kernel's CPU features were checked.
                unsafe {
                    gemm_with(
                        kern,
                        m,
                        n,
                        k,
                        view(&a, lda, 1),
                        view(&b, n, 1),
                        &mut c,
                        threads,
                        None,
                    )
                };
                assert_near(&c, &want, k, tol, || {
                    format!("{m}x{n}x{k} threads={threads}")
                });
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        let k32 = avx512_f32(TINY);
        assert!(k32.packing.is_some());
        run(&k32, |x| x as f32, 1e-6);
        run(&avx512_f64(TINY), |x| x, 1e-15);
        return;
    }
    accelkit_testkit::skip(
        "avx512",
        "this CPU has no avx512f",
        "a_block_of_a_wider_a_through_the_packing_kernels_matches_the_naive_loop",
    );
}

/// On many cores C's rows are shared in whole tiles, and the shares can run out before the
/// last threads: with 16 threads and 6-row tiles, m = 400 gives shares of 30 rows and nothing
/// for threads 14 and 15. Found on a 16-core Xeon, where `accel bench matmul --size 1024`
/// stopped with "assertion failed: step != 0" (14-row AVX-512 tiles); the columns' split is
/// checked the same way (n = 100 over 12 threads of 16 columns).
#[test]
fn more_threads_than_tiles_leave_the_last_threads_idle() {
    let shapes = [(400, 210, 200), (60, 100, 2800)];
    for &(m, n, k) in &shapes {
        assert!(m * n * k >= PARALLEL_MIN_FLOPS);
    }
    let k32 = portable_f32(TINY);
    check_shapes(
        &k32,
        &shapes,
        &[7, 12, 16],
        |x| x as f32,
        |x| x as f64,
        1e-6,
    );
}

/// The units threads claim cover C's block once: runs of whole tiles of rows, at most MC
/// rows each, as many for each thread (a multiple of the threads) where C has the rows; or
/// one share of whole micro-panels of columns per thread, every unit with all the rows.
#[test]
fn split_units_cover_the_block_once_in_whole_tiles() {
    let cases = [
        // (threads, m, nc, mr, nr, mc)
        (2, 2000, 2000, 14, 32, 252),
        (2, 4096, 4096, 14, 16, 126),
        (2, 2000, 2000, 32, 32, 1024),
        (16, 2000, 2000, 14, 32, 252),
        (2, 120, 300, 14, 32, 252),
        (2, 111, 300, 14, 32, 252),
        (7, 400, 210, 6, 16, 144),
        (12, 60, 100, 6, 16, 144),
        (1, 5, 7, 6, 16, 144),
        (3, 1000, 50, 8, 8, 24),
        (1, 2000, 2000, 14, 32, 252),
        (1, 200, 200, 14, 32, 252),
        (1, 2048, 512, 32, 32, 1024),
    ];
    for (threads, m, nc, mr, nr, mc) in cases {
        let s = Split::new(threads, (m, nc), (mr, nr), mc);
        let mut row_of = vec![0usize; m * nc];
        for u in 0..s.units {
            let (rows, (c0, c1)) = s.unit(u);
            if s.rows {
                assert!(
                    rows.len() <= mc,
                    "{m}x{nc}/{threads}: unit {u} has {rows:?}"
                );
                assert_eq!(rows.start % mr, 0);
                assert_eq!((c0, c1), (0, nc));
            } else {
                assert_eq!(rows, 0..m);
                assert!(c0 == c1 || c0 % nr == 0);
            }
            for r in rows {
                for j in c0..c1 {
                    row_of[r * nc + j] += 1;
                }
            }
        }
        assert!(
            row_of.iter().all(|&x| x == 1),
            "{m}x{nc}/{threads}: not once"
        );
        if s.rows {
            let tiles = m.div_ceil(mr);
            let fit = tiles.div_ceil(mc / mr);
            if threads == 1 {
                // One thread: as few blocks as fit in MC rows (each costs a pass over B).
                assert_eq!(s.units, fit, "{m}x{nc}/1");
            } else {
                assert!(s.units.is_multiple_of(threads) || s.units == tiles);
                let min_tiles = (mc / mr / 4).max(4);
                if tiles >= threads * min_tiles * UNITS_PER_THREAD {
                    assert!(s.units >= threads * UNITS_PER_THREAD);
                }
                // No unit below its minimum where there are units to spare.
                if s.units > fit.next_multiple_of(threads) {
                    assert!(
                        tiles / s.units >= min_tiles,
                        "{m}x{nc}/{threads}: {}",
                        s.units
                    );
                }
            }
        } else {
            assert_eq!(s.units, threads);
            assert!(m < threads * mr * 4);
        }
    }
    // The B panel's packing ranges cover its steps once.
    for (ks, threads) in [(1, 2), (15, 2), (256, 2), (1000, 16), (1024, 1)] {
        let r = pack_units(ks, threads);
        assert!(!r.is_empty() && r.len() <= threads * UNITS_PER_THREAD);
        assert_eq!(r.first().unwrap().start, 0);
        assert_eq!(r.last().unwrap().end, ks);
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
    }
}

#[test]
fn bf16_pair_dot_kernel_matches_the_naive_loop() {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16") {
        // Products of two bf16 are exact in f32; only the f32 sums round.
        let k = avx512_bf16(TINY);
        check(&k, bf16::from_f64, |x: bf16| x.to_f64(), 1e-6);
        // A k of 1 and odd k: the last pair is half padding.
        return;
    }
    accelkit_testkit::skip(
        "avx512",
        "this CPU has no avx512_bf16",
        "bf16_pair_dot_kernel_matches_the_naive_loop",
    );
}

#[test]
fn blocking_follows_the_caches() {
    let zen3 = Caches {
        l1d: 32 << 10,
        l2: 512 << 10,
        l3: 32 << 20,
    };
    let k = CpuKernel::<f32, f32>::blocked(
        "x",
        (6, 16),
        generic_kernel::<f32, 6, 16>,
        zen3,
        Rule::L1Panel,
    );
    // The values measured best on Zen 3 for the AVX2 kernel.
    assert_eq!((k.kc, k.mc), (384, 144));
    assert_eq!(k.nc % 16, 0);
    let zen5 = Caches {
        l1d: 48 << 10,
        l2: 1 << 20,
        l3: 32 << 20,
    };
    let k = CpuKernel::<f32, f32>::blocked(
        "x",
        (14, 32),
        generic_kernel::<f32, 6, 16>,
        zen5,
        Rule::L2Panel,
    );
    // The values measured best on Zen 5 for the AVX-512 kernel.
    assert_eq!((k.kc, k.mc), (1024, 126));
    let kd = CpuKernel::<f64, f64>::blocked(
        "x",
        (14, 16),
        generic_kernel::<f64, 6, 8>,
        zen5,
        Rule::L2Panel,
    );
    // f64: the same bytes per step of B, twice the bytes per element of A.
    assert_eq!((kd.kc, kd.mc), (1024, 56));
    let kb = CpuKernel::<Bf16Pair, f32>::blocked(
        "x",
        (14, 32),
        |_, _, _, _, _, _, _, _, _| {},
        zen5,
        Rule::L2Panel,
    );
    // Pairs: the same bytes per step hold twice the k.
    assert_eq!((kb.kc, kb.mc), (2048, 126));
    // Caches smaller than any tile still give a usable blocking.
    let k = CpuKernel::<f64, f64>::blocked(
        "x",
        (6, 8),
        generic_kernel::<f64, 6, 8>,
        Caches {
            l1d: 1,
            l2: 1,
            l3: 1,
        },
        Rule::L1Panel,
    );
    assert!(
        k.kc >= 16 && k.mc >= 24 && k.nc >= 128,
        "{} {} {}",
        k.kc,
        k.mc,
        k.nc
    );
}

/// Shapes for the AMX loop nest with TINY caches (KC = 32 of k, MC = 32 rows, NC = 128
/// columns): one tile and less, edges in every direction, several slices, blocks and panels,
/// and one product big enough for two threads.
const AMX_SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 1),
    (32, 32, 32),
    (15, 33, 17),
    (33, 31, 33),
    (29, 70, 131),
    (57, 9, 300),
    (100, 130, 97),
    (260, 300, 231),
];

/// Runs the AMX loop nest (`amx::gemm_tiles`) with bf16 tile kernel `t` over AMX_SHAPES.
fn check_tiles(t: &amx::Tiles, name: &str) {
    check_tiles_of(t, name, bf16::from_f64, |x: bf16| x.to_f64());
}

/// As `check_tiles`, for f16 tile kernels (AMX-FP16).
fn check_tiles_f16(t: &amx::Tiles, name: &str) {
    check_tiles_of(t, name, half::f16::from_f64, |x: half::f16| x.to_f64());
}

fn check_tiles_of<S: amx::Half>(
    t: &amx::Tiles,
    name: &str,
    to: impl Fn(f64) -> S,
    back: impl Fn(S) -> f64,
) where
    Bf16Pair: PackFrom<S>,
{
    // SAFETY: check_with passes views over m x k and k x n values and a C of m * n; the
    // caller made `t` callable here, and for S.
    let run = |m, n, k, a, b, c: &mut [f32], threads, f: Finish<f32>| unsafe {
        amx::gemm_tiles(t, m, n, k, a, b, c, threads, Some(f))
    };
    // Products of two bf16 (or f16) are exact in f32; only the f32 sums round.
    check_with(name, &AMX_SHAPES, &[1, 2], to, back, 1e-6, run);
}

/// Packing (A in rows of pairs, B's micro-panels zero-padded to whole tiles of k), blocking,
/// edge tiles, finish and the thread split of the AMX path, on every machine: through
/// `tdpbf16ps`'s arithmetic written out in Rust (`amx::tile_portable`).
#[test]
fn amx_loop_nest_matches_the_naive_loop() {
    fn nothing() {}
    let t = amx::Tiles::blocked(amx::tile_portable::<bf16>, nothing, nothing, TINY);
    assert_eq!((t.ks, t.mc, t.nc), (16, 32, 128));
    check_tiles(&t, "amx-portable");
    // The same loop nest with f16 operands (AMX-FP16's `tdpfp16ps`).
    let t = amx::Tiles::blocked(amx::tile_portable::<half::f16>, nothing, nothing, TINY);
    check_tiles_f16(&t, "amx-fp16-portable");
}

/// Runs `check` with the tile kernel `t` found here, with small and with default blocking;
/// where there is none, prints why and skips, unless ACCEL_TEST_REQUIRE names amx and
/// `must_run` says the CPU should have had it.
fn tiles_or_skip(
    (status, t): (&Result<(), amx::Unavailable>, Option<amx::Tiles>),
    name: &str,
    check: fn(&amx::Tiles, &str),
    must_run: fn(Option<&amx::Unavailable>) -> bool,
) {
    match (status, t) {
        (Ok(()), Some(t)) => {
            let small = amx::Tiles {
                ks: 16,
                mc: 32,
                nc: 128,
                ..t
            };
            check(&small, name);
            check(&t, name);
        }
        (status, _) => {
            let e = status.as_ref().err();
            let why = e.map_or("no tiles", |e| e.why.as_str());
            assert!(
                !(accelkit_testkit::is_required("amx") && must_run(e)),
                "ACCEL_TEST_REQUIRE names amx, but {why}"
            );
            println!("skipped: amx: {why}");
        }
    }
}

/// The AMX kernel itself, where this CPU has AMX and Linux gives it to the process (the
/// self-check in `amx::status` has then passed too), with small and default blocking.
#[test]
fn amx_kernel_matches_the_naive_loop() {
    tiles_or_skip((amx::status(), amx::tiles()), "amx", check_tiles, |_| true);
}

/// The AMX-FP16 kernel, where this CPU has it (Granite Rapids on) and Linux gives the tiles
/// to the process. With ACCEL_TEST_REQUIRE=amx it must run wherever the CPU has AMX-FP16;
/// a CPU with AMX-BF16 only skips it.
#[test]
fn amx_fp16_kernel_matches_the_naive_loop() {
    tiles_or_skip(
        (amx::status_f16(), amx::tiles_f16()),
        "amx-fp16",
        check_tiles_f16,
        |e| e.is_some_and(|e| e.hardware),
    );
}
