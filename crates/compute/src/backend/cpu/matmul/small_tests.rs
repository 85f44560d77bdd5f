//! The small-product path (`gemm_small`, no packing): which products take it, how two
//! threads split C's rows, and its kernels against a naive f64 loop.
#[cfg(target_arch = "x86_64")]
use super::micro::*;
use super::small::*;
#[cfg(target_arch = "x86_64")]
use super::tests::{assert_near, naive, values, view, SHAPES};
use super::*;

/// Runs the small-product path with kernel `small` (tile `tile`) on odd shapes, A row-major
/// and transposed, B row-major with padded rows (so full-width strips are read in place and
/// the last strip is copied), against the naive loop within `tol` x k.
#[cfg(target_arch = "x86_64")]
fn check_small<D: Accum + Into<f64>>(
    small: kernel::SmallKernel<D>,
    tile: (usize, usize),
    to: impl Fn(f64) -> D,
    tol: f64,
) {
    let shapes = SHAPES
        .iter()
        .copied()
        // m = 21 and 22: a last tile of 7 rows (half a tile's work) and of 8; n = 16 and 8:
        // one vector of f32 or f64 columns in all (the kernels' narrow loop).
        .chain([
            (28, 16, 40),
            (42, 8, 33),
            (13, 64, 5),
            (28, 96, 64),
            (3, 31, 200),
            (64, 64, 64),
            (21, 40, 17),
            (22, 40, 17),
        ]);
    for ((m, n, k), mb) in shapes.flat_map(|s| [(s, tile.0), (s, usize::MAX / 2)]) {
        for ta in [false, true] {
            let brs = n + 3;
            let a: Vec<D> = values(m * k, 3).into_iter().map(&to).collect();
            let b: Vec<D> = values(k * brs, 4).into_iter().map(&to).collect();
            let (af, bf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| x.into()).collect(),
                b.iter().map(|&x| x.into()).collect(),
            );
            let (ars, acs) = if ta { (1, m) } else { (k, 1) };
            let want = naive(m, n, k, (&af, ars, acs), (&bf, brs, 1));
            let mut c = vec![D::default(); m * n];
            let ar = view(&a, ars, acs);
            let br = view(&b, brs, 1);
            // SAFETY: the views cover the m x k and k x (n + 3) values allocated above, b's
            // column stride is 1, c holds m * n, and the caller checked that the CPU has the
            // features `small` needs.
            unsafe {
                gemm_small(
                    small,
                    tile,
                    (m, mb),
                    n,
                    k,
                    ar,
                    (br, &last_strip(br, n, k, tile.1)),
                    (c.as_mut_ptr(), n),
                    0..n.div_ceil(tile.1),
                )
            };
            assert_near(&c, &want, k, tol, || {
                format!("small {m}x{n}x{k} ta={ta} mb={mb}")
            });
        }
    }
}

