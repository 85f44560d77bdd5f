//! # accelkit
//!
//! Find the compute accelerators a machine has, pick the best with a fallback, put tensors on
//! them, copy between devices, multiply matrices, time it correctly, and see memory and load —
//! the device workflow of PyTorch, in Rust, with availability reported as data.
//!
//! ```
//! use accelkit::{Device, Tensor};
//!
//! # fn main() -> accelkit::Result<()> {
//! let device = Device::best(); // cuda -> mps -> xla -> other GPU -> cpu
//! let a = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], &device)?;
//! let b = a.matmul(&a.t()?)?;
//! assert_eq!(b.to_device(&Device::Cpu)?.to_vec2::<f32>()?, vec![vec![5.0, 11.0], vec![11.0, 25.0]]);
//! # Ok(())
//! # }
//! ```
//!
//! ## Backends
//!
//! | backend | devices | cargo feature | status in this version |
//! |---|---|---|---|
//! | CPU | `cpu` | always | multi-threaded; matmul with AVX-512 (bf16 through AVX512_BF16), AVX2+FMA or portable micro-kernels chosen at run time |
//! | CUDA | `cuda`, `cuda:N` | `cuda` | driver API, cuBLAS, NVRTC-compiled kernels, NVML; compiled and its discovery tested, not yet run on a GPU |
//! | Apple GPU | `mps` | `wgpu` | the first Metal adapter through wgpu; never run on a Mac |
//! | XLA (TPU, GPU, CPU via PJRT) | `xla`, `xla:N` | `xla` | PJRT plugins; tested on XLA's CPU plugin |
//! | other GPUs (Vulkan, Metal, DX12) | `wgpu:N` | `wgpu` | f32 and i32 (f16 with `shader-f16`); tested on Mesa's lavapipe |
//!
//! Monitoring ([`load`], built on the `accelkit-telemetry` crate) reads the vendors' monitoring
//! interfaces and never opens a compute context.
//!
//! ## Layers
//!
//! Each layer uses only those below it (the test command checks this, and that no two folders
//! import each other); ARCHITECTURE.md in the repository has the file-by-file map.
//!
//! ```text
//!  nn · bench · load · doctor              built from tensors and telemetry
//!  Tensor · memory · accelkit::{cuda, mps, xla, wgpu}
//!  registry · dispatch · Device methods    which devices exist; a call routed to its backend
//!  cpu │ cuda │ xla │ wgpu (+ mps)         the backends, side by side; none knows another
//!  contract · ops · native · telemetry     the traits; shared library search; monitoring
//!  base                                    Device, DType, Shape, Error, caps, probe results
//! ```
//!
//! The PJRT C API under the XLA backend is a sealed module of it (`backend::xla::pjrt`).
//!
//! ## PyTorch -> accel
//!
//! | PyTorch | accel |
//! |---|---|
//! | `torch.cuda.is_available()`, `device_count()` | [`cuda::is_available`], [`cuda::device_count`] |
//! | `torch.backends.mps.is_built()/is_available()` | [`mps::is_built`], [`mps::is_available`] |
//! | `torch_xla.device()`, `torch_xla.devices()` | [`xla::device`], [`xla::devices`] |
//! | `"cuda" if ... else "mps" if ... else "cpu"` | [`Device::best`] |
//! | `torch.tensor(data, device=d)` | [`Tensor::new`] |
//! | `torch.randn(n, n)` | `Tensor::randn(0.0, 1.0, (n, n), &d)` |
//! | `x.to(d)`, `x.cuda()`, `x.cpu()` | [`Tensor::to_device`], [`Tensor::cuda`], [`Tensor::cpu`] |
//! | `x.device`, `x.is_cuda` | [`Tensor::device`], [`Tensor::is_cuda`] |
//! | `a @ b` | [`Tensor::matmul`] |
//! | `torch.cuda.synchronize()` | [`Device::synchronize`] |
//! | `torch.cuda.memory_allocated()/memory_reserved()` | [`memory::stats`] |
//! | `psutil.cpu_percent()`, `psutil.virtual_memory()` | [`system::cpu_percent`], [`system::memory`] |
//! | `nn.Linear(i, o).to(d)` | [`nn::Linear::new`], [`nn::Module::to_device`] |
//! | `torch.manual_seed(s)` | [`manual_seed`] |
#![warn(missing_docs)]

mod api;
mod backend;
mod base;
pub mod bench;
mod display;
pub mod doctor;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod load;
pub mod memory;
pub mod nn;
mod tensor;

pub use accelkit_core::system;
use accelkit_telemetry as telemetry;
pub use api::{cuda, mps, wgpu, xla};
pub use base::caps::{DeviceCaps, Hardware, TensorCores};
pub use base::device::{BackendKind, Device};
pub use base::dtype::{DType, WithDType};
pub use base::error::{Error, Result, Room};
pub use base::probe::{self, Availability, DeviceInfo, Probe};
pub use base::shape::Shape;
pub use half::{bf16, f16};
pub use tensor::{NdArray, Tensor};

/// Sets, where they are unset, the environment variables that make accelerator libraries
/// behave on servers ([`helper_environment`]): `TPU_SKIP_MDS_QUERY=1` (off a TPU VM, libtpu
/// otherwise retries a metadata server for minutes) and, on Linux, `XDG_RUNTIME_DIR` (a
/// private 0700 folder: Vulkan's window-system code prints "XDG_RUNTIME_DIR is invalid or not
/// set" without one, although accel opens no window). accel's probes read the environment but
/// never change it, and its probe helpers get these settings on their own command line
/// without this; the `accel` command calls this first (its children may inherit them). The
/// Python module does not: `import accelkit` leaves the environment of the notebook's children
/// as it was.
///
/// # Safety
/// Changing the environment races with every other thread that reads it (C's `getenv` is
/// not synchronised with `setenv`), drivers' threads included: call this at the start of
/// `main`, before any thread has started (rayon's pool and accel's probes start threads).
pub unsafe fn prepare_environment() {
    for (k, v) in helper_environment() {
        std::env::set_var(k, v);
    }
}

