//! Outer products (k = 1): C's rows are B's row scaled by A's values, no packing, no tiles.

use super::helper;
use super::kernel::Accum;
use super::pack::{MatRef, OutPtr, PackInto};
use super::Finish;

/// C = A B for k = 1, an outer product (`x.unsqueeze(1) @ y.unsqueeze(0)`): each row of C
/// is B's row (converted to D once) scaled by A's value, written once; two or more threads
/// split C's rows, and hand each block of rows to `finish` (bf16 and f16 results are
/// rounded from f32 there) as soon as it is written, while it is in L1. The blocked path ran
/// its tiles with one step of k each, all set-up and stores: f32 1024 x 1 by 1 x 1024 read
/// 4-7 GFLOP/s against PyTorch's 17-25 (Zen 4). (`CpuStorage::matmul` sends bf16 and f16
/// to `gemm_rounded` instead.)
///
/// # Safety
/// As for the parent's `gemm_with` with k = 1.
pub(super) unsafe fn gemm<S: PackInto<D>, D: Accum>(
    m: usize,
    n: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [D],
    threads: usize,
    finish: Option<Finish<D>>,
) {
    let row: Vec<D> = (0..n).map(|j| b.at(0, j).conv()).collect();
    let cp = OutPtr(c.as_mut_ptr());
    blocks::<D>(m, n, threads, |rows, _| {
        for i in rows.clone() {
            // SAFETY: A's element (i, 0) is valid (i < m) and C holds m * n elements (the
            // caller's contract); each block of rows is handed to one thread only.
            let (x, out) = unsafe {
                let x: D = a.at(i, 0).conv();
                (x, std::slice::from_raw_parts_mut(cp.get().add(i * n), n))
            };
            scale(x, &row, out);
        }
        if let Some(f) = finish {
            f(cp.get(), rows, 0..n);
        }
    });
}

/// C = A B for k = 1 with C in bf16 or f16 (`H`): each row of C is B's row (in f32) times
/// A's value, rounded by `conv(row of C, B's row, A's value)` as it is written, once, in its
/// own type. Through `gemm` and `Finish`, an f32 C of m x n went to memory and back: bf16
/// 4096 x 1 by 1 x 1024 read 12.3 GFLOP/s against PyTorch's 42.5 (Zen 4); then through a
/// block of 16 KiB of f32 rows in L1, 28 GFLOP/s; rounded as it is scaled, 37.
///
/// # Safety
/// A readable for m x 1 values and B for 1 x n (`MatRef`'s strides); `c` holds m * n.
pub(crate) unsafe fn gemm_rounded<S: PackInto<f32>, H: Send + Copy>(
    m: usize,
    n: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [H],
    threads: usize,
    conv: fn(&mut [H], &[f32], f32),
) {
    let row: Vec<f32> = (0..n).map(|j| b.at(0, j).conv()).collect();
    let cp = OutPtr(c.as_mut_ptr());
    blocks::<f32>(m, n, threads, |rows, _| {
        for i in rows {
            // SAFETY: A's element (i, 0) is valid (i < m, the caller's contract); C holds
            // m * n elements and each row is handed to one thread only.
            let (x, out) = unsafe {
                let x: f32 = a.at(i, 0).conv();
                (x, std::slice::from_raw_parts_mut(cp.get().add(i * n), n))
            };
            conv(out, &row, x);
        }
    });
}

/// `out = x * row`, element by element, `num::vectorised` (the portable build's loop multiplies 4 f32 at a time: 43% of a bf16 4096 x 1 by
/// 1 x 1024 product's time went to it, the rest to rounding into C).
fn scale<D: Accum>(x: D, row: &[D], out: &mut [D]) {
    crate::backend::cpu::num::vectorised(|| {
        for (o, &y) in out.iter_mut().zip(row) {
            *o = x * y;
        }
    })
}

