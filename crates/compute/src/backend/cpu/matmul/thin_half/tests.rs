//! `thin_half`'s loops against a naive f64 loop: both forms on every compiled copy, C's
//! tiles in registers for `x @ W` (AVX512_BF16 and AVX2), and where each path takes a product.
use super::super::tests::values;
use super::*;
use half::{bf16, f16};

/// Checks C (m x n, rows n apart) against `dot(i, j)`, the naive f64 sum over k, within
/// 1e-6 x k for f32 (the products are exact in f32; the sums' rounding is the bound) and
/// 1e-12 x k for f64, at the columns `cols`; elsewhere C must still hold the 7.0 it was
/// filled with. `what` names the case in a failure.
fn assert_naive<T: Copy + Into<f64> + std::fmt::Display>(
    c: &[T],
    n: usize,
    k: usize,
    cols: std::ops::Range<usize>,
    dot: impl Fn(usize, usize) -> f64,
    what: &str,
) {
    let tol = if std::mem::size_of::<T>() == 8 {
        1e-12
    } else {
        1e-6
    };
    for (e, &g) in c.iter().enumerate() {
        let (i, j) = (e / n, e % n);
        if !cols.contains(&j) {
            assert_eq!(g.into(), 7.0, "{what}: wrote ({i}, {j}) outside {cols:?}");
            continue;
        }
        let w = dot(i, j);
        assert!(
            (g.into() - w).abs() <= tol * k as f64,
            "{what} at ({i}, {j}): {g}, naive {w}"
        );
    }
}

/// Every shape of `thin`'s test that a form takes, both layouts of A and of B, one and
/// two threads, every compiled copy this CPU runs, against a naive f64 loop over the
/// same 16-bit values (the products are exact in f32; the sums' rounding is the bound).
fn check<S: Half + Into<f64>>(to: impl Fn(f64) -> S) {
    let shapes = [
        (1, 1, 1),
        (1, 4096, 300),
        (1, 37, 1000),
        (2, 600, 513),
        (3, 70, 5),
        (8, 33, 64),
        (8, 1000, 7),
        (300, 1, 1000),
        (129, 3, 70),
        (700, 8, 257),
        // Every count of few vectors (4 to 7 here), k with a whole turn, a single vector
        // and a tail (32 + 16 + 3).
        (4, 50, 51),
        (5, 40, 51),
        (90, 6, 51),
        (7, 9, 51),
        // Few vectors beyond FEW_BYTES: k in blocks (2 or 3, the last one short).
        (3, 20, 3000),
        (40, 5, 1000),
        // One few vector (bf16: four many vectors a call, `dots_pairs_many`) over two
        // blocks of k, with 1 many vector left over.
        (1, 9, 8300),
    ];
    for (m, n, k) in shapes {
        let a: Vec<S> = values(m * k, 1).into_iter().map(&to).collect();
        let b: Vec<S> = values(k * n, 2).into_iter().map(&to).collect();
        for (ars, acs) in [(k, 1), (1, m)] {
            for (brs, bcs) in [(n, 1), (1, k)] {
                let (ar, br) = (
                    MatRef {
                        ptr: a.as_ptr(),
                        rs: ars,
                        cs: acs,
                    },
                    MatRef {
                        ptr: b.as_ptr(),
                        rs: brs,
                        cs: bcs,
                    },
                );
                let want = |e: usize| -> f64 {
                    let (i, j) = (e / n, e % n);
                    (0..k)
                        .map(|p| a[i * ars + p * acs].into() * b[p * brs + j * bcs].into())
                        .sum()
                };
                // Each form whose own conditions hold (`thin::form`, whatever the
                // size of L2), on every compiled copy and on two threads.
                for f in [Form::Rows, Form::Dots] {
                    let takes = match f {
                        Form::Rows => bcs == 1 && m <= 8,
                        Form::Dots => acs == 1 && brs == 1 && (m <= 8 || n <= 8),
                    };
                    let top = thin::level();
                    let runs = (0..=top).map(|l| (1, l)).chain([(2, top)]);
                    for (threads, level) in runs.filter(|_| takes) {
                        let mut c = vec![7.0f32; m * n];
                        // SAFETY: the views cover the m x k and k x n values; c holds m * n;
                        // the strides are those form `f` needs (`takes`); level <= level().
                        unsafe { gemm_as(f, m, n, k, ar, br, &mut c, threads, level) };
                        for (e, &g) in c.iter().enumerate() {
                            let w = want(e);
                            assert!(
                                (g as f64 - w).abs() <= 1e-6 * k as f64,
                                "{f:?} {m}x{n}x{k} a ({ars}, {acs}) b ({brs}, {bcs}) \
                                 threads {threads} level {level} at {e}: {g}, naive {w}"
                            );
                        }
                    }
                }
                // `gemm` takes a product exactly where `thin::form` says, and leaves C
                // alone where it does not.
                for native in [false, true] {
                    let mut c = vec![7.0f32; m * n];
                    // SAFETY: as above.
                    let took = unsafe { gemm(m, n, k, ar, br, &mut c, 2, native) };
                    let l2 = Caches::of_this_machine().l2;
                    let f = thin::form(m, n, k, ar, br, l2);
                    assert_eq!(
                        took,
                        f.is_some_and(|f| pays(f, m, n, native, thin::level()))
                    );
                    if !took {
                        assert!(c.iter().all(|&x| x == 7.0), "a refused product wrote C");
                    }
                }
            }
        }
    }
}