#[test]
fn the_small_path_takes_what_it_is_faster_for() {
    // Only the strides matter: nothing is read.
    let (x32, x64) = ([0f32; 1], [0f64; 1]);
    let b32 = |rs: usize| view(&x32, rs, 1);
    let b64 = |rs: usize| view(&x64, rs, 1);
    // f32 up to N=512, f64 up to N=322 (by multiply-adds); f32 up to N=645 where A fits in
    // 7/8 of L2 (1 MiB of A at N=512, 1.6 MiB at N=640).
    let small = |m, n, k, b, l2| takes(m, n, k, b, (14, 32), l2);
    let (mib, l2) = (1 << 20, 2 << 20);
    assert!(small(512, 512, 512, b32(520), mib));
    assert!(!small(513, 512, 512, b32(520), mib));
    assert!(small(640, 640, 640, b32(640), l2));
    assert!(!small(640, 640, 640, b32(640), mib));
    assert!(!small(700, 700, 700, b32(700), l2));
    assert!(!small(1024, 256, 1024, b32(256), l2));
    assert!(takes(320, 320, 320, b64(320), (14, 16), l2));
    assert!(!takes(384, 384, 384, b64(384), (14, 16), l2));
    // B's rows 4 KiB apart: packed, however few rows C has, with either kernel.
    assert!(!takes(256, 1024, 512, b32(1024), (14, 32), 1 << 20));
    assert!(!takes(112, 512, 256, b64(512), (14, 16), 1 << 20));
    assert!(!takes(12, 512, 256, b64(512), (14, 16), 1 << 20));
    assert!(!takes(28, 1024, 1024, b32(1024), (14, 32), 1 << 20));
    assert!(!takes(1, 1024, 1024, b32(1024), (6, 16), 1 << 20));
    assert!(takes(28, 1020, 1024, b32(1020), (14, 32), 1 << 20));
    // f32 rows 2 KiB apart with AVX-512's 128-byte strips: packed from 24 tiles of rows
    // and k 384; AVX2's 64-byte strips and f64 stay unpacked.
    assert!(!small(512, 512, 512, b32(512), mib));
    assert!(!small(336, 512, 512, b32(512), mib));
    assert!(small(335, 512, 512, b32(512), mib));
    assert!(small(512, 512, 383, b32(512), mib));
    assert!(takes(512, 512, 512, b32(512), (6, 16), mib));
    assert!(takes(256, 256, 256, b64(256), (14, 16), l2));
    // A padded row (not a multiple of 4 KiB) stays unpacked.
    assert!(takes(256, 1024, 512, b32(1028), (14, 32), 1 << 20));
    // No small path for k deeper than SMALL_MAX_K, B not unit-stride, or empty products.
    assert!(!takes(8, 8, 2048, b32(8), (14, 32), 1 << 20));
    assert!(!takes(8, 8, 8, view(&x32, 1, 8), (14, 32), 1 << 20));
    assert!(!takes(0, 8, 8, b32(8), (14, 32), 1 << 20));
    // A k under SMALL_MIN_K only for a C of up to 2^18 elements.
    assert!(small(256, 256, 32, b32(256), l2));
    assert!(small(512, 512, 64, b32(512), l2));
    assert!(!small(513, 512, 64, b32(512), l2));
    assert!(!small(1000, 1000, 32, b32(1000), l2));
    assert!(!small(2048, 512, 128, b32(512), l2));
    assert!(small(1024, 256, 256, b32(256), l2));
    assert!(!takes(1000, 1000, 32, b64(1000), (14, 16), l2));
}

#[test]
fn the_small_path_blocks_rows_by_half_of_l2() {
    let l2 = 2 << 20;
    // f32, k = 512: 2 KiB a row, 1 MiB = 512 rows, in tiles of 14: 504.
    assert_eq!(small_block_rows(512, 4, 14, l2), 504);
    assert_eq!(small_block_rows(512, 8, 6, l2), 252);
    // Never under 4 tiles, even for deep k and a small L2.
    assert_eq!(small_block_rows(1024, 8, 14, 512 << 10), 56);
    assert_eq!(small_block_rows(1024, 4, 6, 64 << 10), 24);
}

#[test]
fn the_small_path_splits_rows_in_half_tiles_and_evens_the_shares() {
    // Tiles a share of `rows` costs, in halves: whole tiles 2, a last one of up to 7 rows 1.
    let cost =
        |rows: usize| 2 * (rows / 14) + [0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2][rows % 14];
    for m in 28..2000 {
        let s = small_split(m, 14, true);
        assert!(s > 0 && s < m && s.is_multiple_of(7), "m = {m}: {s}");
        // Never worse than whole tiles for the first share, the split used before.
        let whole = (m / 2).next_multiple_of(14).min(m - 1);
        let worst = |s: usize| cost(s).max(cost(m - s));
        assert!(
            worst(s) <= worst(whole),
            "m = {m}: {s} ({}) against {whole} ({})",
            worst(s),
            worst(whole)
        );
        assert!(
            worst(s) <= cost(m) / 2 + 2,
            "m = {m}: {s} leaves one thread most of the work"
        );
    }
    // f32 N=256: 18 tiles and 4 rows as 9 tiles and 9 and a half.
    assert_eq!(small_split(256, 14, true), 126);
    assert_eq!(small_split(512, 14, true), 259);
}

#[test]
fn without_half_tiles_the_small_path_splits_rows_in_whole_tiles() {
    // AVX2's twins compute all 6 rows of a last tile: a share costs its tiles, rounded up.
    for m in 12..2000 {
        let s = small_split(m, 6, false);
        assert!(s > 0 && s < m && s.is_multiple_of(6), "m = {m}: {s}");
        let worst = s.div_ceil(6).max((m - s).div_ceil(6));
        assert_eq!(worst, m.div_ceil(6).div_ceil(2), "m = {m}: {s}");
    }
    // 5 tiles: 3 and 2, not 15 and 15 rows (3 and 3).
    assert_eq!(small_split(30, 6, false), 12);
}

