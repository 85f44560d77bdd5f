//! The micro-kernels: one MR x NR tile of C from a packed micro-panel of A and of B. The
//! portable one in plain Rust; AVX2+FMA (6x16 f32, 6x8 f64); AVX-512 (14x32 f32, 14x16 f64,
//! and 14x32 bf16 pairs through AVX512_BF16). `CpuKernel` (kernel.rs) says which may run here.

// Micro-kernels take the tile's operands, its C pointer and stride, and its valid extent:
// eight scalars that belong in registers, not in a struct.
#![allow(clippy::too_many_arguments)]

#[cfg(target_arch = "x86_64")]
use super::pack::Bf16Pair;

/// Cache lines to prefetch into L2 while a micro-kernel runs: `lines` lines of 64 bytes
/// from `ptr` (a hint: a prefetch never faults, whatever the address).
#[derive(Clone, Copy)]
pub(crate) struct Prefetch {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) ptr: *const i8,
    pub(super) lines: usize,
}

impl Prefetch {
    pub(super) const NONE: Prefetch = Prefetch {
        ptr: std::ptr::null(),
        lines: 0,
    };

    /// Issues the lines `from..` of the hint at once.
    #[inline(always)]
    pub(super) fn burst(self, from: usize) {
        for l in from..self.lines {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: _mm_prefetch only needs SSE (baseline on x86_64) and never faults or
            // reads memory architecturally; `wrapping_add` makes the address without UB.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    self.ptr.wrapping_add(l * 64),
                )
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = l;
        }
    }
}

