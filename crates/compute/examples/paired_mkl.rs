//! accel's CPU matmul against oneMKL in one process, call by call: the comparison that the
//! machine's drift cannot skew (fresh processes seconds apart differ by up to a third on a
//! shared VM). MKL is PyTorch's own: `sgemm_`/`dgemm_` from its `libtorch_cpu.so`, the BLAS
//! behind `torch.matmul` on x86.
//!
//! ```sh
//! TL=$(python -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
//! LD_LIBRARY_PATH=$TL OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE RAYON_NUM_THREADS=2 \
//!   cargo run --release --example paired_mkl -- $TL/libtorch_cpu.so f32 10 1000 2000x2000x2000
//! ```
//!
//! Arguments: the library, the dtype (`f32` or `f64`), seconds per shape, then shapes (`N`
//! or `MxNxK`). Each pair times one call of each (each right after a warm-up call of its
//! own, the order drawn at random); the line per shape gives both medians in GFLOP/s, the
//! median of accel's speed over MKL's across pairs with its quartiles, how many pairs accel
//! won, and the largest difference between the two results. `OMP_WAIT_POLICY=PASSIVE`
//! keeps MKL's idle threads from spinning while accel runs (accel's helper thread spins
//! 0.5 ms after its own calls only).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::process::ExitCode;
use std::time::Instant;

use accelkit::{DType, Device, Tensor};

extern "C" {
    fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

/// The Fortran BLAS `?gemm_` (column-major, every argument by reference).
type Gemm<T> = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const c_int,
    *const c_int,
    *const c_int,
    *const T,
    *const T,
    *const c_int,
    *const T,
    *const c_int,
    *const T,
    *mut T,
    *const c_int,
);

fn symbol(lib: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `lib` is a handle from dlopen and `name` a NUL-terminated string.
    let p = unsafe { dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(format!("{name:?} is not in the library"));
    }
    Ok(p)
}

/// One dtype's row-major operands and result for MKL.
struct Operands<T> {
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<T>,
    dims: (c_int, c_int, c_int),
}

impl<T: Copy + Default> Operands<T> {
    /// A (m x k) and B (k x n) from accel's values, C zeroed.
    fn new(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), conv: fn(f64) -> T) -> Self {
        Operands {
            a: a.iter().map(|&x| conv(x)).collect(),
            b: b.iter().map(|&x| conv(x)).collect(),
            c: vec![T::default(); m * n],
            dims: (m as c_int, n as c_int, k as c_int),
        }
    }

    /// C = A B through `gemm` (`one` is 1 in T). Row-major C = A B is column-major C^T =
    /// B^T A^T: B first, then A.
    fn multiply(&mut self, gemm: Gemm<T>, one: T) {
        let (m, n, k) = self.dims;
        let (b, a, c) = (self.b.as_ptr(), self.a.as_ptr(), self.c.as_mut_ptr());
        let zero = T::default();
        // SAFETY: column-major n x k, k x m and n x m operands with leading dimensions n, k
        // and n, inside these buffers of k * n, m * k and m * n values (`new`).
        unsafe {
            gemm(
                c"N".as_ptr(),
                c"N".as_ptr(),
                &n,
                &m,
                &k,
                &one,
                b,
                &n,
                a,
                &k,
                &zero,
                c,
                &n,
            )
        }
    }
}

