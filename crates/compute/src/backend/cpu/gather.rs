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
/// i64), with AVX2 8 x 8 and 4 x 4; None for other sizes and CPUs. The transposes are the
/// packing's (`matmul::transposes`), w steps of w rows.
fn register_blocks<T>() -> Option<(usize, Block)> {
    #[cfg(target_arch = "x86_64")]
    {
        use super::matmul::transposes as t;
        /// The w rows of a block, `ls` values of `size` bytes apart.
        fn rows<const W: usize>(s: *const u8, ls: usize, size: usize) -> [*const u8; W] {
            std::array::from_fn(|i| s.wrapping_add(i * ls * size))
        }
        // SAFETY (of the calls): `Block`'s contract gives w readable rows of w values and w
        // writable rows; each call moves w steps of w rows of T's size, whole lanes; level
        // 2 means the CPU has AVX-512F, 1 AVX2.
        let level = super::matmul::simd_level();
        let block: Block = match (level, std::mem::size_of::<T>()) {
            (2, 4) => |s, ls, d, ld| unsafe {
                t::transpose32::<16>(&rows(s, ls, 4), 16, d.cast(), ld, u16::MAX)
            },
            (2, 8) => |s, ls, d, ld| unsafe {
                t::transpose64::<8>(&rows(s, ls, 8), 8, d.cast(), ld, u8::MAX)
            },
            (1, 4) => |s, ls, d, ld| unsafe {
                t::transpose32_avx2::<8, 8>(&rows(s, ls, 4), 8, d.cast(), ld)
            },
            (1, 8) => {
                |s, ls, d, ld| unsafe { t::transpose64_avx2(&rows(s, ls, 8), 4, d.cast(), ld) }
            }
            _ => return None,
        };
        // 64 bytes a row with AVX-512, 32 with AVX2.
        let w = (32 << usize::from(level == 2)) / std::mem::size_of::<T>();
        Some((w, block))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}