#[test]
fn small_products_without_packing_match_the_naive_loop() {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        check_small(avx512::small_f32, (14, 32), |x| x as f32, 1e-6);
        check_small(avx512::small_f64, (14, 16), |x| x, 1e-15);
        return;
    }
    accelkit_testkit::skip(
        "avx512",
        "this CPU has no avx512f",
        "small_products_without_packing_match_the_naive_loop",
    );
}

#[test]
fn small_products_on_avx2_match_the_naive_loop() {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        check_small(avx2::small_f32, (6, 16), |x| x as f32, 1e-6);
        check_small(avx2::small_f64, (6, 8), |x| x, 1e-15);
        return;
    }
    accelkit_testkit::skip(
        "avx2",
        "this CPU has no avx2 and fma",
        "small_products_on_avx2_match_the_naive_loop",
    );
}

#[test]
fn small_products_through_the_entry_point_match_the_naive_loop() {
    // Through the entry point the CPU backend calls, with whatever kernel this CPU runs
    // (AVX-512's or AVX2's twin; the portable kernel has none and packs): the same values
    // as the packed kernel's.
    let (m, n, k) = (20, 45, 33);
    let a: Vec<f32> = values(m * k, 5).into_iter().map(|x| x as f32).collect();
    let b: Vec<f32> = values(k * n, 6).into_iter().map(|x| x as f32).collect();
    let (ar, br) = (view(&a, k, 1), view(&b, n, 1));
    let (mut c1, mut c2) = (vec![0f32; m * n], vec![0f32; m * n]);
    // SAFETY: as in check_small.
    unsafe {
        gemm_float(m, n, k, ar, br, &mut c1, 2, None);
        gemm_with(&f32::kernel(), m, n, k, ar, br, &mut c2, 1, None);
    }
    let close = c1
        .iter()
        .zip(&c2)
        .all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0));
    assert!(close, "{c1:?} vs {c2:?}");
    // Above SMALL_SPLIT_FLOPS on two threads (each claiming the column strips of its
    // share of rows, then the other's: 6 strips; 10, the last ragged), with an odd m and
    // a transposed A, against the naive loop.
    // And m x 64 x 1000 with two blocks of rows and more in each share.
    let kern = f32::kernel();
    let l2 = kernel::Caches::of_this_machine().l2;
    let mb = small_block_rows(1000, 4, kern.mr, l2);
    let tall = 2 * mb + 2 * kern.mr + 1;
    for (m, n, k) in [
        (201usize, 190usize, 131usize),
        (60, 300, 100),
        (tall, 64, 1000),
    ] {
        let a: Vec<f32> = values(m * k, 7).into_iter().map(|x| x as f32).collect();
        let b: Vec<f32> = values(k * n, 8).into_iter().map(|x| x as f32).collect();
        let (af, bf): (Vec<f64>, Vec<f64>) = (
            a.iter().map(|&x| x as f64).collect(),
            b.iter().map(|&x| x as f64).collect(),
        );
        assert!(m * n * k >= SMALL_SPLIT_FLOPS);
        assert!(takes(m, n, k, view(&b, n, 1), (kern.mr, kern.nr), l2));
        let want = naive(m, n, k, (&af, 1, m), (&bf, n, 1));
        let mut c = vec![0f32; m * n];
        let (ar, br) = (view(&a, 1, m), view(&b, n, 1));
        let check = |c: &[f32]| {
            assert_near(c, &want, k, 1e-6, || "split".to_string());
        };
        // SAFETY: A is read transposed (k x m storage, strides (1, m)); the views cover the
        // values allocated above; c holds m * n.
        unsafe { gemm_float(m, n, k, ar, br, &mut c, 2, None) };
        check(&c);
        // Four callers at once, repeatedly: one has the spinning helper, the others fall
        // back to rayon; every product must still be the naive loop's.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let mut c = vec![f32::NAN; m * n];
                        // SAFETY: as above.
                        unsafe { gemm_float(m, n, k, ar, br, &mut c, 2, None) };
                        check(&c);
                    }
                });
            }
        });
    }
}

