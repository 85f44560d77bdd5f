//! The AMX tile kernels themselves: the tile configuration, entering and leaving it, and
//! the loop of tile loads and products for each 16-bit type. This file uses `core` only, so
//! that `scripts/amx_bochs` can build the same source into a bare-metal program and run it on
//! an emulated Sapphire Rapids (no Linux there gives tile data to a process: Linux needs XFD,
//! which Bochs lacks). The parent module supplies `Bf16Pair`, `NR` and `STEP`.

use core::arch::asm;

use super::{Bf16Pair, NR, STEP};

/// LDTILECFG's 64 bytes: palette 1; tiles 0-7 all 16 rows of 64 bytes (bytes 16-31:
/// bytes per row of each tile, little-endian u16; bytes 48-55: rows).
#[repr(C, align(64))]
struct Config([u8; 64]);

static CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    Config(c)
};

/// Configures the tiles on this thread (`CONFIG`).
///
/// # Safety
/// AMX-TILE, with the tile data permitted (on Linux: `asm_kernel::permit`).
pub(super) unsafe fn enter() {
    asm!("ldtilecfg [{}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly));
}

/// Releases the tiles (back to their initial state).
///
/// # Safety
/// AMX-TILE.
pub(super) unsafe fn leave() {
    asm!("tilerelease", options(nostack, nomem));
}

macro_rules! tile_kernel {
    ($name:ident, $ins:literal) => {
        /// C's four tiles: tmm0 (rows 0-15, columns 0-15), tmm1 (0-15, 16-31), tmm2 (16-31,
        /// 0-15), tmm3 (16-31, 16-31); A's two row tiles in tmm4 and tmm5, B's two column tiles
        /// in tmm6 and tmm7. Each turn of the loop covers 32 of k: A moves 64 bytes along its
        /// rows, B 16 steps of 128 bytes down its micro-panel.
        ///
        #[doc = concat!("# Safety\nSee `TileKernel` (the parent module); `", $ins, "` needs its AMX feature \
            (AMX-BF16 for tdpbf16ps, AMX-FP16 for tdpfp16ps).")]
        pub(super) unsafe fn $name(
            chunks: usize,
            a: *const Bf16Pair,
            sa: usize,
            b: *const Bf16Pair,
            c: *mut f32,
            sc: usize,
            load: bool,
        ) {
            debug_assert!(chunks >= 1);
            let a16 = (a as *const u8).add(16 * sa);
            let c16 = (c as *mut u8).add(16 * sc);
            asm!(
                "test {load}, {load}",
                "jz 3f",
                "tileloadd tmm0, [{c} + {sc}*1]",
                "tileloadd tmm1, [{c} + {sc}*1 + 64]",
                "tileloadd tmm2, [{c16} + {sc}*1]",
                "tileloadd tmm3, [{c16} + {sc}*1 + 64]",
                "jmp 4f",
                "3:",
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "4:",
                ".p2align 4",
                "2:",
                "tileloadd tmm4, [{a} + {sa}*1]",
                "tileloadd tmm6, [{b} + {sb}*1]",
                "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                concat!($ins, " tmm0, tmm4, tmm6"),
                concat!($ins, " tmm1, tmm4, tmm7"),
                "tileloadd tmm5, [{a16} + {sa}*1]",
                concat!($ins, " tmm2, tmm5, tmm6"),
                concat!($ins, " tmm3, tmm5, tmm7"),
                "add {a}, 64",
                "add {a16}, 64",
                "add {b}, {bstep}",
                "dec {n}",
                "jnz 2b",
                "tilestored [{c} + {sc}*1], tmm0",
                "tilestored [{c} + {sc}*1 + 64], tmm1",
                "tilestored [{c16} + {sc}*1], tmm2",
                "tilestored [{c16} + {sc}*1 + 64], tmm3",
                load = in(reg) load as usize,
                c = in(reg) c,
                c16 = in(reg) c16,
                sc = in(reg) sc,
                a = inout(reg) a => _,
                a16 = inout(reg) a16 => _,
                sa = in(reg) sa,
                b = inout(reg) b => _,
                sb = in(reg) NR * 4,
                bstep = const STEP * NR * 4,
                n = inout(reg) chunks => _,
                options(nostack),
            );
        }
    };
}
tile_kernel!(kernel_bf16, "tdpbf16ps");
tile_kernel!(kernel_fp16, "tdpfp16ps");