/// `gemm_rows` against a naive f64 loop: every count of rows in a group (1 to 8) and
/// groups after the first (9, 13, 32), columns in whole slabs and masked tails, odd and
/// even k, A's rows or columns contiguous, one and two threads; where it refuses (B's
/// columns contiguous, too many rows, few columns beyond 8 rows) C is left alone.
#[test]
fn rows_tiles_match_the_naive_loop() {
    let test = "rows_tiles_match_the_naive_loop";
    let shapes = [
        (1, 1, 1),
        (1, 200, 3),
        (2, 1000, 77),
        (3, 130, 64),
        (4, 33, 2),
        (5, 64, 129),
        (6, 100, 31),
        (7, 96, 8),
        (8, 257, 300),
        (9, 128, 5),
        (13, 300, 101),
        (32, 160, 40),
        (33, 128, 64),
        (12, 100, 64),
    ];
    let mut ran = false;
    for (m, n, k) in shapes {
        let a: Vec<bf16> = values(m * k, 3).into_iter().map(bf16::from_f64).collect();
        let b: Vec<bf16> = values(k * n, 4).into_iter().map(bf16::from_f64).collect();
        for (ars, acs) in [(k, 1), (1, m)] {
            for (brs, bcs) in [(n, 1), (1, k)] {
                let ar = MatRef {
                    ptr: a.as_ptr(),
                    rs: ars,
                    cs: acs,
                };
                let br = MatRef {
                    ptr: b.as_ptr(),
                    rs: brs,
                    cs: bcs,
                };
                let takes = rows_takes(m, n, k, br, false);
                assert_eq!(
                    takes && bcs == 1,
                    takes,
                    "took B with its columns contiguous"
                );
                for threads in [1, 2] {
                    let mut c = vec![7.0f32; m * n];
                    // SAFETY: the views cover the m x k and k x n values; c holds m * n.
                    let took = unsafe { gemm_rows(m, n, k, ar, br, &mut c, threads, false) };
                    assert_eq!(took, takes);
                    if !took {
                        assert!(c.iter().all(|&x| x == 7.0), "a refused product wrote C");
                        continue;
                    }
                    ran = true;
                    let dot = |i: usize, j: usize| -> f64 {
                        (0..k)
                            .map(|p| {
                                f64::from(a[i * ars + p * acs]) * f64::from(b[p * brs + j * bcs])
                            })
                            .sum()
                    };
                    let what = format!("{m}x{n}x{k} a ({ars}, {acs}) threads {threads}");
                    assert_naive(&c, n, k, 0..n, dot, &what);
                }
            }
        }
        // Where AMX's tiles run the blocked path, only up to 8 rows.
        let br = MatRef {
            ptr: b.as_ptr(),
            rs: n,
            cs: 1,
        };
        assert!(!rows_takes(m, n, k, br, true) || m <= 8);
    }
    if !ran {
        let why = "this CPU has no AVX512_BF16 (or ACCEL_CPU_KERNEL forbids AVX-512): \
                   rows_tiles not run";
        accelkit_testkit::skip("avx512bf16", why, test);
    } else {
        // The refusals above: 33 rows, and 12 rows on 100 columns.
        let b = MatRef {
            ptr: std::ptr::null::<bf16>(),
            rs: 100,
            cs: 1,
        };
        assert!(!rows_takes(33, 128, 64, b, false) && !rows_takes(12, 100, 64, b, false));
        assert!(rows_takes(12, 128, 64, b, false) && rows_takes(8, 100, 64, b, false));
        // `rows_tiles` called directly: slabs smaller than a share of columns, and shares
        // that start inside a group of 32 columns.
        for (m, n, k) in [
            (1, 300, 7),
            (2, 300, 64),
            (3, 200, 33),
            (8, 170, 20),
            (11, 150, 9),
        ] {
            let a: Vec<bf16> = values(m * k, 7).into_iter().map(bf16::from_f64).collect();
            let b: Vec<bf16> = values(k * n, 8).into_iter().map(bf16::from_f64).collect();
            let br = MatRef {
                ptr: b.as_ptr(),
                rs: n,
                cs: 1,
            };
            for (cols, slab) in [(0..n, 32), (n / 3..n, 64), (16..n - 5, 96)] {
                let mut c = vec![7.0f32; m * n];
                let (ap, cp) = (a.as_ptr(), c.as_mut_ptr());
                // SAFETY: `a` holds m rows of k, B k rows of n, C m x n; cols inside 0..n;
                // the CPU has AVX-512F, AVX512BW and AVX512_BF16 (`rows_takes` held above).
                unsafe { avx512::rows_tiles(m, k, ap, k, br, cp, n, cols.clone(), slab) };
                let dot = |i: usize, j: usize| -> f64 {
                    (0..k)
                        .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                        .sum()
                };
                let what = format!("{m}x{n}x{k} cols {cols:?} slab {slab}");
                assert_naive(&c, n, k, cols, dot, &what);
            }
        }
    }
}