/// Runs `f` on blocks of C's m rows (16 KiB of n elements of D a block), split between up
/// to `threads` threads from 2^16 elements of C, each block once, with a scratch buffer
/// owned by the thread (empty until `f` grows it).
fn blocks<D: Accum>(
    m: usize,
    n: usize,
    threads: usize,
    f: impl Fn(std::ops::Range<usize>, &mut Vec<D>) + Sync + Send,
) {
    let parts = if threads > 1 && m * n >= 1 << 16 {
        threads.min(m)
    } else {
        1
    };
    let per = m.div_ceil(parts.max(1));
    let mut ranges: Vec<_> = (0..parts)
        .map(|t| (t * per).min(m)..((t + 1) * per).min(m))
        .filter(|r| !r.is_empty())
        .collect();
    // Rows a block: 16 KiB of C.
    let block = ((16 << 10) / (n * std::mem::size_of::<D>()).max(1)).max(1);
    helper::for_each_part(&mut ranges, |_, r| {
        let mut tmp = Vec::new();
        let mut i0 = r.start;
        while i0 < r.end {
            let rows = i0..(i0 + block).min(r.end);
            f(rows.clone(), &mut tmp);
            i0 = rows.end;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::tests::{values, view};
    use super::super::{gemm_bf16, gemm_f16, gemm_float};
    use super::*;
    use half::bf16;

    /// k = 1 (`gemm`) through each entry that takes it (`gemm_float` for f32 and f64,
    /// `gemm_bf16`, `gemm_f16`), and `gemm_rounded` into bf16 and f16: A and B row-major and
    /// transposed, one and two threads (C of 2^16 elements and more splits), every element
    /// equal to the product of the two values (exact for bf16 and f16 in f32, then rounded
    /// once into C's type; one rounding in f32 and f64, as the naive product).
    #[test]
    fn outer_products_equal_each_pair_of_values() {
        fn check<S: Copy, D: Copy + PartialEq + std::fmt::Debug>(
            to: impl Fn(f64) -> S,
            conv: impl Fn(S) -> D,
            mul: impl Fn(D, D) -> D,
            run: impl Fn(usize, usize, MatRef<S>, MatRef<S>, &mut [D], usize),
            zero: D,
        ) {
            for (m, n) in [(1, 1), (3, 5), (300, 700), (1000, 70)] {
                let a: Vec<S> = values(m, 11).into_iter().map(&to).collect();
                let b: Vec<S> = values(n, 12).into_iter().map(&to).collect();
                // A m x 1 (rows 1 apart, or its one column m apart as if transposed), B 1 x n.
                for (ars, acs, brs, bcs) in [(1, 1, n, 1), (1, m, 1, 1)] {
                    for threads in [1, 2] {
                        let mut c = vec![zero; m * n];
                        run(
                            m,
                            n,
                            view(&a, ars, acs),
                            view(&b, brs, bcs),
                            &mut c,
                            threads,
                        );
                        for (e, &g) in c.iter().enumerate() {
                            let (i, j) = (e / n, e % n);
                            let want = mul(conv(a[i * ars]), conv(b[j * bcs]));
                            assert_eq!(g, want, "{m}x{n} threads {threads} at ({i}, {j})");
                        }
                    }
                }
            }
        }
        check(
            |x| x as f32,
            |x| x,
            |x, y| x * y,
            |m, n, a, b, c, t| {
                // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
                unsafe { gemm_float(m, n, 1, a, b, c, t, None) }
            },
            0f32,
        );
        check(
            |x| x,
            |x| x,
            |x, y| x * y,
            |m, n, a, b, c, t| {
                // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
                unsafe { gemm_float(m, n, 1, a, b, c, t, None) }
            },
            0f64,
        );
        check(
            bf16::from_f64,
            |x: bf16| x.to_f32(),
            |x, y| x * y,
            |m, n, a, b, c, t| {
                // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
                unsafe { gemm_bf16(m, n, 1, a, b, c, t, None) }
            },
            0f32,
        );
        check(
            half::f16::from_f64,
            |x: half::f16| x.to_f32(),
            |x, y| x * y,
            |m, n, a, b, c, t| {
                // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
                unsafe { gemm_f16(m, n, 1, a, b, c, t, None) }
            },
            0f32,
        );
        // `gemm_rounded`: C in bf16 and f16 directly through the rounders `CpuStorage::matmul`
        // gives it, each element the f32 product rounded once (by `half`'s conversion here).
        fn rounded<H: PackInto<f32> + PartialEq + std::fmt::Debug>(
            from: fn(f32) -> H,
            to: fn(H) -> f32,
            conv: fn(&mut [H], &[f32], f32),
        ) {
            for (m, n) in [(1, 1), (3, 5), (300, 700), (1000, 70), (4096, 33)] {
                let a: Vec<H> = values(m, 13).into_iter().map(|x| from(x as f32)).collect();
                let b: Vec<H> = values(n, 14).into_iter().map(|x| from(x as f32)).collect();
                for (ars, acs, brs, bcs) in [(1, 1, n, 1), (1, m, 1, 1)] {
                    for threads in [1, 2] {
                        let mut c = vec![from(7.0); m * n];
                        let (av, bv) = (view(&a, ars, acs), view(&b, brs, bcs));
                        // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
                        unsafe { gemm_rounded(m, n, av, bv, &mut c, threads, conv) };
                        for (e, &g) in c.iter().enumerate() {
                            let (i, j) = (e / n, e % n);
                            let want = from(to(a[i * ars]) * to(b[j * bcs]));
                            assert_eq!(g, want, "{m}x{n} threads {threads} at ({i}, {j})");
                        }
                    }
                }
            }
        }
        use crate::backend::cpu::float16::{scaled_to_bf16, scaled_to_f16};
        rounded(bf16::from_f32, bf16::to_f32, scaled_to_bf16);
        rounded(half::f16::from_f32, half::f16::to_f32, scaled_to_f16);
        // `finish` gets blocks of whole rows, complete when handed over, covering C once.
        let (m, n) = (1000, 300);
        let (a, b) = (vec![2f32; m], vec![3f32; n]);
        let mut c = vec![0f32; m * n];
        let seen = std::sync::Mutex::new(vec![0u32; m]);
        let finish = |p: *const f32, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
            assert_eq!(cols, 0..n);
            for i in rows {
                // SAFETY: `p` is C's first element and row i < m is complete (Finish's contract).
                let row = unsafe { std::slice::from_raw_parts(p.add(i * n), n) };
                assert!(
                    row.iter().all(|&x| x == 6.0),
                    "row {i} handed over incomplete"
                );
                seen.lock().unwrap()[i] += 1;
            }
        };
        // SAFETY: the views cover m x 1 and 1 x n values; c holds m * n.
        unsafe {
            gemm_float(
                m,
                n,
                1,
                view(&a, 1, 1),
                view(&b, n, 1),
                &mut c,
                2,
                Some(&finish),
            )
        };
        assert!(seen.into_inner().unwrap().iter().all(|&t| t == 1));
    }
}
