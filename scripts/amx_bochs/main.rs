//! accel's AMX tile kernels on an emulated CPU, with no operating system.
//!
//! No machine we work on has AMX, and Linux gives tile data to a process only on CPUs with
//! XFD, which the one emulator with AMX we can build (Bochs 3) lacks. So this program is its
//! own kernel: GRUB loads it (multiboot), the boot code below enters 64-bit mode, turns on
//! SSE, AVX, AVX-512 and the two tile states in XCR0, and calls `kmain`, which runs accel's
//! tile kernels (the crate's own source file, `tile_asm.rs`, included below) on operands whose
//! products and sums are exact, and compares every value of C with an f64 loop written here.
//! It prints over Bochs's port 0xE9 and ends Bochs through its shutdown port. `run.sh` builds
//! it, makes the boot image and runs Bochs.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::fmt::{self, Write};

/// Two 16-bit values of consecutive k in one 32-bit word (low half first), as the crate's
/// `pack::Bf16Pair`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Bf16Pair(pub u32);

/// Rows and columns of C one kernel call computes, and pairs of k in one tile row: the
/// crate's `amx::MR`, `amx::NR`, `amx::STEP`.
const MR: usize = 32;
const NR: usize = 32;
const STEP: usize = 16;

#[path = "../../crates/compute/src/backend/cpu/matmul/amx/tile_asm.rs"]
#[allow(dead_code)]
mod tile_asm;

// Multiboot (version 1) header, page tables, GDT and the way from 32-bit protected mode (where
// GRUB leaves us) into 64-bit mode with the first GiB identity-mapped in 2 MiB pages.
global_asm!(
    r#"
    .section .multiboot, "a"
    .balign 4
    .long 0x1BADB002
    .long 0
    .long -0x1BADB002

    .section .bss
    .balign 4096
    pml4: .skip 4096
    pdpt: .skip 4096
    pd: .skip 4096
    .balign 16
    stack_bottom: .skip 262144
    stack_top:

    .section .data
    .balign 16
    gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
    gdt_ptr:
    .word gdt_ptr - gdt - 1
    .long gdt

    .section .text.boot, "ax"
    .code32
    .global _start
    _start:
    cli
    movl $stack_top, %esp
    movl $pdpt, %eax
    orl $3, %eax
    movl %eax, pml4
    movl $pd, %eax
    orl $3, %eax
    movl %eax, pdpt
    xorl %ecx, %ecx
    1:
    movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax
    movl %eax, pd(,%ecx,8)
    movl $0, pd+4(,%ecx,8)
    incl %ecx
    cmpl $512, %ecx
    jne 1b
    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl $pml4, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $0x100, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80000001, %eax
    movl %eax, %cr0
    lgdt gdt_ptr
    ljmp $0x08, $long_start

    .code64
    long_start:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movq $stack_top, %rsp
    movq %cr0, %rax
    andq $-5, %rax
    orq $2, %rax
    movq %rax, %cr0
    movq %cr4, %rax
    orq $0x40600, %rax
    movq %rax, %cr4
    xorl %ecx, %ecx
    movl $0x600E7, %eax
    xorl %edx, %edx
    xsetbv
    call kmain
    2:
    cli
    hlt
    jmp 2b
    "#,
    options(att_syntax)
);

/// Bochs's port 0xE9: every byte written appears on its standard output.
struct Console;

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            // SAFETY: an OUT to an I/O port that only Bochs's debug console listens on.
            unsafe { asm!("out dx, al", in("dx") 0xE9u16, in("al") b, options(nomem, nostack)) };
        }
        Ok(())
    }
}

macro_rules! say {
    ($($t:tt)*) => { let _ = writeln!(Console, $($t)*); };
}