/// The operands of the dtype asked for.
enum Mkl {
    F32(Operands<f32>),
    F64(Operands<f64>),
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [lib, dtype, secs, shapes @ ..] = &args[..] else {
        return Err("usage: paired_mkl LIBRARY f32|f64 SECONDS SHAPE...".into());
    };
    let f64s = match dtype.as_str() {
        "f32" => false,
        "f64" => true,
        other => return Err(format!("dtype {other:?}: f32 or f64")),
    };
    let secs: f64 = secs.parse().map_err(|_| format!("seconds {secs:?}"))?;
    let path = CString::new(lib.as_str()).map_err(|_| "library path with a NUL".to_string())?;
    // SAFETY: a NUL-terminated path; RTLD_NOW | RTLD_GLOBAL.
    let handle = unsafe { dlopen(path.as_ptr(), 2 | 0x100) };
    if handle.is_null() {
        // SAFETY: dlerror returns a message after a failed dlopen.
        let why = unsafe { CStr::from_ptr(dlerror()) }
            .to_string_lossy()
            .into_owned();
        return Err(format!("dlopen {lib}: {why}"));
    }
    // SAFETY: both symbols are the Fortran BLAS routines of that signature.
    let (sgemm, dgemm): (Gemm<f32>, Gemm<f64>) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Gemm<f32>>(symbol(handle, c"sgemm_")?),
            std::mem::transmute::<*mut c_void, Gemm<f64>>(symbol(handle, c"dgemm_")?),
        )
    };
    let cpu = Device::Cpu;
    let dt = if f64s { DType::F64 } else { DType::F32 };
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for spec in shapes {
        let dims: Vec<usize> = spec.split('x').map(|d| d.parse().unwrap_or(0)).collect();
        let (m, n, k) = match dims[..] {
            [s] => (s, s, s),
            [m, n, k] => (m, n, k),
            _ => (0, 0, 0),
        };
        if m * n * k == 0 || m.max(n).max(k) > c_int::MAX as usize {
            return Err(format!("shape {spec:?}: N or MxNxK, each from 1"));
        }
        let e = |e: accelkit::Error| e.to_string();
        let a = Tensor::randn_with(0.0, 1.0, (m, k), dt, &cpu).map_err(e)?;
        let b = Tensor::randn_with(0.0, 1.0, (k, n), dt, &cpu).map_err(e)?;
        let (a64, b64) = (a.to_vec_f64().map_err(e)?, b.to_vec_f64().map_err(e)?);
        let mut ops = if f64s {
            Mkl::F64(Operands::new(&a64, &b64, (m, n, k), |x| x))
        } else {
            Mkl::F32(Operands::new(&a64, &b64, (m, n, k), |x| x as f32))
        };
        let mut mkl = || match &mut ops {
            Mkl::F32(o) => o.multiply(sgemm, 1.0),
            Mkl::F64(o) => o.multiply(dgemm, 1.0),
        };
        let (mut ta, mut tm, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < secs || ratio.len() < 5 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut t = [0.0f64; 2];
            for who in if seed & 1 == 0 { [0, 1] } else { [1, 0] } {
                if who == 0 {
                    a.matmul(&b).map_err(e)?;
                    let s = Instant::now();
                    let c = a.matmul(&b).map_err(e)?;
                    t[0] = s.elapsed().as_secs_f64();
                    drop(c);
                } else {
                    mkl();
                    let s = Instant::now();
                    mkl();
                    t[1] = s.elapsed().as_secs_f64();
                }
            }
            ta.push(t[0]);
            tm.push(t[1]);
            ratio.push(t[1] / t[0]);
        }
        let ours = a.matmul(&b).map_err(e)?.to_vec_f64().map_err(e)?;
        let theirs: Vec<f64> = match &ops {
            Mkl::F32(o) => o.c.iter().map(|&x| x as f64).collect(),
            Mkl::F64(o) => o.c.clone(),
        };
        let diff = ours
            .iter()
            .zip(&theirs)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        for v in [&mut ta, &mut tm, &mut ratio] {
            v.sort_by(f64::total_cmp);
        }
        let (pairs, won) = (ratio.len(), ratio.iter().filter(|&&r| r > 1.0).count());
        let gflop = 2.0 * (m * n * k) as f64 / 1e9;
        println!(
            "{dtype} {m}x{n}x{k}: accel {:.1} GFLOP/s, MKL {:.1}; accel/MKL {:.3} (quartiles \
             {:.3}-{:.3}), accel faster in {won} of {pairs} pairs; largest difference {diff:.1e}",
            gflop / ta[pairs / 2],
            gflop / tm[pairs / 2],
            ratio[pairs / 2],
            ratio[pairs / 4],
            ratio[3 * pairs / 4],
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
