//! Packing against the layout the micro-kernels read: column-major B (a transposed view,
//! `x @ W.t()`) through each width of vector transposes this CPU has, against where each
//! value must land.
use super::pack::*;
use super::tests::{values, view};
use half::bf16;

/// The packed buffer of nr-wide panels `kstride` steps apart, as (step, column of B, value)
/// for each place: value (s, j) of panel q lies at q * kstride * nr + s * nr + j.
fn places<P>(dst: Vec<P>, kstride: usize, nr: usize) -> Vec<(usize, usize, P)> {
    let panel = kstride * nr;
    dst.into_iter()
        .enumerate()
        .map(|(e, x)| (e % panel / nr, e / panel * nr + e % nr, x))
        .collect()
}

/// Asserts that `packed` (from `places`) holds B's value (s, col) for each step s of `steps`
/// (B: kc x nc, column-major in `v`, one word a step), `zero` past the last column, and
/// `fill` (what the buffer held before) at every other step.
fn assert_words<T: Copy + PartialEq + std::fmt::Debug>(
    packed: Vec<(usize, usize, T)>,
    v: &[T],
    (kc, nc): (usize, usize),
    steps: &std::ops::Range<usize>,
    (fill, zero): (T, T),
    what: &str,
) {
    for (e, (s, col, got)) in packed.into_iter().enumerate() {
        let want = if !steps.contains(&s) {
            fill
        } else if col < nc {
            v[col * kc + s]
        } else {
            zero
        };
        assert_eq!(got, want, "{what}: kc {kc} nc {nc} steps {steps:?} at {e}");
    }
}

/// `pack_b` of a column-major B (a transposed view; vector transposes where the CPU has
/// them) puts value (s, j) of panel q at q * kstride * nr + s * nr + j, zero past the last
/// column, and writes nothing outside its steps: edges of vectors and panels in k and in
/// the columns, ranges of steps that start and end off a vector, kstride above ks.
#[test]
fn column_major_b_packs_by_the_layout() {
    /// pack_b of the kc x nc column-major B in `v` (strides 1, kc) over `steps`, into
    /// nr-wide panels `kstride` steps apart prefilled with `fill`: each place's (step, column
    /// of B, value).
    fn pack_columns<S: Copy + 'static, P: PackFrom<S>>(
        v: &[S],
        (kc, nc, nr): (usize, usize, usize),
        steps: std::ops::Range<usize>,
        kstride: usize,
        fill: P,
    ) -> Vec<(usize, usize, P)> {
        let len = kstride * nc.div_ceil(nr) * nr;
        let mut dst = vec![fill; len];
        // SAFETY: B is nc columns of kc contiguous values (strides 1, kc) inside v (the
        // callers' v holds kc * nc); dst holds len values, as asserted by pack_b.
        unsafe {
            pack_b(
                kc,
                nc,
                nr,
                view(v, 1, kc),
                steps,
                (OutPtr(dst.as_mut_ptr()), len),
                kstride,
            )
        };
        places(dst, kstride, nr)
    }
    fn check<T: PackFrom<T> + PartialEq + std::fmt::Debug + 'static>(
        to: impl Fn(f64) -> T,
        nr: usize,
    ) {
        for (kc, nc) in [(1, 1), (37, 45), (128, 64), (200, 33), (17, 70)] {
            let v: Vec<T> = values(kc * nc, 5).into_iter().map(&to).collect();
            for steps in [0..kc, 3.min(kc)..kc, kc / 2..kc, 0..kc.saturating_sub(5)] {
                let packed = pack_columns(&v, (kc, nc, nr), steps.clone(), kc + 5, to(9.0));
                let (fill, what) = ((to(9.0), to(0.0)), format!("nr {nr}"));
                assert_words(packed, &v, (kc, nc), &steps, fill, &what);
            }
        }
    }
    check(|x| x as f32, 32);
    check(|x| x as f32, 16);
    check(|x| x, 16);
    check(|x| x, 8);
    // 16-bit values in pairs of consecutive k (`Bf16Pair`), an odd kc's last step a single
    // value and a zero.
    fn pairs<S: Copy + 'static>(to: impl Fn(f64) -> S, bits: impl Fn(S) -> u16)
    where
        Bf16Pair: PackFrom<S>,
    {
        for (kc, nc) in [(1, 1), (37, 45), (128, 64), (201, 33)] {
            let v: Vec<S> = values(kc * nc, 6).into_iter().map(&to).collect();
            let ks = kc.div_ceil(2);
            for steps in [0..ks, 3.min(ks)..ks, ks / 2..ks, 0..ks.saturating_sub(5)] {
                let fill = Bf16Pair(u32::MAX);
                let packed = pack_columns(&v, (kc, nc, 32), steps.clone(), ks + 3, fill);
                for (e, (s, col, got)) in packed.into_iter().enumerate() {
                    let half = |p: usize| {
                        if p < kc {
                            bits(v[col * kc + p]) as u32
                        } else {
                            0
                        }
                    };
                    let want = if !steps.contains(&s) {
                        u32::MAX
                    } else if col < nc {
                        half(2 * s) | half(2 * s + 1) << 16
                    } else {
                        0
                    };
                    assert_eq!(got.0, want, "kc {kc} nc {nc} steps {steps:?} at {e}");
                }
            }
        }
    }
    pairs(bf16::from_f64, |x| x.to_bits());
    pairs(half::f16::from_f64, |x| x.to_bits());
}

