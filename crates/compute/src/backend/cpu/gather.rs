//! Contiguous copies of strided views: runs of the innermost dimension, and transposes in
//! tiles.

use std::borrow::Cow;

use rayon::prelude::*;

use super::alloc;
use super::storage::for_chunks;
use crate::base::shape::{for_each_run, Layout};

/// The view `l` of `v` as one slice in its own order: `v`'s own elements where the view is
/// contiguous (a reduction reads them once: a copy first cost as much again), else a copy.
pub(super) fn in_place_or_gathered<'a, T: alloc::ZeroBits + Send + Sync + Clone>(
    v: &'a [T],
    l: &Layout,
) -> Cow<'a, [T]> {
    let n = l.shape.elem_count();
    if l.is_contiguous() {
        Cow::Borrowed(&v[l.offset..l.offset + n])
    } else {
        Cow::Owned(gather(v, l))
    }
}

/// A contiguous copy of a strided view (a plain slice copy when it is already contiguous).
pub(super) fn gather<T: alloc::ZeroBits + Send + Sync>(v: &[T], l: &Layout) -> Vec<T> {
    let n = l.shape.elem_count();
    if l.is_contiguous() {
        // From the allocator's cache, copied by every thread: a fresh buffer's page faults
        // and one core's memcpy would otherwise set the speed.
        let src = &v[l.offset..l.offset + n];
        let mut out = alloc::output(n);
        for_chunks(&mut out, |start, o| {
            o.copy_from_slice(&src[start..start + o.len()])
        });
        return out;
    }
    if let Some(out) = transposed(v, l) {
        return out;
    }
    let mut out = Vec::with_capacity(n);
    for_each_run(
        l.shape.dims(),
        &l.strides,
        l.offset,
        |start, stride, len| {
            if stride == 1 {
                out.extend_from_slice(&v[start..start + len]);
            } else {
                out.extend((0..len).map(|i| v[start + i * stride]));
            }
        },
    );
    out
}

/// Tiles of `transposed` (T x T elements: 16 KiB of f32 read and as much written, in L1).
const TILE: usize = 64;

