//! Word transposes with AVX-512 and AVX2 for `pack_a` and `pack_b`.

use std::arch::x86_64::*;

/// The panel height these transposes fill (the AVX-512 kernels' MR).
pub(super) const ROWS: usize = 14;

/// Whether the AVX-512 transposes may run: the CPU has AVX-512F and `ACCEL_CPU_KERNEL`
/// allows that family (`kernel::usable`).
pub(super) fn usable() -> bool {
    super::super::kernel::usable("avx512")
}

/// Whether the AVX2 transposes may run (`kernel::usable`).
pub(super) fn avx2() -> bool {
    super::super::kernel::usable("avx2")
}

/// The widest vectors, in bytes, the transposes may use here (`kernel::vector_bytes`).
pub(super) fn width() -> Option<usize> {
    super::super::kernel::vector_bytes()
}

/// Writes `steps` (a multiple of 16) steps of a 14-tall panel of 32-bit words: word s of
/// row i (at `rows[i] + 4 s`) to `dst[s * 14 + i]`, for i < h (lanes h..14 are not
/// written).
///
/// # Safety
/// As for [`transpose32`], with stride 14 and h <= 14: all 14 `rows` are read.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose14(rows: &[*const u8; ROWS], h: usize, steps: usize, dst: *mut u32) {
    transpose32::<ROWS>(rows, steps, dst, ROWS, ((1u32 << h) - 1) as u16)
}

/// Writes `steps` (a multiple of 16) steps of R (up to 16) rows of 32-bit words,
/// transposed: word s of row i (at `rows[i] + 4 s`) to `dst[s * stride + i]`, for the
/// lanes i in `mask` (lanes from R on are zero). Each 16 steps: R row loads, a 16 x 16
/// transpose (unpacks of 32 and 64 bits, then two rounds of 128-bit lane shuffles), 16
/// masked stores. (R is a constant: with a slice of rows the loop kept its 16 vectors
/// on the stack, 22% of 256 x 1024 by a transposed 1024 x 1024.)
///
/// # Safety
/// The CPU must have AVX-512F; `rows[i]` readable for 4 * steps bytes; `dst + s *
/// stride` writable for the lanes of `mask`, for every s < steps.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose32<const R: usize>(
    rows: &[*const u8; R],
    steps: usize,
    dst: *mut u32,
    stride: usize,
    mask: u16,
) {
    for s0 in (0..steps).step_by(16) {
        let mut r = [_mm512_setzero_si512(); 16];
        for i in 0..R.min(16) {
            r[i] = _mm512_loadu_si512(rows[i].add(4 * s0) as *const __m512i);
        }
        // t[2j] lane L: (r2j c0, r2j+1 c0, r2j c1, r2j+1 c1), c = 4L..; t[2j+1]: c2, c3.
        let mut t = [_mm512_setzero_si512(); 16];
        for j in 0..8 {
            t[2 * j] = _mm512_unpacklo_epi32(r[2 * j], r[2 * j + 1]);
            t[2 * j + 1] = _mm512_unpackhi_epi32(r[2 * j], r[2 * j + 1]);
        }
        // u[4j + q] lane L: column 4L + q of rows 4j..4j + 4.
        let mut u = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            u[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
            u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
            u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
            u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
        }
        // Column 4L + q = lanes L of u[q], u[4 + q], u[8 + q], u[12 + q].
        for q in 0..4 {
            let cols = lanes(u[q], u[4 + q], u[8 + q], u[12 + q]);
            for (l, col) in cols.into_iter().enumerate() {
                let st = s0 + 4 * l + q;
                _mm512_mask_storeu_epi32(dst.add(st * stride) as *mut i32, mask, col);
            }
        }
    }
}

/// As [`transpose32`] for 64-bit words: R (up to 8) rows, `steps` a multiple of 8, word
/// s of row i (at `rows[i] + 8 s`) to `dst[s * stride + i]` for the lanes i in `mask`.
/// Each 8 steps: R row loads, unpacks of 64 bits, one round of lane shuffles, 8 masked
/// stores.
///
/// # Safety
/// The CPU must have AVX-512F; `rows[i]` readable for 8 * steps bytes; `dst + s *
/// stride` writable for the lanes of `mask`, for every s < steps.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose64<const R: usize>(
    rows: &[*const u8; R],
    steps: usize,
    dst: *mut u64,
    stride: usize,
    mask: u8,
) {
    for s0 in (0..steps).step_by(8) {
        let mut r = [_mm512_setzero_si512(); 8];
        for i in 0..R.min(8) {
            r[i] = _mm512_loadu_si512(rows[i].add(8 * s0) as *const __m512i);
        }
        // t[2j] lane L: (r2j c, r2j+1 c) for c = 2L; t[2j+1]: the same for c = 2L + 1.
        let mut t = [_mm512_setzero_si512(); 8];
        for j in 0..4 {
            t[2 * j] = _mm512_unpacklo_epi64(r[2 * j], r[2 * j + 1]);
            t[2 * j + 1] = _mm512_unpackhi_epi64(r[2 * j], r[2 * j + 1]);
        }
        // Column 2L + p = lanes L of t[p], t[2 + p], t[4 + p], t[6 + p].
        for p in 0..2 {
            let cols = lanes(t[p], t[2 + p], t[4 + p], t[6 + p]);
            for (l, col) in cols.into_iter().enumerate() {
                let st = s0 + 2 * l + p;
                _mm512_mask_storeu_epi64(dst.add(st * stride) as *mut i64, mask, col);
            }
        }
    }
}

