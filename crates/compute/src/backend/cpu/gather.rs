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
/// PyTorch's speed (Zen 4). None, copying nothing, for other views.
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
    let task = |(t, o): (usize, &mut [T])| {
        // Band t: rows r0.. of matrix b.
        let per = rows.div_ceil(TILE);
        let (b, r0) = (t / per, (t % per) * TILE);
        let at = base(b);
        let nr = o.len() / cols;
        for c0 in (0..cols).step_by(TILE) {
            let nc = TILE.min(cols - c0);
            for c in c0..c0 + nc {
                let src = &v[at + c * sc + r0..at + c * sc + r0 + nr];
                for (r, &x) in src.iter().enumerate() {
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