/// A view whose last two dimensions are a transpose (`x.t()`: the second-last one has stride
/// 1, the last a longer one), copied tile by tile so that each tile's reads and writes stay
/// in L1, blocks of rows split between threads. Element by element down the columns, each
/// read came from another cache line: `x.t().contiguous()` of 2048 x 2048 f32 ran at 0.16x
/// PyTorch's speed (Zen 4). Within a tile, 4- and 8-byte values go through blocks
/// transposed in registers with AVX-512 or AVX2 (`register_blocks`), whose rows are whole
/// cache lines (AVX2: halves) read and written once; one at a time, with rows a multiple of
/// 4 KiB apart, every line of a column fell into one set of L1. Zen 4, two threads, blocks against one at a time alternated in one process (ms,
/// medians of 15): f32 2048 x 2048 1.25-1.73 against 7.1-7.7, 2000 x 2000 1.3-2.1 against
/// 2.7-2.9, 512 x 512 0.050 against 0.18; f64 2048 4.0 against 10.1, 2000 4.2 against 6.7;
/// with `ACCEL_CPU_KERNEL=avx2` against `portable` (separate processes, alternated): f32 2048
/// 1.4-1.8 against 7.3-7.7, 2000 2.5 against 4.5; f64 2048 3.6-4.3 against 8.6-10.5.
/// None, copying nothing, for other views.
fn transposed<T: alloc::ZeroBits + Send + Sync>(v: &[T], l: &Layout) -> Option<Vec<T>> {
    let dims = l.shape.dims();
    let rank = dims.len();
    if rank < 2 {
        return None;
    }
    let (rows, cols) = (dims[rank - 2], dims[rank - 1]);
    let (sr, sc) = (l.strides[rank - 2], l.strides[rank - 1]);
    if sr != 1 || sc <= 1 || rows < 2 || cols < 2 {
        return None;
    }
    let n = l.shape.elem_count();
    let lead = &dims[..rank - 2];
    let lead_strides = &l.strides[..rank - 2];
    // The first element of matrix b (b counts the leading dimensions' indices in order).
    let base = |mut b: usize| {
        let mut at = l.offset;
        for (d, s) in lead.iter().zip(lead_strides).rev() {
            at += (b % d) * s;
            b /= d;
        }
        at
    };
    let mut out = alloc::output::<T>(n);
    let band = TILE * cols;
    let blocks = register_blocks::<T>();
    let task = |(t, o): (usize, &mut [T])| {
        // Band t: rows r0.. of matrix b.
        let per = rows.div_ceil(TILE);
        let (b, r0) = (t / per, (t % per) * TILE);
        let at = base(b);
        let nr = o.len() / cols;
        for c0 in (0..cols).step_by(TILE) {
            let nc = TILE.min(cols - c0);
            // Whole blocks in registers (4- and 8-byte values with AVX-512 or AVX2), then
            // the rest one value at a time.
            let (wc, wr) = match blocks {
                Some((w, _)) => (nc / w * w, nr / w * w),
                None => (0, 0),
            };
            #[cfg(target_arch = "x86_64")]
            if let Some((w, block)) = blocks {
                for cb in (c0..c0 + wc).step_by(w) {
                    for rb in (0..wr).step_by(w) {
                        let s = at + cb * sc + r0 + rb;
                        debug_assert!(s + (w - 1) * sc + w <= v.len());
                        debug_assert!((rb + w - 1) * cols + cb + w <= o.len());
                        // SAFETY: `block` is for T's size (`register_blocks`); the w source
                        // rows hold w values each from s, sc apart (inside the view), the w
                        // rows of `o` w values from rb * cols + cb (inside the band).
                        unsafe {
                            block(
                                v.as_ptr().add(s).cast(),
                                sc,
                                o.as_mut_ptr().add(rb * cols + cb).cast(),
                                cols,
                            )
                        }
                    }
                }
            }
            if blocks.is_none() && std::mem::size_of::<T>() == 2 {
                // 2-byte values (bf16, f16): 32 x 32 blocks through a buffer on the stack,
                // each line of the view and of `o` read or written at once. Against one at a
                // time, alternated (bf16, ms, Zen 4): 2048 x 2048 4.0 against 11.0, 2000 x
                // 2000 2.9 against 3.4, 512 x 512 0.060 against 0.153.
                let mut buf = [[v[at]; 32]; 32];
                for cb in (c0..c0 + nc).step_by(32) {
                    let w = 32.min(c0 + nc - cb);
                    for rb in (0..nr).step_by(32) {
                        let h = 32.min(nr - rb);
                        for (c, row) in buf.iter_mut().enumerate().take(w) {
                            let s = at + (cb + c) * sc + r0 + rb;
                            row[..h].copy_from_slice(&v[s..s + h]);
                        }
                        let rows_of_o = o[rb * cols..].chunks_mut(cols).take(h);
                        for (r, row) in rows_of_o.enumerate() {
                            for (c, x) in row[cb..cb + w].iter_mut().enumerate() {
                                *x = buf[c][r];
                            }
                        }
                    }
                }
                continue;
            }
            for c in c0..c0 + nc {
                let src = &v[at + c * sc + r0..at + c * sc + r0 + nr];
                let skip = if c < c0 + wc { wr } else { 0 };
                for (r, &x) in src.iter().enumerate().skip(skip) {
                    o[r * cols + c] = x;
                }
            }
        }
    };
    // Each matrix's rows in bands of TILE; the last band of a matrix may be shorter.
    let bands: Vec<&mut [T]> = out
        .chunks_mut(rows * cols)
        .flat_map(|m| m.chunks_mut(band))
        .collect();
    if n >= super::storage::CHUNK && crate::base::threads::parallel() {
        bands.into_par_iter().enumerate().for_each(task);
    } else {
        bands.into_iter().enumerate().for_each(task);
    }
    Some(out)
}

/// A transpose of a w x w block in registers: `block(src, lss, dst, lds)` writes w rows of
/// `dst` (`lds` values apart) from w rows of `src` (`lss` apart), each w values of T.
type Block = unsafe fn(*const u8, usize, *mut u8, usize);

