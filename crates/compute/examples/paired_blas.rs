//! accel's CPU matmul against a BLAS in one process, call by call: the comparison that the
//! machine's drift cannot skew (fresh processes seconds apart differ by up to a third on a
//! shared VM). The BLAS is PyTorch's oneMKL (`sgemm_`/`dgemm_` from its `libtorch_cpu.so`,
//! behind `torch.matmul` on x86) or numpy's OpenBLAS (`scipy_sgemm_64_`/`scipy_dgemm_64_`,
//! 64-bit integers, from the `libscipy_openblas64_*.so` in `numpy.libs`, behind `numpy.matmul`).
//!
//! ```sh
//! TL=$(python -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
//! LD_LIBRARY_PATH=$TL OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE RAYON_NUM_THREADS=2 \
//!   cargo run --release --example paired_blas -- $TL/libtorch_cpu.so f32 10 1000 2000x2000x2000
//! NL=$(python -c 'import numpy, os; print(os.path.dirname(numpy.__file__))').libs
//! OPENBLAS_NUM_THREADS=2 RAYON_NUM_THREADS=2 cargo run --release --example paired_blas -- \
//!   $NL/libscipy_openblas64_*.so f64 10 2000
//! ```
//!
//! Arguments: the library, the dtype (`f32` or `f64`), seconds per shape, then shapes (`N`
//! or `MxNxK`). Each pair times one call of each (each right after a warm-up call of its
//! own, the order drawn at random); the line per shape gives both medians in GFLOP/s, the
//! median of accel's speed over the BLAS's across pairs with its quartiles, how many pairs
//! accel won, and the largest difference between the two results. `OMP_WAIT_POLICY=PASSIVE`
//! keeps MKL's idle threads from spinning while accel runs (accel's helper thread spins
//! 0.5 ms after its own calls only; `OPENBLAS_THREAD_TIMEOUT` is set to its shortest, 4, where
//! the caller has not set it, for the same reason).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::process::ExitCode;
use std::time::Instant;

use accelkit::{DType, Device, Tensor};

extern "C" {
    fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

/// The Fortran BLAS `?gemm_` (column-major, every argument by reference), its integers
/// `I`: `c_int` (LP64, MKL's) or `i64` (ILP64, scipy-openblas's).
type Gemm<T, I> = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const I,
    *const I,
    *const I,
    *const T,
    *const T,
    *const I,
    *const T,
    *const I,
    *const T,
    *mut T,
    *const I,
);

/// A library's sgemm and dgemm, by the width of its integers.
#[derive(Clone, Copy)]
enum Blas {
    Lp64(Gemm<f32, c_int>, Gemm<f64, c_int>),
    Ilp64(Gemm<f32, i64>, Gemm<f64, i64>),
}

impl Blas {
    /// The library's `sgemm_`/`dgemm_` (LP64), or else scipy-openblas's ILP64 pair.
    fn find(lib: *mut c_void) -> Result<Blas, String> {
        // SAFETY: both symbols of each pair are the Fortran BLAS routines of that signature:
        // the plain names with 32-bit integers, the `scipy_*_64_` names with 64-bit ones.
        unsafe {
            if let (Ok(s), Ok(d)) = (symbol(lib, c"sgemm_"), symbol(lib, c"dgemm_")) {
                return Ok(Blas::Lp64(
                    std::mem::transmute::<*mut c_void, Gemm<f32, c_int>>(s),
                    std::mem::transmute::<*mut c_void, Gemm<f64, c_int>>(d),
                ));
            }
            let s = symbol(lib, c"scipy_sgemm_64_")
                .map_err(|_| "neither sgemm_ nor scipy_sgemm_64_ is in the library".to_string())?;
            let d = symbol(lib, c"scipy_dgemm_64_")?;
            Ok(Blas::Ilp64(
                std::mem::transmute::<*mut c_void, Gemm<f32, i64>>(s),
                std::mem::transmute::<*mut c_void, Gemm<f64, i64>>(d),
            ))
        }
    }
}

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
    dims: (usize, usize, usize),
}