/// `cols_simd` with each vector width this CPU can run (AVX2's 32 bytes, AVX-512's 64),
/// whichever `pack_b` picks here: value (s, j) of panel q at q * kstride * nr + s * nr + j,
/// zero past the last column, nothing written outside its steps; f32 and f64 words, panels
/// of one and two vectors, steps that start and end off a vector.
#[cfg(target_arch = "x86_64")]
#[test]
fn column_transposes_of_each_width_match_the_layout() {
    fn check<T: Copy + PartialEq + std::fmt::Debug>(to: impl Fn(f64) -> T, vbytes: usize) {
        let word = size_of::<T>();
        let lanes = vbytes / word;
        for nr in [lanes, 2 * lanes, 64 / word] {
            for (kc, nc) in [(1, 1), (37, 45), (128, 64), (200, 33), (17, 70)] {
                let v: Vec<T> = values(kc * nc, 7).into_iter().map(&to).collect();
                for steps in [0..kc, 3.min(kc)..kc, kc / 2..kc, 0..kc.saturating_sub(5)] {
                    let kstride = kc + 5;
                    let mut dst = vec![to(9.0); kstride * nc.div_ceil(nr) * nr];
                    // SAFETY: B is nc columns of kc contiguous values inside v (strides 1,
                    // kc), one word per step; dst holds every panel, kstride steps apart;
                    // the CPU has the width's features (checked by the caller) and nr is a
                    // multiple of its lanes.
                    unsafe {
                        cols_simd(
                            nc,
                            nr,
                            view(&v, 1, kc),
                            steps.clone(),
                            1,
                            (dst.as_mut_ptr() as *mut u8, kstride),
                            (word, vbytes),
                        )
                    };
                    let (fill, what) = ((to(9.0), to(0.0)), format!("{vbytes} bytes, nr {nr}"));
                    assert_words(places(dst, kstride, nr), &v, (kc, nc), &steps, fill, &what);
                }
            }
        }
    }
    let widths = [
        (32, "avx2", std::is_x86_feature_detected!("avx2")),
        (64, "avx512", std::is_x86_feature_detected!("avx512f")),
    ];
    for (vbytes, family, has) in widths {
        if has {
            check(|x| x as f32, vbytes);
            check(|x| x, vbytes);
        } else {
            accelkit_testkit::skip(
                family,
                &format!("this CPU has no {vbytes}-byte vectors for the transposes"),
                "column_transposes_of_each_width_match_the_layout",
            );
        }
    }
}