/// The register block for T's size as the CPU's vectors allow (`matmul::simd_level`, which
/// `ACCEL_CPU_KERNEL` caps): with AVX-512 16 x 16 of 4 bytes (f32, i32) and 8 x 8 of 8 (f64,
/// i64), with AVX2 8 x 8 and 4 x 4; None for other sizes and CPUs.
fn register_blocks<T>() -> Option<(usize, Block)> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY (of the calls): each function reads and writes the w x w values `Block`
        // describes, of its element size, which matches T's here; simd_level 2 means the
        // CPU has AVX-512F, 1 AVX2 (and so AVX).
        let level = super::matmul::simd_level();
        let block: Block = match (level, std::mem::size_of::<T>()) {
            (2, 4) => |s, ls, d, ld| unsafe { t16x16_u32(s.cast(), ls, d.cast(), ld) },
            (2, 8) => |s, ls, d, ld| unsafe { t8x8_u64(s.cast(), ls, d.cast(), ld) },
            (1, 4) => |s, ls, d, ld| unsafe { t8x8_u32_avx(s.cast(), ls, d.cast(), ld) },
            (1, 8) => |s, ls, d, ld| unsafe { t4x4_u64_avx(s.cast(), ls, d.cast(), ld) },
            _ => return None,
        };
        // 64 bytes a row with AVX-512, 32 with AVX2.
        let w = (32 << usize::from(level == 2)) / std::mem::size_of::<T>();
        Some((w, block))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// `dst`'s 16 rows (`lds` apart) = the transpose of `src`'s 16 rows (`lss` apart), 16 values
/// each, in registers: pairs of rows interleaved by 32 then 64 bits, then 128-bit lanes
/// gathered twice.
///
/// # Safety
/// `src` readable and `dst` writable for 16 rows of 16 values; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn t16x16_u32(src: *const u32, lss: usize, dst: *mut u32, lds: usize) {
    use std::arch::x86_64::*;
    let mut r = [_mm512_setzero_si512(); 16];
    for (i, r) in r.iter_mut().enumerate() {
        *r = _mm512_loadu_si512(src.add(i * lss).cast());
    }
    // t[2i], t[2i + 1]: rows 2i and 2i + 1 interleaved (columns 4L, 4L + 1 and 4L + 2, 4L + 3
    // of each 128-bit lane L).
    let mut t = [_mm512_setzero_si512(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + j]: column 4L + j of rows 4g..4g + 4, in lane L.
    let mut u = [_mm512_setzero_si512(); 16];
    for g in 0..4 {
        let (a, b, c, d) = (t[4 * g], t[4 * g + 1], t[4 * g + 2], t[4 * g + 3]);
        u[4 * g] = _mm512_unpacklo_epi64(a, c);
        u[4 * g + 1] = _mm512_unpackhi_epi64(a, c);
        u[4 * g + 2] = _mm512_unpacklo_epi64(b, d);
        u[4 * g + 3] = _mm512_unpackhi_epi64(b, d);
    }
    for j in 0..4 {
        let v0 = _mm512_shuffle_i32x4::<0x88>(u[j], u[4 + j]);
        let v1 = _mm512_shuffle_i32x4::<0xdd>(u[j], u[4 + j]);
        let w0 = _mm512_shuffle_i32x4::<0x88>(u[8 + j], u[12 + j]);
        let w1 = _mm512_shuffle_i32x4::<0xdd>(u[8 + j], u[12 + j]);
        let out = [
            (j, _mm512_shuffle_i32x4::<0x88>(v0, w0)),
            (4 + j, _mm512_shuffle_i32x4::<0x88>(v1, w1)),
            (8 + j, _mm512_shuffle_i32x4::<0xdd>(v0, w0)),
            (12 + j, _mm512_shuffle_i32x4::<0xdd>(v1, w1)),
        ];
        for (c, x) in out {
            _mm512_storeu_si512(dst.add(c * lds).cast(), x);
        }
    }
}