impl<T: Copy + Default> Operands<T> {
    /// A (m x k) and B (k x n) from accel's values, C zeroed.
    fn new(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), conv: fn(f64) -> T) -> Self {
        Operands {
            a: a.iter().map(|&x| conv(x)).collect(),
            b: b.iter().map(|&x| conv(x)).collect(),
            c: vec![T::default(); m * n],
            dims: (m, n, k),
        }
    }

    /// C = A B through `gemm` (`one` is 1 in T). Row-major C = A B is column-major C^T =
    /// B^T A^T: B first, then A. `run` has checked that the sizes fit in `I`.
    fn multiply<I: TryFrom<usize>>(&mut self, gemm: Gemm<T, I>, one: T) {
        let int = |x: usize| I::try_from(x).ok().expect("sizes checked by run");
        let (m, n, k) = (int(self.dims.0), int(self.dims.1), int(self.dims.2));
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
enum Ops {
    F32(Operands<f32>),
    F64(Operands<f64>),
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [lib, dtype, secs, shapes @ ..] = &args[..] else {
        return Err("usage: paired_blas LIBRARY f32|f64 SECONDS SHAPE...".into());
    };
    let f64s = match dtype.as_str() {
        "f32" => false,
        "f64" => true,
        other => return Err(format!("dtype {other:?}: f32 or f64")),
    };
    let secs: f64 = secs.parse().map_err(|_| format!("seconds {secs:?}"))?;
    // OpenBLAS's idle threads spin for 2^28 cycles (about 70 ms) after each call before they
    // sleep: on two cores that spin takes one from accel's next call (accel/OpenBLAS read
    // 0.72 at f32 N=1000 with it, 1.01 without, on a 2-vCPU Zen 4). The shortest timeout,
    // read by OpenBLAS when it loads, unless the caller set one.
    if std::env::var_os("OPENBLAS_THREAD_TIMEOUT").is_none() {
        std::env::set_var("OPENBLAS_THREAD_TIMEOUT", "4");
    }
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
    let blas = Blas::find(handle)?;
    let file = lib.rsplit('/').next().unwrap_or(lib).to_ascii_lowercase();
    let name = if file.contains("openblas") {
        "OpenBLAS"
    } else if file.contains("torch") || file.contains("mkl") {
        "MKL"
    } else {
        "BLAS"
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
            Ops::F64(Operands::new(&a64, &b64, (m, n, k), |x| x))
        } else {
            Ops::F32(Operands::new(&a64, &b64, (m, n, k), |x| x as f32))
        };
        let mut theirs = || match (&mut ops, blas) {
            (Ops::F32(o), Blas::Lp64(s, _)) => o.multiply(s, 1.0),
            (Ops::F64(o), Blas::Lp64(_, d)) => o.multiply(d, 1.0),
            (Ops::F32(o), Blas::Ilp64(s, _)) => o.multiply(s, 1.0),
            (Ops::F64(o), Blas::Ilp64(_, d)) => o.multiply(d, 1.0),
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
                    theirs();
                    let s = Instant::now();
                    theirs();
                    t[1] = s.elapsed().as_secs_f64();
                }
            }
            ta.push(t[0]);
            tm.push(t[1]);
            ratio.push(t[1] / t[0]);
        }
        let ours = a.matmul(&b).map_err(e)?.to_vec_f64().map_err(e)?;
        let theirs: Vec<f64> = match &ops {
            Ops::F32(o) => o.c.iter().map(|&x| x as f64).collect(),
            Ops::F64(o) => o.c.clone(),
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
            "{dtype} {m}x{n}x{k}: accel {:.1} GFLOP/s, {name} {:.1}; accel/{name} {:.3} \
             (quartiles {:.3}-{:.3}), accel faster in {won} of {pairs} pairs; largest \
             difference {diff:.1e}",
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