/// As [`transpose32`] with AVX2's 8-lane vectors, for R (up to 8) rows, all read:
/// `steps` a multiple of 8, word s of row i (at `rows[i] + 4 s`) to `dst[s * stride +
/// i]` for the first KEEP lanes (lanes from R on are zero). Each 8 steps: R row loads,
/// unpacks of 32 bits, shuffles of 64-bit pairs, then 128-bit halves swapped, 8 stores.
/// The words are moved as f32 lanes: shuffles keep every bit, NaN payloads included.
/// (Rows and lanes are constants: with a count of rows and a lane mask as arguments the
/// loop tested each and spilled its vectors, and ran slower than a scalar copy.)
///
/// # Safety
/// The CPU must have AVX2; `rows[i]` readable for 4 * steps bytes; KEEP is 8, or
/// `stride` itself (a panel of fewer than 8 rows, steps adjacent: each step's store of 8
/// lanes runs into the next step's first ones, stored over afterwards, and the last
/// step stores KEEP); `dst + s * stride` writable for KEEP values, for every s < steps.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose32_avx2<const R: usize, const KEEP: usize>(
    rows: &[*const u8; R],
    steps: usize,
    dst: *mut f32,
    stride: usize,
) {
    for s0 in (0..steps).step_by(8) {
        let mut r = [_mm256_setzero_ps(); 8];
        for i in 0..R.min(8) {
            r[i] = _mm256_loadu_ps(rows[i].add(4 * s0) as *const f32);
        }
        // t[2j] half H: (r2j c, r2j+1 c, r2j c+1, r2j+1 c+1) for c = 4H; t[2j+1]: c = 4H + 2.
        let mut t = [_mm256_setzero_ps(); 8];
        for j in 0..4 {
            t[2 * j] = _mm256_unpacklo_ps(r[2 * j], r[2 * j + 1]);
            t[2 * j + 1] = _mm256_unpackhi_ps(r[2 * j], r[2 * j + 1]);
        }
        // u[4h + q] half H: column 4H + q of rows 4h..4h + 4.
        let mut u = [_mm256_setzero_ps(); 8];
        for h in 0..2 {
            let (a, b, c, d) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
            u[4 * h] = _mm256_shuffle_ps::<0x44>(a, c);
            u[4 * h + 1] = _mm256_shuffle_ps::<0xEE>(a, c);
            u[4 * h + 2] = _mm256_shuffle_ps::<0x44>(b, d);
            u[4 * h + 3] = _mm256_shuffle_ps::<0xEE>(b, d);
        }
        // Column q: the low halves of u[q] and u[4 + q]; column 4 + q: their high
        // halves. Stored in order of steps (see KEEP).
        for q in 0..4 {
            let lo = _mm256_permute2f128_ps::<0x20>(u[q], u[4 + q]);
            _mm256_storeu_ps(dst.add((s0 + q) * stride), lo);
        }
        for q in 0..4 {
            let hi = _mm256_permute2f128_ps::<0x31>(u[q], u[4 + q]);
            let to = dst.add((s0 + 4 + q) * stride);
            if KEEP == 8 || s0 + 4 + q + 1 < steps {
                _mm256_storeu_ps(to, hi);
            } else {
                let mut last = [0f32; 8];
                _mm256_storeu_ps(last.as_mut_ptr(), hi);
                std::ptr::copy_nonoverlapping(last.as_ptr(), to, KEEP);
            }
        }
    }
}

/// As [`transpose32_avx2`] for 64-bit words: 4 rows, `steps` a multiple of 4, word s of
/// row i (at `rows[i] + 8 s`) to `dst[s * stride + i]` for all 4 lanes. Each 4 steps: 4
/// row loads, unpacks of 64 bits, 128-bit halves swapped, 4 stores.
///
/// # Safety
/// The CPU must have AVX2; `rows[i]` readable for 8 * steps bytes; `dst + s * stride`
/// writable for 4 values, for every s < steps.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose64_avx2(
    rows: &[*const u8; 4],
    steps: usize,
    dst: *mut f64,
    stride: usize,
) {
    for s0 in (0..steps).step_by(4) {
        let mut r = [_mm256_setzero_pd(); 4];
        for i in 0..4 {
            r[i] = _mm256_loadu_pd(rows[i].add(8 * s0) as *const f64);
        }
        // t[2j] half H: (r2j c, r2j+1 c) for c = 2H; t[2j+1]: c = 2H + 1.
        let t = [
            _mm256_unpacklo_pd(r[0], r[1]),
            _mm256_unpackhi_pd(r[0], r[1]),
            _mm256_unpacklo_pd(r[2], r[3]),
            _mm256_unpackhi_pd(r[2], r[3]),
        ];
        for p in 0..2 {
            let lo = _mm256_permute2f128_pd::<0x20>(t[p], t[2 + p]);
            let hi = _mm256_permute2f128_pd::<0x31>(t[p], t[2 + p]);
            _mm256_storeu_pd(dst.add((s0 + p) * stride), lo);
            _mm256_storeu_pd(dst.add((s0 + 2 + p) * stride), hi);
        }
    }
}

/// The four vectors made of 128-bit lane L of a, b, c and d, for L = 0..4.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn lanes(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> [__m512i; 4] {
    let ab_lo = _mm512_shuffle_i32x4::<0x44>(a, b);
    let ab_hi = _mm512_shuffle_i32x4::<0xEE>(a, b);
    let cd_lo = _mm512_shuffle_i32x4::<0x44>(c, d);
    let cd_hi = _mm512_shuffle_i32x4::<0xEE>(c, d);
    [
        _mm512_shuffle_i32x4::<0x88>(ab_lo, cd_lo),
        _mm512_shuffle_i32x4::<0xDD>(ab_lo, cd_lo),
        _mm512_shuffle_i32x4::<0x88>(ab_hi, cd_hi),
        _mm512_shuffle_i32x4::<0xDD>(ab_hi, cd_hi),
    ]
}
