//! Tensor creation from untrusted shapes and data on the CPU: `from_vec`, `zeros`, `ones`,
//! `full` (every dtype) and `arange_step`. Never panics or aborts; an `Ok` tensor holds
//! exactly as many elements as its shape says and survives `to_vec_f64`, `sum_all` and
//! `to_dtype` to every dtype.
#![no_main]

use accelkit::{DType, Device, Tensor};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

const DTYPES: [DType; 6] = DType::ALL;

/// Allocations above this are skipped (not called): a correct library may accept them, and
/// they would only hit the fuzzer's memory limit. Shapes whose byte size overflows are always
/// tried: they must be rejected.
const MAX_BYTES: u128 = 8 << 20;

#[derive(Arbitrary, Debug)]
enum Dim {
    Small(u8),
    Any(usize),
    Pow2(u8),
    Near(u8),
}

impl Dim {
    fn get(&self) -> usize {
        match *self {
            Dim::Small(v) => (v % 8) as usize,
            Dim::Any(v) => v,
            Dim::Pow2(p) => 1usize.checked_shl((p % 64) as u32).unwrap_or(0),
            Dim::Near(o) => usize::MAX - (o as usize),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    FromVecF32 { data: Vec<f32>, shape: Vec<Dim> },
    FromVecI64 { data: Vec<i64>, shape: Vec<Dim> },
    Zeros { dtype: u8, shape: Vec<Dim> },
    Ones { dtype: u8, shape: Vec<Dim> },
    Full { value: f64, dtype: u8, shape: Vec<Dim> },
    ArangeF64 { start: f64, end: f64, step: f64 },
    ArangeF32 { start: f32, end: f32, step: f32 },
    ArangeI64 { start: i64, end: i64, step: i64 },
    ArangeI32 { start: i32, end: i32, step: i32 },
}

fn dims(shape: &[Dim]) -> Vec<usize> {
    shape.iter().take(8).map(Dim::get).collect()
}

/// The exact element count and byte size, in u128 (None when even that overflows).
fn size(dims: &[usize], dtype: DType) -> (Option<u128>, Option<u128>) {
    let n = dims
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    (n, n.and_then(|n| n.checked_mul(dtype.size_in_bytes() as u128)))
}

fn fits(bytes: Option<u128>) -> bool {
    bytes.is_some_and(|b| b <= MAX_BYTES)
}

/// What every accepted tensor must survive.
fn check(t: &Tensor, dims: Option<&[usize]>) {
    let n: usize = t.dims().iter().product();
    assert_eq!(t.elem_count(), n, "elem_count disagrees with dims {:?}", t.dims());
    if let Some(d) = dims {
        assert_eq!(t.dims(), d, "shape changed");
    }
    assert_eq!(t.device(), Device::Cpu);
    let v = t.to_vec_f64().expect("to_vec_f64 of an accepted tensor");
    assert_eq!(v.len(), n, "to_vec_f64 length vs elem_count");
    let s = t.sum_all().expect("sum_all of an accepted tensor");
    assert!(s.dims().is_empty());
    let _ = s.to_vec_f64().expect("to_vec_f64 of a sum");
    for d in DTYPES {
        // A cast to a wider dtype is refused when its byte size could not exist: the sizes,
        // each counted as at least 1, times the element size beyond isize::MAX bytes.
        let fits = t
            .dims()
            .iter()
            .try_fold(d.size_in_bytes() as u128, |acc, &x| acc.checked_mul(x.max(1) as u128))
            .is_some_and(|b| b <= isize::MAX as u128);
        let c = t.to_dtype(d);
        if !fits {
            assert!(
                matches!(c, Err(accelkit::Error::SizeOverflow { .. })),
                "a cast of {:?} to {d} that cannot exist was not refused",
                t.dims()
            );
            continue;
        }
        let c = c.expect("to_dtype of an accepted tensor");
        assert_eq!(c.dims(), t.dims());
        assert_eq!(c.dtype(), d);
        assert_eq!(c.to_vec_f64().expect("to_vec_f64 after to_dtype").len(), n);
    }
}

fn filled(dtype: u8, shape: &[Dim], make: impl Fn(Vec<usize>, DType) -> accelkit::Result<Tensor>) {
    let dtype = DTYPES[dtype as usize % DTYPES.len()];
    let d = dims(shape);
    let (n, bytes) = size(&d, dtype);
    let overflows = bytes.is_none_or(|b| b > isize::MAX as u128);
    if !overflows && !fits(bytes) {
        return; // a real (too large for the fuzzer) allocation: not called
    }
    match make(d.clone(), dtype) {
        Ok(t) => {
            assert!(!overflows, "shape {d:?} of {dtype} overflows but was accepted");
            assert_eq!(Some(t.elem_count() as u128), n, "shape {d:?}");
            check(&t, Some(&d));
        }
        Err(_) => {
            // Refusing a small allocation would be odd, but it is not a crash.
        }
    }
}

/// The length arange should produce, the same formula as PyTorch: ceil((end - start) / step).
fn arange_len(s: f64, e: f64, st: f64) -> Option<f64> {
    let n = ((e - s) / st).ceil();
    n.is_finite().then_some(n.max(0.0))
}

fn arange<T: accelkit::WithDType>(start: T, end: T, step: T) {
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    let elem = T::DTYPE.size_in_bytes() as f64;
    // Skip only requests that are valid and large; zero/NaN/infinite steps and lengths must
    // come back as errors.
    if let Some(n) = arange_len(s, e, st) {
        if st != 0.0 && n * elem > MAX_BYTES as f64 && n * elem <= isize::MAX as f64 {
            return;
        }
    }
    if let Ok(t) = Tensor::arange_step(start, end, step, &Device::Cpu) {
        assert_eq!(t.rank(), 1);
        assert!(st != 0.0 && st.is_finite(), "arange with step {st} was accepted");
        check(&t, None);
    }
}

fuzz_target!(|op: Op| {
    match op {
        Op::FromVecF32 { data, shape } => {
            let d = dims(&shape);
            let len = data.len();
            if let Ok(t) = Tensor::from_vec(data, d.clone(), &Device::Cpu) {
                let (n, _) = size(&d, DType::F32);
                assert_eq!(n, Some(len as u128), "from_vec: {len} elements accepted for shape {d:?}");
                check(&t, Some(&d));
            }
        }
        Op::FromVecI64 { data, shape } => {
            let d = dims(&shape);
            let len = data.len();
            if let Ok(t) = Tensor::from_vec(data, d.clone(), &Device::Cpu) {
                let (n, _) = size(&d, DType::I64);
                assert_eq!(n, Some(len as u128), "from_vec: {len} elements accepted for shape {d:?}");
                check(&t, Some(&d));
            }
        }
        Op::Zeros { dtype, shape } => filled(dtype, &shape, |d, t| Tensor::zeros(d, t, &Device::Cpu)),
        Op::Ones { dtype, shape } => filled(dtype, &shape, |d, t| Tensor::ones(d, t, &Device::Cpu)),
        Op::Full { value, dtype, shape } => {
            filled(dtype, &shape, |d, t| Tensor::full(value, d, t, &Device::Cpu))
        }
        Op::ArangeF64 { start, end, step } => arange(start, end, step),
        Op::ArangeF32 { start, end, step } => arange(start, end, step),
        Op::ArangeI64 { start, end, step } => arange(start, end, step),
        Op::ArangeI32 { start, end, step } => arange(start, end, step),
    }
});