/// Ends Bochs: its shutdown port takes the word "Shutdown" a byte at a time.
fn shutdown() -> ! {
    for b in b"Shutdown" {
        // SAFETY: an OUT to Bochs's shutdown port.
        unsafe { asm!("out dx, al", in("dx") 0x8900u16, in("al") *b, options(nomem, nostack)) };
    }
    loop {
        // SAFETY: halting with interrupts off, as at the end of the boot code.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) };
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    say!("amx-bochs: FAIL: panic: {info}");
    shutdown()
}

/// The 16-bit formats the tiles multiply: bits of a value that the format holds exactly.
#[derive(Clone, Copy, PartialEq)]
enum Half {
    Bf16,
    F16,
}

impl Half {
    fn bits(self, x: f32) -> u16 {
        let b = x.to_bits();
        match self {
            Half::Bf16 => {
                assert!(b & 0xFFFF == 0, "{x} is not exact in bf16");
                (b >> 16) as u16
            }
            Half::F16 => {
                if x == 0.0 {
                    return (b >> 16) as u16 & 0x8000;
                }
                let sign = (b >> 16) & 0x8000;
                let exp = ((b >> 23) & 0xFF) as i32 - 127 + 15;
                assert!(
                    (1..31).contains(&exp) && b & 0x1FFF == 0,
                    "{x} is not exact in f16"
                );
                (sign | (exp as u32) << 10 | (b >> 13) & 0x3FF) as u16
            }
        }
    }
}

/// A's and B's values at (i, k) and (k, j): multiples of 1/4 from -1.5 to 1.5 and of 1/2
/// from -2 to 2, exact in both formats, whose products and sums of up to 128 are exact in f32.
fn a_val(i: usize, k: usize) -> f32 {
    ((i * 7 + k * 3) % 13) as f32 * 0.25 - 1.5
}

fn b_val(k: usize, j: usize) -> f32 {
    ((k * 5 + j * 11) % 9) as f32 * 0.5 - 2.0
}

// Operands in static memory (there is no allocator): A up to 32 rows of 96 pairs, B up to 4
// chunks of 16 steps of 32 pairs, C up to 32 rows of 128 floats.
const A_PAIRS: usize = 96;
const C_COLS: usize = 128;
#[repr(C, align(64))]
struct Buffers {
    a: [u32; MR * A_PAIRS],
    b: [u32; 4 * STEP * NR],
    c: [f32; MR * C_COLS],
}
static mut BUF: Buffers = Buffers {
    a: [0; MR * A_PAIRS],
    b: [0; 4 * STEP * NR],
    c: [0.0; MR * C_COLS],
};

/// One call of `fmt`'s tile kernel: `chunks` x 32 of k, A rows `a_pairs` pairs apart (the
/// pairs past the product hold NaN, which must not be read, as do B's steps past it), C rows
/// `c_cols` floats apart (the floats past column 32 hold a sentinel, which must not change),
/// C loaded or not.
/// Returns how many values differ from the f64 loop.
fn case(fmt: Half, chunks: usize, a_pairs: usize, c_cols: usize, load: bool) -> usize {
    assert!(chunks <= 4 && a_pairs >= chunks * STEP && a_pairs <= A_PAIRS);
    assert!((NR..=C_COLS).contains(&c_cols));
    let kdim = chunks * STEP * 2;
    let pair = |lo: f32, hi: f32| fmt.bits(lo) as u32 | (fmt.bits(hi) as u32) << 16;
    const NAN_PAIR: u32 = 0x7FC1_7FC1;
    const SENTINEL: f32 = 777.0;
    // SAFETY: one thread, no interrupts: nothing else touches BUF.
    let buf = unsafe { &mut *core::ptr::addr_of_mut!(BUF) };
    for i in 0..MR {
        for s in 0..a_pairs {
            buf.a[i * a_pairs + s] = if s < chunks * STEP {
                pair(a_val(i, 2 * s), a_val(i, 2 * s + 1))
            } else {
                NAN_PAIR
            };
        }
    }
    for s in 0..4 * STEP {
        for j in 0..NR {
            buf.b[s * NR + j] = if s < chunks * STEP {
                pair(b_val(2 * s, j), b_val(2 * s + 1, j))
            } else {
                NAN_PAIR
            };
        }
    }
    let start = |i: usize, j: usize| i as f32 - 2.0 * j as f32;
    for i in 0..MR {
        for j in 0..c_cols {
            buf.c[i * c_cols + j] = match (j < NR, load) {
                (true, true) => start(i, j),
                (true, false) => f32::NAN,
                (false, _) => SENTINEL,
            };
        }
    }
    let run = match fmt {
        Half::Bf16 => tile_asm::kernel_bf16,
        Half::F16 => tile_asm::kernel_fp16,
    };
    // SAFETY: the CPU has AMX-TILE, AMX-BF16 and AMX-FP16 (checked in kmain) with both tile
    // states on in XCR0 (the boot code); A holds 32 rows of a_pairs >= chunks * 16 pairs, B
    // chunks * 16 steps of 32 pairs, C 32 rows of c_cols >= 32 floats.
    unsafe {
        tile_asm::enter();
        run(
            chunks,
            buf.a.as_ptr() as *const Bf16Pair,
            a_pairs * 4,
            buf.b.as_ptr() as *const Bf16Pair,
            buf.c.as_mut_ptr(),
            c_cols * 4,
            load,
        );
        tile_asm::leave();
    }
    let mut wrong = 0;
    for i in 0..MR {
        for j in 0..c_cols {
            let got = buf.c[i * c_cols + j];
            let want = if j >= NR {
                SENTINEL as f64
            } else {
                let init = if load { start(i, j) as f64 } else { 0.0 };
                init + (0..kdim)
                    .map(|k| a_val(i, k) as f64 * b_val(k, j) as f64)
                    .sum::<f64>()
            };
            if got as f64 != want {
                if wrong < 4 {
                    say!("amx-bochs:   C[{i}][{j}] = {got}, want {want}");
                }
                wrong += 1;
            }
        }
    }
    let name = if fmt == Half::Bf16 {
        "tdpbf16ps"
    } else {
        "tdpfp16ps"
    };
    say!(
        "amx-bochs: {name} chunks={chunks} A row {a_pairs} pairs, C row {c_cols} floats, C {}: {}",
        if load { "loaded" } else { "zeroed" },
        Count(wrong)
    );
    wrong
}

/// "ok" or "N values wrong".
struct Count(usize);
impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.0 == 0 {
            write!(f, "ok")
        } else {
            write!(f, "{} values wrong", self.0)
        }
    }
}

