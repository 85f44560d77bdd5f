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
/// 4-7 GFLOP/s against PyTorch's 17-25 (Zen 4).
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
    let block = (16 << 10) / (n * std::mem::size_of::<D>()).max(1);
    let block = block.max(1);
    let cp = OutPtr(c.as_mut_ptr());
    helper::for_each_part(&mut ranges, |_, r| {
        let mut i0 = r.start;
        while i0 < r.end {
            let rows = i0..(i0 + block).min(r.end);
            for i in rows.clone() {
                // SAFETY: A's element (i, 0) is valid (i < m) and C holds m * n elements
                // (the caller's contract); each part writes only its own rows of C.
                let (x, out) = unsafe {
                    let x: D = a.at(i, 0).conv();
                    (x, std::slice::from_raw_parts_mut(cp.get().add(i * n), n))
                };
                for (o, &y) in out.iter_mut().zip(&row) {
                    *o = x * y;
                }
            }
            if let Some(f) = finish {
                f(cp.get(), rows.clone(), 0..n);
            }
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
    /// `gemm_bf16`, `gemm_f16`): A and B row-major and transposed, one and two threads (C of
    /// 2^16 elements and more splits), every element equal to the product of the two values
    /// (exact for bf16 and f16 in f32; one rounding in f32 and f64, as the naive product).
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