/// `t16x16_u32` for 8 x 8 values of 8 bytes: pairs of rows interleaved by 64 bits, then
/// 128-bit lanes gathered twice.
///
/// # Safety
/// `src` readable and `dst` writable for 8 rows of 8 values; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn t8x8_u64(src: *const u64, lss: usize, dst: *mut u64, lds: usize) {
    use std::arch::x86_64::*;
    let mut r = [_mm512_setzero_si512(); 8];
    for (i, r) in r.iter_mut().enumerate() {
        *r = _mm512_loadu_si512(src.add(i * lss).cast());
    }
    // t[2i + j]: column 2L + j of rows 2i and 2i + 1, in lane L.
    let mut t = [_mm512_setzero_si512(); 8];
    for i in 0..4 {
        t[2 * i] = _mm512_unpacklo_epi64(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi64(r[2 * i], r[2 * i + 1]);
    }
    for j in 0..2 {
        let v0 = _mm512_shuffle_i64x2::<0x88>(t[j], t[2 + j]);
        let v1 = _mm512_shuffle_i64x2::<0xdd>(t[j], t[2 + j]);
        let w0 = _mm512_shuffle_i64x2::<0x88>(t[4 + j], t[6 + j]);
        let w1 = _mm512_shuffle_i64x2::<0xdd>(t[4 + j], t[6 + j]);
        let out = [
            (j, _mm512_shuffle_i64x2::<0x88>(v0, w0)),
            (2 + j, _mm512_shuffle_i64x2::<0x88>(v1, w1)),
            (4 + j, _mm512_shuffle_i64x2::<0xdd>(v0, w0)),
            (6 + j, _mm512_shuffle_i64x2::<0xdd>(v1, w1)),
        ];
        for (c, x) in out {
            _mm512_storeu_si512(dst.add(c * lds).cast(), x);
        }
    }
}

/// `t16x16_u32` for 8 x 8 values of 4 bytes with AVX: pairs of rows interleaved by 32 bits,
/// then by 64 (within 128-bit lanes), then the lanes of rows 0-3 and 4-7 put together. (The
/// float shuffles move bits as they are.)
///
/// # Safety
/// `src` readable and `dst` writable for 8 rows of 8 values; the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn t8x8_u32_avx(src: *const u32, lss: usize, dst: *mut u32, lds: usize) {
    use std::arch::x86_64::*;
    let mut r = [_mm256_setzero_ps(); 8];
    for (i, r) in r.iter_mut().enumerate() {
        *r = _mm256_loadu_ps(src.add(i * lss).cast());
    }
    // u[4g + j]: column 4L + j of rows 4g..4g + 4, in lane L.
    let mut u = [_mm256_setzero_ps(); 8];
    for g in 0..2 {
        let t0 = _mm256_unpacklo_ps(r[4 * g], r[4 * g + 1]);
        let t1 = _mm256_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        let t2 = _mm256_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
        let t3 = _mm256_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        u[4 * g] = _mm256_shuffle_ps::<0x44>(t0, t2);
        u[4 * g + 1] = _mm256_shuffle_ps::<0xee>(t0, t2);
        u[4 * g + 2] = _mm256_shuffle_ps::<0x44>(t1, t3);
        u[4 * g + 3] = _mm256_shuffle_ps::<0xee>(t1, t3);
    }
    for j in 0..4 {
        let lo = _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j]);
        let hi = _mm256_permute2f128_ps::<0x31>(u[j], u[4 + j]);
        _mm256_storeu_ps(dst.add(j * lds).cast(), lo);
        _mm256_storeu_ps(dst.add((4 + j) * lds).cast(), hi);
    }
}

/// `t8x8_u64` for 4 x 4 values of 8 bytes with AVX: pairs of rows interleaved by 64 bits,
/// then the 128-bit lanes put together.
///
/// # Safety
/// `src` readable and `dst` writable for 4 rows of 4 values; the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn t4x4_u64_avx(src: *const u64, lss: usize, dst: *mut u64, lds: usize) {
    use std::arch::x86_64::*;
    let mut r = [_mm256_setzero_pd(); 4];
    for (i, r) in r.iter_mut().enumerate() {
        *r = _mm256_loadu_pd(src.add(i * lss).cast());
    }
    let t0 = _mm256_unpacklo_pd(r[0], r[1]);
    let t1 = _mm256_unpackhi_pd(r[0], r[1]);
    let t2 = _mm256_unpacklo_pd(r[2], r[3]);
    let t3 = _mm256_unpackhi_pd(r[2], r[3]);
    let out = [
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    ];
    for (c, x) in out.into_iter().enumerate() {
        _mm256_storeu_pd(dst.add(c * lds).cast(), x);
    }
}