/// The portable micro-kernel: the same tile shape in plain Rust, for CPUs without AVX2+FMA.
///
/// # Safety
/// As for `kernel::MicroKernel`: `a` valid for reads of ks * MR elements, `b` of ks * NR, `c` valid
/// for reads and writes of rows 0..mr, columns 0..nr at stride `ldc` (mr <= MR, nr <= NR),
/// with no other access to that block during the call.
pub(super) unsafe fn generic_kernel<D, const MR: usize, const NR: usize>(
    ks: usize,
    a: *const D,
    b: *const D,
    c: *mut D,
    ldc: usize,
    accumulate: bool,
    mr: usize,
    nr: usize,
    next: Prefetch,
) where
    D: Copy + Default + std::ops::Add<Output = D> + std::ops::Mul<Output = D>,
{
    next.burst(0);
    let mut acc = [[D::default(); NR]; MR];
    for p in 0..ks {
        let ap = a.add(p * MR);
        let bp = b.add(p * NR);
        for (i, row) in acc.iter_mut().enumerate() {
            let av = *ap.add(i);
            for (j, v) in row.iter_mut().enumerate() {
                *v = *v + av * *bp.add(j);
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        for (j, v) in row.iter().enumerate().take(nr) {
            let dst = c.add(i * ldc + j);
            *dst = if accumulate { *dst + *v } else { *v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    use super::Bf16Pair;

    /// The size of what `_p` points to.
    const fn elem_size<T>(_p: *const T) -> usize {
        std::mem::size_of::<T>()
    }

    /// Rows of the tiles: 14 rows x 2 vectors = 28 accumulators, 2 B vectors and two
    /// broadcast A values in the 32 zmm registers.
    const MR_WIDE: usize = 14;

    /// One row of a tile for one step of k, its A value at `[addr]` (the address pieces
    /// concatenated) and B's two vectors in zmm28 and zmm29. With `()`, the A value is
    /// broadcast into `$ar` (zmm30 and zmm31 in turn: renaming makes two enough), then two
    /// FMAs; with `($embed)` (`{1toN}`), each of the two FMAs broadcasts it from memory
    /// itself: 2 instructions a row rather than 3.
    macro_rules! asm_row {
        ((), $bcast:literal, $ptr:literal, $fma:literal, [$($addr:literal),*], $ar:literal,
         $c0:literal, $c1:literal) => {
            concat!(
                $bcast, " ", $ar, ", ", $ptr, " ", $($addr,)* "\n",
                $fma, " ", $c0, ", ", $ar, ", zmm28\n",
                $fma, " ", $c1, ", ", $ar, ", zmm29\n",
            )
        };
        (($embed:literal), $bcast:literal, $ptr:literal, $fma:literal, [$($addr:literal),*],
         $ar:literal, $c0:literal, $c1:literal) => {
            concat!(
                $fma, " ", $c0, ", zmm28, ", $ptr, " ", $($addr,)* $embed, "\n",
                $fma, " ", $c1, ", zmm29, ", $ptr, " ", $($addr,)* $embed, "\n",
            )
        };
    }

    /// One step of k in assembly, `$s` steps into an unrolled turn: B's two vectors into
    /// zmm28 and zmm29, then each row of the tile (`asm_row!`).
    macro_rules! asm_step {
        ($s:literal, $embed:tt, $bcast:literal, $ptr:literal, $fma:literal, $astep:literal,
         $esz:literal, [$(($i:literal, $ar:literal, $c0:literal, $c1:literal)),*]) => {
            concat!(
                "vmovups zmm28, [{b} + 128*", $s, "]\n",
                "vmovups zmm29, [{b} + 128*", $s, " + 64]\n",
                $(
                    asm_row!($embed, $bcast, $ptr, $fma,
                             ["[{a} + ", $astep, "*", $s, " + ", $esz, "*", $i, "]"],
                             $ar, $c0, $c1),
                )*
            )
        };
    }

    /// The k loop over packed micro-panels (`ks` steps from `a` and `b`, 128 bytes of B per
    /// step) into the accumulators `acc`, which live in zmm0..zmm27 throughout: unrolled by
    /// 4, with prefetches of the A and B streams per turn (B's micro-panel streams from L2:
    /// 4 x 128 bytes a turn, fetched 2 KiB ahead) and, every `period` turns, one row of C
    /// from `cpf` on (128 bytes, rows `ldcb` bytes apart; rows past the tile's belong to the
    /// next tile down), and in each of the first `npairs` turns two lines of the next B
    /// micro-panel from `npf` on, into L2; then the ks % 4 remaining steps. Each row's A
    /// value is broadcast as the kernel's `embed` says (`asm_row!`).
    macro_rules! packed_loop {
        ($a:ident, $b:ident, $ks:expr, $acc:ident, $cpf:ident, $ldcb:ident, $period:ident,
         $npf:ident, $npairs:ident,
         { embed: $embed:tt,
           bcast: $bcast:literal, ptr: $ptr:literal, fma: $fma:literal, astep: $astep:literal,
           esz: $esz:literal, store: $store:literal, }) => {{
            let turns: usize = $ks / 4;
            let rest: usize = $ks % 4;
            // (row, its A register, its two accumulators)
            packed_loop!(@asm $a, $b, turns, rest, $acc, $cpf, $ldcb, $period, $npf, $npairs,
                         $embed, $bcast, $ptr, $fma, $astep, $esz, [
                (0, "zmm30", "zmm0", "zmm1"), (1, "zmm31", "zmm2", "zmm3"),
                (2, "zmm30", "zmm4", "zmm5"), (3, "zmm31", "zmm6", "zmm7"),
                (4, "zmm30", "zmm8", "zmm9"), (5, "zmm31", "zmm10", "zmm11"),
                (6, "zmm30", "zmm12", "zmm13"), (7, "zmm31", "zmm14", "zmm15"),
                (8, "zmm30", "zmm16", "zmm17"), (9, "zmm31", "zmm18", "zmm19"),
                (10, "zmm30", "zmm20", "zmm21"), (11, "zmm31", "zmm22", "zmm23"),
                (12, "zmm30", "zmm24", "zmm25"), (13, "zmm31", "zmm26", "zmm27")
            ]);
        }};
        (@asm $a:ident, $b:ident, $turns:ident, $rest:ident, $acc:ident, $cpf:ident,
         $ldcb:ident, $period:ident, $npf:ident, $npairs:ident, $embed:tt,
         $bcast:literal, $ptr:literal,
         $fma:literal, $astep:literal, $esz:literal,
         [$(($i:tt, $ar:tt, $c0:tt, $c1:tt)),*]) => {
            // SAFETY: the kernel's contract: `a` holds ks * MR packed values and `b` ks * NR
            // (128 bytes a step); the loop reads exactly those (prefetches past them never
            // fault) and writes no memory; every register it changes is an operand.
            std::arch::asm!(
                "test {turns}, {turns}",
                "jz 3f",
                "2:",
                "dec {cnt}",
                "jnz 6f",
                "prefetcht1 [{cpf}]",
                "prefetcht1 [{cpf} + 64]",
                "prefetcht1 [{cpf} + 127]",
                "add {cpf}, {ldcb}",
                "mov {cnt}, {period}",
                "6:",
                "test {np}, {np}",
                "jz 7f",
                "prefetcht1 [{npf}]",
                "prefetcht1 [{npf} + 64]",
                "add {npf}, 128",
                "dec {np}",
                "7:",
                "prefetcht0 [{a} + 1024]",
                "prefetcht0 [{a} + 1152]",
                "prefetcht0 [{b} + 2048]",
                "prefetcht0 [{b} + 2112]",
                "prefetcht0 [{b} + 2176]",
                "prefetcht0 [{b} + 2240]",
                "prefetcht0 [{b} + 2304]",
                "prefetcht0 [{b} + 2368]",
                "prefetcht0 [{b} + 2432]",
                "prefetcht0 [{b} + 2496]",
                asm_step!(0, $embed, $bcast, $ptr, $fma, $astep, $esz, [$(($i, $ar, $c0, $c1)),*]),
                asm_step!(1, $embed, $bcast, $ptr, $fma, $astep, $esz, [$(($i, $ar, $c0, $c1)),*]),
                asm_step!(2, $embed, $bcast, $ptr, $fma, $astep, $esz, [$(($i, $ar, $c0, $c1)),*]),
                asm_step!(3, $embed, $bcast, $ptr, $fma, $astep, $esz, [$(($i, $ar, $c0, $c1)),*]),
                concat!("add {a}, 4*", $astep),
                "add {b}, 512",
                "dec {turns}",
                "jnz 2b",
                "3:",
                "test {rest}, {rest}",
                "jz 5f",
                "4:",
                asm_step!(0, $embed, $bcast, $ptr, $fma, $astep, $esz, [$(($i, $ar, $c0, $c1)),*]),
                concat!("add {a}, ", $astep),
                "add {b}, 128",
                "dec {rest}",
                "jnz 4b",
                "5:",
                a = inout(reg) $a => _,
                b = inout(reg) $b => _,
                turns = inout(reg) $turns => _,
                rest = inout(reg) $rest => _,
                cpf = inout(reg) $cpf => _,
                cnt = inout(reg) $period => _,
                ldcb = in(reg) $ldcb,
                period = in(reg) $period,
                npf = inout(reg) $npf => _,
                np = inout(reg) $npairs => _,
                $(inout($c0) $acc[$i][0], inout($c1) $acc[$i][1],)*
                out("zmm28") _, out("zmm29") _, out("zmm30") _, out("zmm31") _,
                options(nostack, readonly),
            );
        };
    }

    /// The k loop over A and B where they lie (the small path), for a tile of all 14 rows:
    /// `k` > 0 steps into the accumulators `acc` (zmm0..zmm27), A's row i at `a + i * rsab`
    /// bytes and `csab` bytes further each step, B's two vectors at `b`, `rsbb` bytes further
    /// each step; with `out` `Some(pointer)` (the packing kernels), each broadcast A value
    /// is also stored there as it is read, in `pack_a`'s layout (14 values a step, the
    /// store one more instruction a row). Every row's address is one of three bases (rows
    /// 0, 6 and 12) plus 1 to 5 row strides as `base + index * scale`, so each broadcast is
    /// a single load. Written with intrinsics, LLVM kept the 14 row offsets on the stack,
    /// loaded one before each broadcast
    /// and spilled broadcast vectors inside the loop: 30 loads for 28 FMAs, against 16 here.
    /// B's rows are prefetched 8 steps ahead: at N = 256 its strip (rows 1 KiB apart) does not
    /// stay in L1, and the loop waited on B's loads (f32 N=256, one core of a Xeon: 153 against
    /// 146 GFLOP/s at best, a median 5-9% faster over 5-10 interleaved rounds).
    macro_rules! strided_loop {
        ($a:ident, $rsab:expr, $csab:expr, $b:ident, $rsbb:expr, $k:expr, $acc:ident,
         $out:expr,
         { embed: $embed:tt,
           bcast: $bcast:literal, ptr: $ptr:literal, fma: $fma:literal, astep: $astep:literal,
           esz: $esz:literal, store: $store:literal, }) => {{
            let (a0, rsab) = ($a as *const u8, $rsab);
            let args = (a0, a0.wrapping_add(6 * rsab), a0.wrapping_add(12 * rsab), rsab);
            // (row, its address, its A register and that register's low lane, its two
            // accumulators)
            strided_loop!(@both $out, args, $csab, $b, $rsbb, $k, $acc, $bcast, $ptr, $fma,
                          ($store, $ptr, $esz, $astep),
                [
                    (0, "[{a0}]", "zmm30", "xmm30", "zmm0", "zmm1"),
                    (1, "[{a0} + {r1}]", "zmm31", "xmm31", "zmm2", "zmm3"),
                    (2, "[{a0} + {r1}*2]", "zmm30", "xmm30", "zmm4", "zmm5"),
                    (3, "[{a0} + {r3}]", "zmm31", "xmm31", "zmm6", "zmm7"),
                    (4, "[{a0} + {r1}*4]", "zmm30", "xmm30", "zmm8", "zmm9"),
                    (5, "[{a0} + {r5}]", "zmm31", "xmm31", "zmm10", "zmm11"),
                    (6, "[{a6}]", "zmm30", "xmm30", "zmm12", "zmm13"),
                    (7, "[{a6} + {r1}]", "zmm31", "xmm31", "zmm14", "zmm15"),
                    (8, "[{a6} + {r1}*2]", "zmm30", "xmm30", "zmm16", "zmm17"),
                    (9, "[{a6} + {r3}]", "zmm31", "xmm31", "zmm18", "zmm19"),
                    (10, "[{a6} + {r1}*4]", "zmm30", "xmm30", "zmm20", "zmm21"),
                    (11, "[{a6} + {r5}]", "zmm31", "xmm31", "zmm22", "zmm23"),
                    (12, "[{a12}]", "zmm30", "xmm30", "zmm24", "zmm25"),
                    (13, "[{a12} + {r1}]", "zmm31", "xmm31", "zmm26", "zmm27")
                ])
        }};
        (@both $out:expr, $args:ident, $csab:expr, $b:expr, $rsbb:expr, $k:expr, $acc:ident,
         $bcast:literal, $ptr:literal, $fma:literal,
         ($store:literal, $sptr:literal, $esz:literal, $astep:literal), $rows:tt) => {
            match $out {
                None => strided_loop!(@asm (), $args, $csab, $b, $rsbb, $k, $acc,
                                      $bcast, $ptr, $fma, $rows),
                Some(out) => strided_loop!(@asm ($store, $sptr, $esz, $astep, out), $args,
                                           $csab, $b, $rsbb, $k, $acc, $bcast, $ptr, $fma,
                                           $rows),
            }
        };
        (@text $st:tt, $bcast:literal, $ptr:literal, $fma:literal,
         [$(($i:tt, $addr:literal, $ar:literal, $xr:literal, $c0:tt, $c1:tt)),*]) => {
            concat!(
                // The loop starts on a cache line: unaligned, the same loop ran 9% slower
                // (f32 N=256 on one core of a Xeon, 20 rounds interleaved).
                ".p2align 6\n",
                "2:\n",
                "prefetcht0 [{b} + {pf}]\n",
                "prefetcht0 [{b} + {pf} + 64]\n",
                "vmovups zmm28, [{b}]\n",
                "vmovups zmm29, [{b} + 64]\n",
                // Always an explicit broadcast: broadcast inside the FMAs (as f32's packed loop
                // does), the small f32 path ran 12-15% slower, likely because an FMA with an
                // index register in its address is split in two on Intel (Emerald Rapids, two
                // threads, 128^3 to 512^3, calls alternated in one process).
                $(asm_row!((), $bcast, $ptr, $fma, [$addr], $ar, $c0, $c1),
                  strided_loop!(@store $st, $i, $xr),)*
                strided_loop!(@advance $st),
                "add {b}, {rb}\n",
                "add {a0}, {cs}\n",
                "add {a6}, {cs}\n",
                "add {a12}, {cs}\n",
                "dec {k}\n",
                "jnz 2b\n",
            )
        };
        (@store (), $i:tt, $xr:literal) => { "" };
        (@store ($mov:literal, $ptr:literal, $esz:literal, $astep:literal, $o:expr), $i:tt,
         $xr:literal) => {
            concat!($mov, " ", $ptr, " [{o} + ", $esz, "*", $i, "], ", $xr, "\n")
        };
        (@advance ()) => { "" };
        (@advance ($mov:literal, $ptr:literal, $esz:literal, $astep:literal, $o:expr)) => {
            concat!("add {o}, ", $astep, "\n")
        };
        (@asm (), $args:ident, $csab:expr, $b:expr, $rsbb:expr, $k:expr, $acc:ident,
         $bcast:literal, $ptr:literal, $fma:literal,
         [$(($i:tt, $addr:literal, $ar:literal, $xr:literal, $c0:tt, $c1:tt)),*]) => {
            // SAFETY: the small kernel's contract: for p < k, A's rows 0..14 are readable at
            // `a + i * rsab + p * csab` and B's 2 vectors at `b + p * rsbb`; the loop reads
            // exactly those, writes no memory, and every register it changes is an operand.
            std::arch::asm!(
                strided_loop!(@text (), $bcast, $ptr, $fma,
                              [$(($i, $addr, $ar, $xr, $c0, $c1)),*]),
                a0 = inout(reg) $args.0 => _,
                a6 = inout(reg) $args.1 => _,
                a12 = inout(reg) $args.2 => _,
                r1 = in(reg) $args.3,
                r3 = in(reg) 3 * $args.3,
                r5 = in(reg) 5 * $args.3,
                cs = in(reg) $csab,
                b = inout(reg) $b as *const u8 => _,
                rb = in(reg) $rsbb,
                pf = in(reg) 8 * $rsbb,
                k = inout(reg) $k => _,
                $(inout($c0) $acc[$i][0], inout($c1) $acc[$i][1],)*
                out("zmm28") _, out("zmm29") _, out("zmm30") _, out("zmm31") _,
                options(nostack, readonly),
            )
        };
        (@asm ($mov:literal, $sptr:literal, $esz:literal, $astep:literal, $o:expr), $args:ident,
         $csab:expr, $b:expr, $rsbb:expr, $k:expr, $acc:ident,
         $bcast:literal, $ptr:literal, $fma:literal,
         [$(($i:tt, $addr:literal, $ar:literal, $xr:literal, $c0:tt, $c1:tt)),*]) => {
            // SAFETY: the loop reads A and B as the small kernel's (above), and writes only
            // `o`'s k * 14 values (the packing kernel's contract: writable, not otherwise
            // accessed during the call); every register it changes is an operand.
            std::arch::asm!(
                strided_loop!(@text ($mov, $sptr, $esz, $astep, $o), $bcast, $ptr, $fma,
                              [$(($i, $addr, $ar, $xr, $c0, $c1)),*]),
                a0 = inout(reg) $args.0 => _,
                a6 = inout(reg) $args.1 => _,
                a12 = inout(reg) $args.2 => _,
                r1 = in(reg) $args.3,
                r3 = in(reg) 3 * $args.3,
                r5 = in(reg) 5 * $args.3,
                cs = in(reg) $csab,
                b = inout(reg) $b as *const u8 => _,
                rb = in(reg) $rsbb,
                pf = in(reg) 8 * $rsbb,
                k = inout(reg) $k => _,
                o = inout(reg) $o => _,
                $(inout($c0) $acc[$i][0], inout($c1) $acc[$i][1],)*
                out("zmm28") _, out("zmm29") _, out("zmm30") _, out("zmm31") _,
                options(nostack),
            )
        };
    }

    /// The body of a 14 x (2 * LANES) AVX-512 micro-kernel, for the function it is expanded
    /// in: over packed micro-panels (`strided = false`: A steps of MR values, B steps of NR), or
    /// over A and B where they lie (`strided = true`: A element (i, p) at `i * rsa + p * csa`,
    /// rows past `mr` read row `mr - 1` again and are not stored; B row p at `p * rsb`, NR
    /// values). `load_b`, `bcast_a` and `fma` are the type-specific steps.
    macro_rules! kernel_body {
        ($t:ty, $v:ty, $lanes:expr, $mrows:expr, strided = $strided:expr,
         args($ks:ident, $a:ident, $b:ident, $c:ident, $ldc:ident, $accumulate:ident, $mr:ident,
              $nr:ident, $rsa:ident, $csa:ident, $rsb:ident, $next:ident, $out:ident),
         zero = $zero:expr,
         load_b($lb:ident) = $load_b:expr,
         bcast_a($la:ident) = $bcast_a:expr,
         fma($acc:ident, $x:ident, $y:ident) = $fma:expr,
         load_c = $load_c:ident, add_c = $add_c:ident, store_c = $store_c:ident,
         asm = $asm:tt) => {{
            const NR: usize = 2 * $lanes;
            const MR: usize = $mrows;
            const STRIDED: bool = $strided;
            let (mut a, mut b, c) = ($a, $b, $c);
            let (astep, bstep) = if STRIDED { ($csa, $rsb) } else { (MR, NR) };
            let mut roff = [0usize; MR];
            for (i, r) in roff.iter_mut().enumerate() {
                *r = if STRIDED { i.min($mr - 1) * $rsa } else { i };
            }
            let mut acc: [[$v; 2]; MR] = [[$zero; 2]; MR];
            // C's tile is read back only after the k loop. With enough turns of it, the loop
            // prefetches the tile's rows into L2 one at a time, every `period` turns; else
            // (and for the small path) all of them here. A burst of 28 misses to memory at
            // the start held the core's miss buffers while the loop's own A and B loads
            // needed them (5% of a product whose C came from memory).
            // Prefetch addresses use `wrapping_add`: for an edge tile they may point past
            // C's allocation, and a prefetch of any address never faults.
            let spread = !STRIDED && $ks / 4 >= 2 * MR;
            let period: usize = if spread {
                $ks / 4 / (MR + 4)
            } else {
                usize::MAX
            };
            let ldcb: usize = $ldc * std::mem::size_of::<$t>();
            let cpf = c as *const i8;
            // The next B micro-panel: two lines a turn in the loop, the rest here.
            let npairs: usize = if spread {
                $next.lines.div_ceil(2).min($ks / 4)
            } else {
                0
            };
            $next.burst(2 * npairs);
            let npf = $next.ptr;
            for i in (0..MR).filter(|_| !spread) {
                let p = c.wrapping_add(i * $ldc) as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(NR * std::mem::size_of::<$t>() - 1));
            }
            // One step of k: two B vectors, MR broadcast A values, 2 MR FMAs.
            macro_rules! step {
                ($u:expr) => {{
                    let bp = b.add($u * bstep);
                    let ap = a.add($u * astep);
                    let b0 = {
                        let $lb = bp;
                        $load_b
                    };
                    let b1 = {
                        let $lb = bp.add($lanes);
                        $load_b
                    };
                    for (i, row) in acc.iter_mut().enumerate() {
                        let av = {
                            let $la = ap.add(roff[i]);
                            $bcast_a
                        };
                        row[0] = {
                            let ($acc, $x, $y) = (row[0], av, b0);
                            $fma
                        };
                        row[1] = {
                            let ($acc, $x, $y) = (row[1], av, b1);
                            $fma
                        };
                    }
                }};
            }
            // Packed panels: the k loop in assembly (`packed_loop!`). Written with
            // intrinsics, LLVM hoisted the next step's B loads above this step's FMAs, ran
            // out of the 32 registers and spilled accumulators to the stack inside the loop.
            if !STRIDED {
                packed_loop!(a, b, $ks, acc, cpf, ldcb, period, npf, npairs, $asm);
            } else if $mr == MR && $ks > 0 {
                let esz = elem_size(a);
                strided_loop!(
                    a,
                    $rsa * esz,
                    $csa * esz,
                    b,
                    $rsb * esz,
                    $ks,
                    acc,
                    $out,
                    $asm
                );
            } else if 2 * $mr <= MR {
                // A last tile of at most 7 rows, where they lie (rows past `mr` read row
                // `mr - 1` again): only the first 7 rows' accumulators, half a tile's work,
                // with B prefetched as in `strided_loop!`. `gemm_float` splits C's rows
                // between two threads so that such a tile evens out their shares (f32 N=256:
                // 9 tiles and 9 and a half, where a whole-tile edge made it 10 and 9).
                macro_rules! half_step {
                    ($u:expr) => {{
                        let bp = b.add($u * bstep);
                        let ap = a.add($u * astep);
                        let b0 = {
                            let $lb = bp;
                            $load_b
                        };
                        let b1 = {
                            let $lb = bp.add($lanes);
                            $load_b
                        };
                        for (i, row) in acc.iter_mut().enumerate().take(MR / 2) {
                            let av = {
                                let $la = ap.add(roff[i]);
                                $bcast_a
                            };
                            row[0] = {
                                let ($acc, $x, $y) = (row[0], av, b0);
                                $fma
                            };
                            row[1] = {
                                let ($acc, $x, $y) = (row[1], av, b1);
                                $fma
                            };
                        }
                    }};
                }
                for _ in 0..$ks / 4 {
                    for u in 0..4 {
                        let p = b.wrapping_add((8 + u) * bstep) as *const i8;
                        _mm_prefetch::<_MM_HINT_T0>(p);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
                    }
                    half_step!(0);
                    half_step!(1);
                    half_step!(2);
                    half_step!(3);
                    a = a.add(4 * astep);
                    b = b.add(4 * bstep);
                }
                for _ in 0..$ks % 4 {
                    half_step!(0);
                    a = a.add(astep);
                    b = b.add(bstep);
                }
            } else {
                // A last tile of 8 to 13 rows, where they lie (rows past `mr` read row
                // `mr - 1` again): unrolled by 4, no software prefetch. One tile in each
                // column of tiles, so its spills cost little.
                for _ in 0..$ks / 4 {
                    step!(0);
                    step!(1);
                    step!(2);
                    step!(3);
                    a = a.add(4 * astep);
                    b = b.add(4 * bstep);
                }
                for _ in 0..$ks % 4 {
                    step!(0);
                    a = a.add(astep);
                    b = b.add(bstep);
                }
            }
            if $mr == MR && $nr == NR {
                for (i, row) in acc.iter().enumerate() {
                    let p = c.add(i * $ldc);
                    if $accumulate {
                        $store_c(p, $add_c($load_c(p), row[0]));
                        $store_c(p.add($lanes), $add_c($load_c(p.add($lanes)), row[1]));
                    } else {
                        $store_c(p, row[0]);
                        $store_c(p.add($lanes), row[1]);
                    }
                }
            } else {
                // Edge tile: spill to a buffer and copy the valid part.
                let mut tmp = [0 as $t; MR * NR];
                for (i, row) in acc.iter().enumerate() {
                    $store_c(tmp.as_mut_ptr().add(i * NR), row[0]);
                    $store_c(tmp.as_mut_ptr().add(i * NR + $lanes), row[1]);
                }
                for i in 0..$mr {
                    for j in 0..$nr {
                        let dst = c.add(i * $ldc + j);
                        let v = tmp[i * NR + j];
                        *dst = if $accumulate { *dst + v } else { v };
                    }
                }
            }
        }};
    }

    /// Generates a 14 x (2 * LANES) AVX-512 micro-kernel over packed micro-panels and, with
    /// `small = NAME, packing = NAME`, its twin over operands where they lie (no packing:
    /// `SmallKernel`) and its twin that packs A as it reads it (`PackingKernel`).
    macro_rules! kernel {
        ($name:ident, $p:ty, $t:ty, $v:ty, $lanes:expr, $mrows:expr, $feat:literal,
         $(small = $small:ident, packing = $packing:ident,)?
         zero = $zero:expr,
         load_b($lb:ident) = $load_b:expr,
         bcast_a($la:ident) = $bcast_a:expr,
         fma($acc:ident, $x:ident, $y:ident) = $fma:expr,
         load_c = $load_c:ident, add_c = $add_c:ident, store_c = $store_c:ident,
         asm = $asm:tt) => {
            /// # Safety
            /// The CPU must have the target features named above (`Accum::kernel` and
            /// `bf16_kernel` check with `is_x86_feature_detected!` before handing this out).
            /// Pointers as for `kernel::MicroKernel`: `a` readable for ks * 14 packed
            /// values, `b` for ks * NR, `c` readable and writable for rows 0..mr, columns
            /// 0..nr at stride `ldc`, and, when mr == 14 and nr == NR, the whole tile
            /// (full-width vector stores).
            #[target_feature(enable = $feat)]
            pub(crate) unsafe fn $name(
                ks: usize,
                a: *const $p,
                b: *const $p,
                c: *mut $t,
                ldc: usize,
                accumulate: bool,
                mr: usize,
                nr: usize,
                next: super::Prefetch,
            ) {
                let (rsa, csa, rsb) = (0usize, 0usize, 0usize);
                let out: Option<*mut $p> = None;
                kernel_body!($t, $v, $lanes, $mrows, strided = false,
                    args(ks, a, b, c, ldc, accumulate, mr, nr, rsa, csa, rsb, next, out),
                    zero = $zero, load_b($lb) = $load_b, bcast_a($la) = $bcast_a,
                    fma($acc, $x, $y) = $fma,
                    load_c = $load_c, add_c = $add_c, store_c = $store_c, asm = $asm)
            }

            $(
            /// # Safety
            /// The CPU must have the target features named above. As for
            /// `kernel::SmallKernel`: `a + i * rsa + p * csa` readable for i < mr (1 <= mr
            /// <= 14), p < k; `b + p * rsb` readable for NR values for p < k; `c` as for the
            /// packed kernel (written, not accumulated).
            #[target_feature(enable = $feat)]
            pub(crate) unsafe fn $small(
                k: usize,
                a: *const $p,
                rsa: usize,
                csa: usize,
                b: *const $p,
                rsb: usize,
                c: *mut $t,
                ldc: usize,
                mr: usize,
                nr: usize,
            ) {
                let accumulate = false;
                let next = super::Prefetch::NONE;
                let out: Option<*mut $p> = None;
                kernel_body!($t, $v, $lanes, $mrows, strided = true,
                    args(k, a, b, c, ldc, accumulate, mr, nr, rsa, csa, rsb, next, out),
                    zero = $zero, load_b($lb) = $load_b, bcast_a($la) = $bcast_a,
                    fma($acc, $x, $y) = $fma,
                    load_c = $load_c, add_c = $add_c, store_c = $store_c, asm = $asm)
            }

            /// # Safety
            /// The CPU must have the target features named above. As for
            /// `kernel::PackingKernel`: `ks` > 0; a whole tile of 14 rows of A where they lie,
            /// element (i, p) at `a + i * rsa + p`, readable for i < 14, p < ks; `b` a packed
            /// micro-panel (ks * NR values); `c` as for the packed kernel with mr = 14; `out`
            /// writable for ks * 14 values, not otherwise accessed during the call.
            #[target_feature(enable = $feat)]
            pub(crate) unsafe fn $packing(
                ks: usize,
                a: *const $p,
                rsa: usize,
                b: *const $p,
                c: *mut $t,
                ldc: usize,
                accumulate: bool,
                nr: usize,
                out: *mut $p,
            ) {
                let (csa, rsb, mr) = (1usize, 2 * $lanes, $mrows);
                let next = super::Prefetch::NONE;
                let out = Some(out);
                kernel_body!($t, $v, $lanes, $mrows, strided = true,
                    args(ks, a, b, c, ldc, accumulate, mr, nr, rsa, csa, rsb, next, out),
                    zero = $zero, load_b($lb) = $load_b, bcast_a($la) = $bcast_a,
                    fma($acc, $x, $y) = $fma,
                    load_c = $load_c, add_c = $add_c, store_c = $store_c, asm = $asm)
            }
            )?
        };
    }

    kernel!(
        kernel_f32,
        f32,
        f32,
        __m512,
        16,
        MR_WIDE,
        "avx512f",
        small = small_f32,
        packing = packing_f32,
        zero = _mm512_setzero_ps(),
        load_b(p) = _mm512_loadu_ps(p),
        bcast_a(p) = _mm512_set1_ps(*p),
        fma(acc, x, y) = _mm512_fmadd_ps(x, y, acc),
        load_c = _mm512_loadu_ps,
        add_c = _mm512_add_ps,
        store_c = _mm512_storeu_ps,
        // f32's packed loop broadcasts A inside its FMAs (`asm_row!`): 30 instructions a step
        // rather than 44, each A value loaded twice (the second from L1). Emerald Rapids VM,
        // the two alternated call by call in one process, median ratio over pairs: N=2000
        // one thread 1.047 (87 of 120 pairs faster), two threads 1.012 (125 of 214); N=4096
        // two threads 1.014; N=1000 1.009; N=600 1.000. f64 the same way read 0.993 and
        // 1.001, and stays as it was.
        asm = {
            embed: ("{{1to16}}"),
            bcast: "vbroadcastss",
            ptr: "dword ptr",
            fma: "vfmadd231ps",
            astep: "56",
            esz: "4",
            store: "vmovss",
        }
    );

    kernel!(
        kernel_f64,
        f64,
        f64,
        __m512d,
        8,
        MR_WIDE,
        "avx512f",
        small = small_f64,
        packing = packing_f64,
        zero = _mm512_setzero_pd(),
        load_b(p) = _mm512_loadu_pd(p),
        bcast_a(p) = _mm512_set1_pd(*p),
        fma(acc, x, y) = _mm512_fmadd_pd(x, y, acc),
        load_c = _mm512_loadu_pd,
        add_c = _mm512_add_pd,
        store_c = _mm512_storeu_pd,
        asm = {
            embed: (),
            bcast: "vbroadcastsd",
            ptr: "qword ptr",
            fma: "vfmadd231pd",
            astep: "112",
            esz: "8",
            store: "vmovsd",
        }
    );

    // bf16: each 32-bit lane of a B vector holds the pair (k, k + 1) of one column, and the
    // broadcast A value the pair of one row: `vdpbf16ps` adds both products to the f32 lane.
    kernel!(
        kernel_bf16,
        Bf16Pair,
        f32,
        __m512,
        16,
        MR_WIDE,
        "avx512f,avx512bf16",
        zero = _mm512_setzero_ps(),
        load_b(p) =
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const __m512i)),
        bcast_a(p) = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32((*p).0 as i32)),
        fma(acc, x, y) = _mm512_dpbf16_ps(acc, x, y),
        load_c = _mm512_loadu_ps,
        add_c = _mm512_add_ps,
        store_c = _mm512_storeu_ps,
        asm = {
            embed: (),
            bcast: "vpbroadcastd",
            ptr: "dword ptr",
            fma: "vdpbf16ps",
            astep: "56",
            esz: "4",
            store: "vmovd",
        }
    );
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