/// The settings accel's probe helpers (child processes) are started with, where this
/// process's environment lacks them: `TPU_SKIP_MDS_QUERY=1`, and `XDG_RUNTIME_DIR` naming
/// accel's own private runtime folder (`/tmp/accel-runtime-<uid>`, made 0700, used only when
/// it is the user's and private; otherwise the refusal is noted for `accel doctor`).
pub fn helper_environment() -> Vec<(&'static str, std::ffi::OsString)> {
    let mut v = Vec::new();
    if std::env::var_os("TPU_SKIP_MDS_QUERY").is_none() {
        v.push(("TPU_SKIP_MDS_QUERY", "1".into()));
    }
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        if let Some(dir) = backend::native::kept::own_runtime_dir() {
            v.push(("XDG_RUNTIME_DIR", dir.into_os_string()));
        }
    }
    v
}

pub use accelkit_core::env::runtime_dir_refused;

/// Probes the drivers and plugins that cannot be stopped inside a process (`cuInit`,
/// `nvmlInit`, a PJRT plugin's start, Vulkan enumeration) first in a child process started
/// from `program` with the arguments `__probe-helper <task>`, killed at `ACCEL_PROBE_TIMEOUT`
/// (90 s by default) with anything it started: a hung or crashing driver then makes its
/// backend unavailable with the step that hung, instead of hanging or crashing the caller.
/// `program` must answer those arguments with [`probe_helper_main`]; the `accel` command
/// does this for itself. Off unless called.
pub fn enable_probe_helper(program: std::path::PathBuf) {
    accelkit_core::probe_child::keep_answers(backend::kept_probes::KEEPER);
    accelkit_core::probe_child::enable(program, || {
        let mut env: Vec<(&'static str, std::ffi::OsString)> =
            backend::native::pyenv::site_packages_for_helper()
                .map(|v| (backend::native::pyenv::SITE_PACKAGES_VAR, v))
                .into_iter()
                .collect();
        env.extend(backend::native::pyenv::python_prefix_for_helper());
        env.extend(helper_environment());
        env
    })
}

/// The helper's side of [`enable_probe_helper`]: runs `task` (`cuda`, `xla`, `wgpu` or
/// `nvml`; for `xla`, `--skip <plugin>` pairs may follow) in this process, prints what the
/// parent needs on stdout, and exits (status 0; 2 for an unknown task) without running exit
/// handlers.
pub fn probe_helper_main(task: &str, rest: &[std::ffi::OsString]) -> ! {
    accelkit_core::probe_child::mark_helper();
    let skip: Vec<std::path::PathBuf> = rest
        .windows(2)
        .filter(|w| w[0] == "--skip")
        .map(|w| std::path::PathBuf::from(&w[1]))
        .collect();
    backend::xla::skip_in_helper(skip);
    use accelkit_core::probe_child::finish;
    let available = |k: BackendKind| backend::registry::probe(k).is_available();
    // Each task's answer is its own serde type; the parent reads it back as that type.
    match task {
        "cuda" => finish(
            &backend::off::Available {
                available: available(BackendKind::Cuda),
            },
            0,
        ),
        // The adapters' facts too: the parent lists them without enumerating again.
        "wgpu" => finish(
            &backend::wgpu::helper_answer(available(BackendKind::Wgpu)),
            0,
        ),
        // The plugins' and devices' facts too: the parent lists devices without a client.
        "xla" => finish(&backend::xla::helper_answer(available(BackendKind::Xla)), 0),
        "nvml" => {
            telemetry::nvidia::start_for_helper();
            finish(&(), 0)
        }
        other => {
            eprintln!(
                "error: unknown probe helper task {other:?} (tasks: {})",
                accelkit_core::probe_child::TASKS.join(", ")
            );
            finish(&(), 2)
        }
    }
}

/// One device per piece of hardware among `devices` (XLA's CPU plugin offers several devices
/// of one CPU; a benchmark of each would measure the same chip again), in their order.
pub fn distinct_hardware(devices: &[Device]) -> Vec<Device> {
    backend::registry::distinct_hardware(devices)
}

/// The prefix of the Python that loaded accelkit (`sys.prefix`): native code found under it
/// is trusted as the interpreter itself is. The Python module calls this on import.
pub fn set_python_prefix(prefix: std::path::PathBuf) {
    backend::native::trust::set_python_prefix(prefix)
}

/// Seeds the generator behind `rand`, `randn` and parameter initialisation, so a program
/// draws the same numbers on every run (`torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    base::rng::manual_seed(seed)
}

/// Every backend's availability: its devices, or why it has none and what to do.
pub fn devices() -> Vec<Probe> {
    Device::probe_all()
}

/// The usable devices, accelerators first in `Device::best` order, the CPU last (the
/// seeds' `devices` list).
pub fn available_devices() -> Vec<Device> {
    let probes = devices();
    let mut out: Vec<Device> = probes
        .iter()
        .filter(|p| p.backend != BackendKind::Cpu)
        .flat_map(|p| p.devices().iter().map(|d| d.device))
        .collect();
    out.push(Device::Cpu);
    out
}
