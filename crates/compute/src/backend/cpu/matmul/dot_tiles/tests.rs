//! The tiles against the naive loop (`check`), A's rows 4 KiB apart (`check_aliased`).

use super::super::tests::{naive, values, view};
use super::*;

/// Edges in every direction (rows not a multiple of the tile's, columns neither, k not
/// of a vector), k over several chunks (AVX-512 f32 1024 a chunk, f64 512), the bounds
/// of m, one and two threads, with kernel `w`, against the naive loop in f64.
fn check<D: DotTile + Into<f64>>(w: Width, to: impl Fn(f64) -> D, tol: f64) {
    let shapes = [
        (MIN_M, TC + 1, MIN_K),
        (3, 50, 77),
        (8, 40, 512),
        (10, 7, 65),
        (13, 50, 100),
        (32, 61, 257),
        (max_m::<D>(w), 37, 1100),
        (23, 300, 2100),
    ];
    for (m, n, k) in shapes {
        let (a, b): (Vec<D>, Vec<D>) = (
            values(m * k, 3).into_iter().map(&to).collect(),
            values(k * n, 4).into_iter().map(&to).collect(),
        );
        let (af, bf): (Vec<f64>, Vec<f64>) = (
            a.iter().map(|&x| x.into()).collect(),
            b.iter().map(|&x| x.into()).collect(),
        );
        // A row-major, B transposed: stored n x k, read with strides (1, k).
        let want = naive(m, n, k, (&af, k, 1), (&bf, 1, k));
        let (ar, br) = (view(&a, k, 1), view(&b, 1, k));
        assert!(takes_at(w, m, n, k, ar, br), "{m}x{n}x{k}");
        // SAFETY: the views cover the m x k and n x k values above; `takes_at` said yes
        // and the caller checked that w runs here.
        unsafe { against(w, (m, n, k), (ar, br), &want, &to, tol, "") };
    }
    // Not taken: too few or too many rows, too few columns, too shallow, B row-major,
    // A transposed.
    for (m, n, k, (ars, acs), (brs, bcs)) in [
        (MIN_M - 1, 50, 100, (100, 1), (1, 100)),
        (max_m::<D>(w) + 1, 50, 100, (100, 1), (1, 100)),
        (20, TC, 100, (100, 1), (1, 100)),
        (20, 50, MIN_K - 1, (MIN_K - 1, 1), (1, MIN_K - 1)),
        (20, 50, 100, (100, 1), (50, 1)),
        (20, 50, 100, (1, 20), (1, 100)),
    ] {
        let (a, b) = (vec![to(1.0); 200 * 200], vec![to(1.0); 200 * 200]);
        let (ar, br) = (view(&a, ars, acs), view(&b, brs, bcs));
        assert!(!takes_at(w, m, n, k, ar, br), "{m}x{n}x{k}");
        if Width::here() == Some(w) {
            let mut c = vec![to(7.0); m * n];
            // SAFETY: every view reads inside the 200 x 200 values; c holds m * n.
            assert!(!unsafe { gemm(m, n, k, ar, br, &mut c, 2) });
            assert!(
                c.iter().all(|&x| x.into() == 7.0),
                "a refused product wrote C"
            );
        }
    }
}

/// `gemm_at` on one and two threads against `want` (the naive loop), within `tol` x k.
///
/// # Safety
/// As for `gemm_at`, with a fresh C of m * n values.
unsafe fn against<D: DotTile + Into<f64>>(
    w: Width,
    (m, n, k): (usize, usize, usize),
    (ar, br): (MatRef<D>, MatRef<D>),
    want: &[f64],
    to: impl Fn(f64) -> D,
    tol: f64,
    what: &str,
) {
    for threads in [1, 2] {
        let mut c = vec![to(7.0); m * n];
        // SAFETY: the caller's contract; c holds m * n.
        unsafe { gemm_at(w, m, n, k, ar, br, &mut c, threads) };
        for (e, (g, want)) in c.iter().zip(want).enumerate() {
            let g: f64 = (*g).into();
            assert!(
                (g - want).abs() <= tol * k as f64,
                "{w:?} {what} {m}x{n}x{k} threads {threads} at {e}: {g}, naive {want}"
            );
        }
    }
}

/// A's rows 4 KiB apart, which `unaliased` copies: k the whole row, and k short of it
/// with the rest of each row NaN (a read past k would carry it into C).
fn check_aliased<D: DotTile + Into<f64>>(w: Width, to: impl Fn(f64) -> D, tol: f64) {
    let ld = 4096 / std::mem::size_of::<D>();
    for (m, n, k) in [(max_m::<D>(w), 37, ld), (5, 20, ld - 24)] {
        let a: Vec<D> = values(m * ld, 5)
            .into_iter()
            .enumerate()
            .map(|(e, x)| to(if e % ld < k { x } else { f64::NAN }))
            .collect();
        let b: Vec<D> = values(k * n, 6).into_iter().map(&to).collect();
        let (af, bf): (Vec<f64>, Vec<f64>) = (
            a.iter().map(|&x| x.into()).collect(),
            b.iter().map(|&x| x.into()).collect(),
        );
        let want = naive(m, n, k, (&af, ld, 1), (&bf, 1, k));
        let (ar, br) = (view(&a, ld, 1), view(&b, 1, k));
        // SAFETY: the view covers m rows of k values.
        assert!(unsafe { unaliased(m, k, ar) }.0.is_some(), "{m}x{n}x{k}");
        let what = format!("A rows {ld} apart,");
        // SAFETY: as in `check`.
        unsafe { against(w, (m, n, k), (ar, br), &want, &to, tol, &what) };
    }
    // Rows 4 KiB apart but fewer values than k between them (overlapping), or one row
    // for all (stride 0): read in place.
    // Past MAX_A_COPY_BYTES (rows still 4 KiB apart): read in place.
    let big = MAX_A_COPY_BYTES / std::mem::size_of::<D>() / 4 + ld;
    let a = vec![to(1.0); 4 * big];
    // SAFETY: 4 rows of `big` values, `big` apart.
    let (copy, _) = unsafe { unaliased(4, big, view(&a, big, 1)) };
    assert!(copy.is_none(), "4 rows of {big} values");
    let a = vec![to(1.0); 3 * ld];
    for rs in [0, ld] {
        // SAFETY: two rows of ld + 1 values, 0 or ld apart, lie inside 3 ld values.
        let (copy, _) = unsafe { unaliased(2, ld + 1, view(&a, rs, 1)) };
        assert!(copy.is_none(), "rows {rs} apart, {} values each", ld + 1);
    }
}

/// Each kernel this CPU can run (AVX-512's and AVX2's), whichever `gemm` picks here.
#[test]
fn dot_tiles_match_the_naive_loop() {
    for (w, family) in [(Width::Avx512, "avx512"), (Width::Avx2, "avx2")] {
        if !super::super::kernel::usable(family) {
            accelkit_testkit::skip(
                family,
                &format!("this CPU has no {family} (or ACCEL_CPU_KERNEL forbids it)"),
                "dot_tiles_match_the_naive_loop",
            );
            continue;
        }
        check::<f32>(w, |x| x as f32, 1e-6);
        check::<f64>(w, |x| x, 1e-14);
        check_aliased::<f32>(w, |x| x as f32, 1e-6);
        check_aliased::<f64>(w, |x| x, 1e-14);
    }
}