/// CPUID leaf 7: (subleaf 0 EDX, subleaf 1 EAX).
fn cpuid7() -> (u32, u32) {
    use core::arch::x86_64::__cpuid_count;
    let (l0, l1) = (__cpuid_count(7, 0), __cpuid_count(7, 1));
    (l0.edx, l1.eax)
}

#[no_mangle]
extern "C" fn kmain() -> ! {
    let (edx, eax1) = cpuid7();
    let bit = |v: u32, b: u32| v >> b & 1 == 1;
    let (tile, bf16, fp16) = (bit(edx, 24), bit(edx, 22), bit(eax1, 21));
    say!("amx-bochs: CPUID AMX-TILE {tile}, AMX-BF16 {bf16}, AMX-FP16 {fp16}");
    if !(tile && bf16 && fp16) {
        say!("amx-bochs: FAIL: this CPU model lacks an AMX feature the kernels need");
        shutdown();
    }
    let mut wrong = 0;
    let mut cases = 0;
    for fmt in [Half::Bf16, Half::F16] {
        for (chunks, a_pairs, c_cols, load) in [
            (1, 16, 32, false),
            (1, 16, 32, true),
            (2, 32, 32, true),
            (3, 53, 45, true),
            (4, 96, 128, false),
            (4, 64, 100, true),
        ] {
            wrong += case(fmt, chunks, a_pairs, c_cols, load);
            cases += 1;
        }
    }
    if wrong == 0 {
        say!("amx-bochs: PASS: {cases} cases, every value of C exact");
    } else {
        say!("amx-bochs: FAIL: {wrong} values wrong in {cases} cases");
    }
    shutdown()
}