/// Through the entry point, A's rows 4 KiB apart (a view of the first k columns of a wider
/// matrix), f32 and f64, on one and two threads: wide C copies A's blocks, C of one strip
/// runs tiles of half the rows (AVX-512), both the naive loop's values.
#[test]
fn rows_of_a_4_kib_apart_match_the_naive_loop() {
    fn run<D: Accum + Into<f64> + DotTile + Thin + PackFrom<D> + PackInto<D>>(
        to: impl Fn(f64) -> D,
        tol: f64,
    ) {
        let rs = 4096 / std::mem::size_of::<D>();
        let kern = D::kernel();
        let l2 = kernel::Caches::of_this_machine().l2;
        let mb = small_block_rows(300, std::mem::size_of::<D>(), kern.mr, l2);
        // Wider than a strip (copied), one strip, at most half of one, a last tile of 1 to
        // 13 rows, and more than one block of rows.
        let shapes = [
            (60, 3 * kern.nr + 5, 100),
            (61, kern.nr, 300),
            (75, (kern.nr / 2).max(9), 200),
            (2 * mb + 9, 2 * kern.nr, 300),
            (2 * mb + 3, 7 + kern.nr / 2, 300),
        ];
        for (m, n, k) in shapes {
            let a: Vec<D> = values(m * rs, 9).into_iter().map(&to).collect();
            let b: Vec<D> = values(k * n, 10).into_iter().map(&to).collect();
            let (af, bf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| x.into()).collect(),
                b.iter().map(|&x| x.into()).collect(),
            );
            let (ar, br) = (view(&a, rs, 1), view(&b, n, 1));
            assert!(
                takes(m, n, k, br, (kern.mr, kern.nr), l2),
                "{m} x {n} x {k}"
            );
            let want = naive(m, n, k, (&af, rs, 1), (&bf, n, 1));
            for threads in [1, 2] {
                let mut c = vec![D::default(); m * n];
                // SAFETY: A's view covers m rows of rs >= k values, B's k x n, c m x n.
                unsafe { gemm_float(m, n, k, ar, br, &mut c, threads, None) };
                assert_near(&c, &want, k, tol, || {
                    format!("{m} x {n} x {k}, {threads} threads,")
                });
            }
        }
    }
    run::<f32>(|x| x as f32, 1e-6);
    run::<f64>(|x| x, 1e-15);
}

/// A B of one strip of columns or less stored transposed (a Linear layer's n x k weight),
/// through the entry point: the small path copies its one strip from that layout (A's rows
/// 4 KiB apart too, at k = 1024 for f32).
#[test]
fn a_few_columns_of_a_transposed_b_match_the_naive_loop() {
    fn run<D: Accum + Into<f64> + DotTile + Thin + PackFrom<D> + PackInto<D>>(
        to: impl Fn(f64) -> D,
        tol: f64,
    ) {
        let nr = D::kernel().nr;
        let shapes = [
            (256, 10, 784),
            (129, nr / 2, 300),
            (128, 12, 1024),
            (100, 3, 40),
            // One whole strip, and one short of it, not narrow: copied all the same (from
            // 97 rows: fewer go to `dot_tiles`).
            (100, nr, 300),
            (101, nr - 5, 200),
            (129, nr, 1024),
        ];
        for (m, n, k) in shapes {
            let a: Vec<D> = values(m * k, 11).into_iter().map(&to).collect();
            let w: Vec<D> = values(n * k, 12).into_iter().map(&to).collect();
            let (af, wf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| x.into()).collect(),
                w.iter().map(|&x| x.into()).collect(),
            );
            // B = W^T: element (p, j) at j * k + p.
            let want = naive(m, n, k, (&af, k, 1), (&wf, 1, k));
            for threads in [1, 2] {
                let mut c = vec![D::default(); m * n];
                // SAFETY: A's view covers m x k values, B's (transposed) k x n, c m x n.
                unsafe {
                    gemm_float(
                        m,
                        n,
                        k,
                        view(&a, k, 1),
                        view(&w, 1, k),
                        &mut c,
                        threads,
                        None,
                    )
                };
                assert_near(&c, &want, k, tol, || {
                    format!("{m} x {n} x {k}, {threads} threads,")
                });
            }
        }
    }
    run::<f32>(|x| x as f32, 1e-6);
    run::<f64>(|x| x, 1e-15);
}