/// `gemm_rows_widened` end to end, for f32, bf16 and f16: A's rows or columns contiguous
/// (widened and copied together), one and two threads, against a naive f64 loop where it
/// takes the product; C untouched where it does not.
fn check_gemm_rows_widened<S: Half + Into<f64>>(to: impl Fn(f64) -> S) -> bool {
    let mut ran = false;
    for (m, n, k) in [
        (1, 200, 9),
        (4, 130, 65),
        (7, 96, 3),
        (12, 160, 40),
        (32, 128, 17),
    ] {
        let a: Vec<S> = values(m * k, 9).into_iter().map(&to).collect();
        let b: Vec<S> = values(k * n, 10).into_iter().map(&to).collect();
        let br = MatRef {
            ptr: b.as_ptr(),
            rs: n,
            cs: 1,
        };
        for (ars, acs) in [(k, 1), (1, m)] {
            let ar = MatRef {
                ptr: a.as_ptr(),
                rs: ars,
                cs: acs,
            };
            for threads in [1, 2] {
                let mut c = vec![7.0f32; m * n];
                // SAFETY: the views cover the m x k and k x n values; c holds m * n.
                let took = unsafe { gemm_rows_widened(m, n, k, ar, br, &mut c, threads, false) };
                assert_eq!(took, rows_widened_takes(m, n, k, br, false));
                if !took {
                    assert!(c.iter().all(|&x| x == 7.0), "a refused product wrote C");
                    continue;
                }
                ran = true;
                let dot = |i: usize, j: usize| -> f64 {
                    (0..k)
                        .map(|p| a[i * ars + p * acs].into() * b[p * n + j].into())
                        .sum()
                };
                let what = format!("{m}x{n}x{k} a ({ars}, {acs}) threads {threads}");
                assert_naive(&c, n, k, 0..n, dot, &what);
            }
        }
    }
    ran
}

#[test]
fn gemm_rows_widened_matches_the_naive_loop() {
    let ran = check_gemm_rows_widened::<f32>(|x| x as f32);
    let ran = check_gemm_rows_widened::<bf16>(bf16::from_f64) | ran;
    let ran = check_gemm_rows_widened::<f16>(f16::from_f64) | ran;
    if !ran {
        let why = "this CPU has neither AVX2 with F16C nor AVX-512 (or ACCEL_CPU_KERNEL \
                   forbids them): gemm_rows_widened takes nothing";
        accelkit_testkit::skip("avx2", why, "gemm_rows_widened_matches_the_naive_loop");
    }
}

/// The shapes (m, n, k) of C's tiles in registers for `x @ W`: every count of rows in a
/// group (1 to 8) and groups after the first (9, 13, 32), columns in whole wide groups,
/// single vectors and a last few (fewer than a vector, also alone).
#[cfg(target_arch = "x86_64")]
const ROWS_SHAPES: [(usize, usize, usize); 11] = [
    (1, 5, 3),
    (2, 40, 17),
    (3, 72, 64),
    (4, 33, 100),
    (5, 16, 9),
    (6, 100, 31),
    (7, 129, 8),
    (8, 70, 20),
    (9, 50, 7),
    (13, 64, 50),
    (32, 160, 40),
];

/// One compiled copy of `widened_rows!` (`copy`) against a naive f64 loop on every shape
/// of ROWS_SHAPES, with several slabs and a share of columns starting mid-vector; A's values
/// from `a_of`, B's from `b_of`.
#[cfg(target_arch = "x86_64")]
fn check_tiles<S: Copy + Into<f64>, T: Copy + Into<f64> + From<f32> + std::fmt::Display>(
    b_of: impl Fn(f64) -> S,
    a_of: impl Fn(f64) -> T,
    copy: Widened<S, T>,
    what: &str,
) {
    for (m, n, k) in ROWS_SHAPES {
        let a: Vec<T> = values(m * k, 5).into_iter().map(&a_of).collect();
        let b: Vec<S> = values(k * n, 6).into_iter().map(&b_of).collect();
        let br = MatRef {
            ptr: b.as_ptr(),
            rs: n,
            cs: 1,
        };
        for (cols, slab) in [(0..n, 32), (0..n, 1024), (n / 3..n, 64)] {
            let mut c = vec![T::from(7.0); m * n];
            let (ap, cp) = (a.as_ptr(), c.as_mut_ptr());
            // SAFETY: `a` holds m rows of k, B k rows of n, C m x n; cols inside 0..n; the
            // CPU has the copy's features (the caller checked).
            unsafe { copy(m, k, ap, k, br, cp, n, cols.clone(), slab) };
            let dot = |i: usize, j: usize| -> f64 {
                (0..k)
                    .map(|p| a[i * k + p].into() * b[p * n + j].into())
                    .sum()
            };
            let what = format!("{what} {m}x{n}x{k} cols {cols:?} slab {slab}");
            assert_naive(&c, n, k, cols, dot, &what);
        }
    }
}

/// `widened::rows_tiles_avx2` and `_avx512` (what `gemm_rows_widened` runs) for f32, bf16
/// and f16 (`check_tiles`): every count of rows in a group (1 to 8) and groups after the
/// first (9, 13, 32), columns in whole wide groups, single vectors and a last few (fewer
/// than a vector, also alone), several slabs; called directly, since `thin::level` picks
/// one of them only.
#[cfg(target_arch = "x86_64")]
fn check_rows_widened<S: Half + Into<f64>>(to: impl Fn(f64) -> S, avx512: bool) {
    let copy: Widened<S, f32> = if avx512 {
        widened::rows_tiles_avx512
    } else {
        widened::rows_tiles_avx2
    };
    check_tiles(&to, |x| to(x).conv(), copy, &format!("avx512 {avx512}"));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn rows_tiles_widened_match_the_naive_loop() {
    let test = "rows_tiles_widened_match_the_naive_loop";
    let has = |f: &[&str]| f.iter().all(|f| super::super::kernel::usable(f));
    for (avx512, ok) in [(false, has(&["avx2"])), (true, has(&["avx512"]))] {
        let ok = ok && std::is_x86_feature_detected!("f16c");
        if !ok {
            let (backend, what) = if avx512 {
                ("avx512", "AVX-512")
            } else {
                ("avx2", "AVX2")
            };
            let why = format!("this CPU has no {what} (or ACCEL_CPU_KERNEL forbids it)");
            accelkit_testkit::skip(backend, &why, test);
            continue;
        }
        check_rows_widened::<f32>(|x| x as f32, avx512);
        check_rows_widened::<bf16>(bf16::from_f64, avx512);
        check_rows_widened::<f16>(f16::from_f64, avx512);
    }
    // Where the product goes: f32 from 4 rows; bf16 and f16 from 1 with AVX2 the best this
    // process runs, from 3 with AVX-512; never B's columns contiguous, more than 32 rows,
    // or more than 8 where the blocked path is native.
    // (B of 256 x 256: within a quarter of any L3.)
    let b = MatRef {
        ptr: std::ptr::null::<f32>(),
        rs: 256,
        cs: 1,
    };
    let h = MatRef {
        ptr: std::ptr::null::<f16>(),
        rs: 256,
        cs: 1,
    };
    let level = thin::level();
    let f16c = std::is_x86_feature_detected!("f16c");
    let vector = level >= 1 && f16c;
    assert_eq!(rows_widened_takes(4, 256, 256, b, false), vector);
    assert_eq!(rows_widened_takes(3, 256, 256, h, false), vector);
    assert_eq!(
        rows_widened_takes(1, 256, 256, h, false),
        level == 1 && f16c
    );
    assert!(!rows_widened_takes(3, 256, 256, b, false));
    assert!(!rows_widened_takes(
        4,
        256,
        256,
        MatRef { cs: 2, ..h },
        false
    ));
    assert!(!rows_widened_takes(33, 256, 256, h, false));
    assert!(!rows_widened_takes(9, 256, 256, h, true));
    // f32 with B's rows 4 KiB apart: from 13 rows on AVX2 the blocked path packs B instead.
    let b1024 = MatRef { rs: 1024, ..b };
    assert_eq!(rows_widened_takes(12, 1024, 256, b1024, false), vector);
    assert_eq!(
        rows_widened_takes(13, 1024, 256, b1024, false),
        vector && level == 2
    );
    assert_eq!(
        rows_widened_takes(13, 1000, 256, MatRef { rs: 1000, ..b }, false),
        vector
    );
}

/// f64 `x @ W` on a few rows: both compiled copies of the tiles (`check_tiles`), then `gemm_rows_f64` end
/// to end (A's rows or columns contiguous, one and two threads, C untouched where it
/// declines), then where it goes: 3 to 32 rows with AVX-512, 2 to 10 with AVX2.
#[cfg(target_arch = "x86_64")]
#[test]
fn rows_tiles_f64_match_the_naive_loop() {
    let test = "rows_tiles_f64_match_the_naive_loop";
    let has = |f: &str| super::super::kernel::usable(f);
    for (avx512, ok, backend) in [
        (false, has("avx2"), "avx2"),
        (true, has("avx512"), "avx512"),
    ] {
        if ok {
            let copy: Widened<f64, f64> = if avx512 {
                widened::rows_tiles_f64_avx512
            } else {
                widened::rows_tiles_f64_avx2
            };
            check_tiles(|x| x, |x| x, copy, &format!("f64 avx512 {avx512}"));
        } else {
            let why = format!("this CPU has no {backend} (or ACCEL_CPU_KERNEL forbids it)");
            accelkit_testkit::skip(backend, &why, test);
        }
    }
    for (m, n, k) in [
        (2, 96, 3),
        (3, 200, 9),
        (10, 130, 65),
        (16, 512, 20),
        (32, 128, 17),
    ] {
        let (a, b) = (values(m * k, 9), values(k * n, 10));
        let br = MatRef {
            ptr: b.as_ptr(),
            rs: n,
            cs: 1,
        };
        for ((ars, acs), threads) in [((k, 1), 1), ((k, 1), 2), ((1, m), 2)] {
            let ar = MatRef {
                ptr: a.as_ptr(),
                rs: ars,
                cs: acs,
            };
            let mut c = vec![7.0f64; m * n];
            // SAFETY: the views cover the m x k and k x n values; c holds m * n.
            let took = unsafe { gemm_rows_f64(m, n, k, ar, br, &mut c, threads) };
            assert_eq!(took, rows_f64_takes(m, n, k, br));
            if !took {
                assert!(c.iter().all(|&x| x == 7.0), "a refused product wrote C");
                continue;
            }
            let dot = |i: usize, j: usize| -> f64 {
                (0..k).map(|p| a[i * ars + p * acs] * b[p * n + j]).sum()
            };
            let what = format!("f64 {m}x{n}x{k} a ({ars}, {acs}) threads {threads}");
            assert_naive(&c, n, k, 0..n, dot, &what);
        }
    }
    let b = MatRef {
        ptr: std::ptr::null::<f64>(),
        rs: 256,
        cs: 1,
    };
    let level = thin::level();
    assert_eq!(rows_f64_takes(2, 256, 256, b), level == 1);
    assert_eq!(rows_f64_takes(3, 256, 256, b), level >= 1);
    assert_eq!(rows_f64_takes(10, 256, 256, b), level >= 1);
    assert_eq!(rows_f64_takes(11, 256, 256, b), level == 2);
    assert_eq!(rows_f64_takes(32, 256, 256, b), level == 2);
    assert!(!rows_f64_takes(1, 256, 256, b));
    assert!(!rows_f64_takes(33, 256, 256, b));
    assert!(!rows_f64_takes(4, 256, 256, MatRef { cs: 2, ..b }));
}

#[test]
fn thin_half_products_match_the_naive_loop() {
    check::<bf16>(bf16::from_f64);
    check::<f16>(f16::from_f64);
    // The portable copy ran above; say which of the CPU's loops could not.
    let test = "thin_half_products_match_the_naive_loop";
    if thin::level() < 2 {
        let why = "this CPU has no AVX-512 (or ACCEL_CPU_KERNEL forbids it): dots_wide, \
                   dots_pairs, rows_wide and rows_pairs not run";
        accelkit_testkit::skip("avx512", why, test);
    } else if !super::super::dot_tiles::bf16_pairs_usable() {
        let why = "this CPU has no AVX512_BF16: dots_pairs and rows_pairs not run";
        accelkit_testkit::skip("avx512bf16", why, test);
    }
}
