//! `accelkit._accel`: the native half of the Python module. Each function returns plain values
//! or a JSON document that `python/accelkit/` turns into objects, so this file holds no
//! Python-facing type beyond `Recorder` (`tensor` holds `Tensor` and its functions, `errors`
//! the exceptions). Every long call releases the GIL (`Python::detach`), so Python threads and
//! a recording go on while it runs. Importing it probes nothing: each backend is probed the
//! first time a call asks about it.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use accelkit::bench::Iterations;
use accelkit::load::{Sampler, Snapshot};
use accelkit::{BackendKind, DType, Device};
use accelkit_telemetry::{Criteria, Vendor};
use pyo3::prelude::*;

mod errors;
mod tensor;

use errors::{device, err, AccelError};

fn json(v: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(v).map_err(err)
}

fn kind(name: &str) -> PyResult<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            err(format!(
                "unknown backend {name:?}; expected cpu, cuda, mps, xla or wgpu"
            ))
        })
}

/// The probes of every backend, as `accel devices --json` lists them.
#[pyfunction]
fn probes_json(py: Python<'_>) -> PyResult<String> {
    py.detach(|| json(&Device::probe_all()))
}

/// The best available device's name (`cuda:0`, `mps`, `xla:0`, `wgpu:0`, `cpu`).
#[pyfunction]
fn best(py: Python<'_>) -> String {
    py.detach(|| Device::best().to_string())
}

/// The devices of `backend` that are usable, asking that backend's probe only (`accel.cuda`
/// answers without starting PJRT plugins or Vulkan).
#[pyfunction]
fn devices_of(py: Python<'_>, backend: &str) -> PyResult<Vec<String>> {
    let k = kind(backend)?;
    let names = |d: Vec<Device>| d.iter().map(Device::to_string).collect::<Vec<_>>();
    Ok(py.detach(|| match k {
        BackendKind::Cpu => vec!["cpu".to_string()],
        BackendKind::Cuda => names(accelkit::cuda::devices()),
        BackendKind::Mps => names(
            accelkit::mps::is_available()
                .then_some(Device::Mps)
                .into_iter()
                .collect(),
        ),
        BackendKind::Xla => names(accelkit::xla::devices()),
        BackendKind::Wgpu => names(accelkit::wgpu::devices()),
    }))
}

/// The library's spelling of a device name (`xla:cpu:1` is `xla:N`), or the error naming what
/// is accepted; the device need not exist.
#[pyfunction]
fn parse_device(name: &str) -> PyResult<String> {
    device(name).map(|d| d.to_string())
}

/// The device's name (`torch.cuda.get_device_name`), or why it is not available.
#[pyfunction]
fn device_name(py: Python<'_>, name: &str) -> PyResult<String> {
    let d = device(name)?;
    py.detach(|| d.name()).map_err(err)
}

/// A JSON document of kind `kind` (`doctor`, `devices`...) as self-contained HTML, by the
/// renderer `accel doctor --html` uses (`accelkit_report::render`): for `_repr_html_`.
#[pyfunction]
fn render_html(kind: &str, doc: &str) -> PyResult<String> {
    accelkit_report::render(doc, kind).map_err(err)
}

/// The doctor's checklist.
#[pyfunction]
fn doctor_json(py: Python<'_>) -> PyResult<String> {
    py.detach(|| json(&accelkit::doctor::diagnose()))
}

/// One sample of the host and every device (what `accel monitor --json` prints).
#[pyfunction]
fn snapshot_json(py: Python<'_>) -> PyResult<String> {
    py.detach(|| {
        let mut s = Sampler::new().map_err(err)?;
        json(&s.sample())
    })
}

/// The least-loaded devices that meet the criteria (GPUtil's `getAvailable`), as readings.
#[pyfunction]
#[pyo3(signature = (min_free=None, max_util=None, count=1, vendor="nvidia"))]
fn pick_json(
    py: Python<'_>,
    min_free: Option<u64>,
    max_util: Option<f64>,
    count: usize,
    vendor: &str,
) -> PyResult<String> {
    let vendor = Vendor::ALL
        .into_iter()
        .find(|v| v.name() == vendor)
        .ok_or_else(|| err(format!("unknown vendor {vendor:?}")))?;
    let c = Criteria {
        vendor,
        min_free_bytes: min_free,
        max_util_percent: max_util,
        count,
    };
    py.detach(|| {
        let snap = Sampler::new().map_err(err)?.sample();
        let readings: Vec<_> = snap.devices.iter().map(|d| d.reading.clone()).collect();
        let picked = accelkit_telemetry::pick(&readings, &c).map_err(err)?;
        json(&picked)
    })
}

/// Times `a @ b` on `device` with the library's statistics (`accel bench matmul --json`):
/// `size` x `size` operands, or M x K by K x N for `shape` (M, N, K), B stored N x K and
/// transposed with `linear`.
#[pyfunction]
#[pyo3(signature = (device, size, dtype, warmup=3, iters=None, min_time=1.0, batch=1, shape=None, linear=false))]
#[allow(clippy::too_many_arguments)]
fn bench_matmul_json(
    py: Python<'_>,
    device: &str,
    size: usize,
    dtype: &str,
    warmup: usize,
    iters: Option<usize>,
    min_time: f64,
    batch: usize,
    shape: Option<(usize, usize, usize)>,
    linear: bool,
) -> PyResult<String> {
    let d = self::device(device)?;
    let dt = DType::from_str(dtype).map_err(err)?;
    let mnk = shape.map_or([size; 3], |(m, n, k)| [m, n, k]);
    if mnk.contains(&0) || batch == 0 {
        return Err(err("sizes and batch must be at least 1"));
    }
    let it = match iters {
        Some(n) if n > 0 => Iterations::Fixed(n),
        Some(_) => return Err(err("iters must be at least 1")),
        None if min_time.is_finite() && min_time >= 0.0 => Iterations::Adaptive {
            min_time_s: min_time,
        },
        None => return Err(err("min_time must be a number of seconds, at least 0")),
    };
    py.detach(|| {
        let (run, _) =
            accelkit::bench::matmul_shaped(&d, batch, mnk, linear, dt, warmup, it).map_err(err)?;
        json(&run)
    })
}

/// Samples the host and every device on a thread of its own every `interval` seconds, until
/// stopped: what `accel.record()` keeps while a block runs.
#[pyclass(module = "accelkit._accel")]
struct Recorder {
    interval: Duration,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Kept>>,
    /// Behind a lock, not `&mut self`: `stop` waits for the thread with the GIL released, and
    /// a mutable borrow held then made every other thread's `taken()` fail ("Already
    /// mutably borrowed": a watch's follower, while its recording stopped).
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A recorder that Python lets go of (garbage-collected, or dropped after a KeyboardInterrupt
/// skipped its `stop()`) stops its thread: before, the thread sampled for ever (about 30 KB/s
/// of snapshots kept). The thread sees the flag within 20 ms and ends by itself; it is not
/// joined here, so a collection never waits on a sample.
impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The samples a recorder keeps: all of them, or (`keep`) the latest few, with how many older
/// ones were let go, so `samples_since_json` can count every sample ever taken.
#[derive(Default)]
struct Kept {
    samples: std::collections::VecDeque<Snapshot>,
    dropped: usize,
    keep: Option<usize>,
}

impl Kept {
    fn push(&mut self, s: Snapshot) {
        self.samples.push_back(s);
        if let Some(k) = self.keep {
            while self.samples.len() > k {
                self.samples.pop_front();
                self.dropped += 1;
            }
        }
    }
}

#[pymethods]
impl Recorder {
    #[new]
    #[pyo3(signature = (interval, keep=None))]
    fn new(interval: f64, keep: Option<usize>) -> PyResult<Recorder> {
        if !(interval.is_finite() && (0.01..=3600.0).contains(&interval)) {
            return Err(err(format!(
                "interval {interval} s: expected 0.01 to 3600 seconds"
            )));
        }
        if keep == Some(0) {
            return Err(err("keep 0 samples: expected at least 1, or None for all"));
        }
        Ok(Recorder {
            interval: Duration::from_secs_f64(interval),
            stop: Arc::new(AtomicBool::new(false)),
            samples: Arc::new(Mutex::new(Kept {
                keep,
                ..Kept::default()
            })),
            thread: Mutex::new(None),
        })
    }

    /// Starts sampling (one sample at once, then every interval).
    fn start(&self) -> PyResult<()> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_some() {
            return Err(err("this recorder is already running"));
        }
        let mut sampler = Sampler::new().map_err(err)?;
        let (stop, samples, every) = (self.stop.clone(), self.samples.clone(), self.interval);
        // Named, so a test (and `top -H`) can tell it from other threads.
        let spawned = std::thread::Builder::new()
            .name("accel-recorder".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let s = sampler.sample();
                    samples.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    // Wait out the interval in short steps, so stop() returns promptly.
                    while t.elapsed() < every && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(
                            every
                                .saturating_sub(t.elapsed())
                                .min(Duration::from_millis(20)),
                        );
                    }
                }
            })
            .map_err(|e| err(format!("cannot start the recording thread: {e}")))?;
        *thread = Some(spawned);
        Ok(())
    }

    /// Stops sampling (after one last sample) and waits for the thread.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            py.detach(|| t.join())
                .map_err(|_| err("the recording thread panicked"))?;
        }
        Ok(())
    }

    /// The samples kept so far, as a JSON list of snapshots.
    fn samples_json(&self) -> PyResult<String> {
        json(
            &self
                .samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .samples,
        )
    }

    /// How many samples were taken so far (kept or not).
    fn taken(&self) -> usize {
        let k = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        k.dropped + k.samples.len()
    }
}

/// Runs each backend's risky first steps (driver init, plugin loads, Vulkan enumeration) in a
/// child `program` (the `accel` command installed beside this module) killed at a deadline,
/// as the command does: a hanging driver then cannot hang the notebook.
#[pyfunction]
fn enable_probe_helper(program: std::path::PathBuf) {
    accelkit::enable_probe_helper(program);
}

/// Names the running Python's environment (`sys.prefix`): searched for CUDA wheels and PJRT
/// plugins as `VIRTUAL_ENV` would be, without setting it.
#[pyfunction]
fn set_python_prefix(prefix: std::path::PathBuf) {
    accelkit::set_python_prefix(prefix);
}

/// The library version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _accel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // No accelkit::prepare_environment here: `import accelkit` changes no environment variable
    // (every child of the notebook would inherit it: JAX's TPU-pod detection failed in a
    // training script started from one). The probe helpers get those settings on their own
    // command line (accelkit::helper_environment), the runtime folder is found without
    // XDG_RUNTIME_DIR (kept::folder), and the Python environment is named by
    // set_python_prefix, not through VIRTUAL_ENV.
    m.add("AccelError", m.py().get_type::<AccelError>())?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<Recorder>()?;
    for f in [
        wrap_pyfunction!(version, m)?,
        wrap_pyfunction!(enable_probe_helper, m)?,
        wrap_pyfunction!(set_python_prefix, m)?,
        wrap_pyfunction!(probes_json, m)?,
        wrap_pyfunction!(render_html, m)?,
        wrap_pyfunction!(best, m)?,
        wrap_pyfunction!(devices_of, m)?,
        wrap_pyfunction!(device_name, m)?,
        wrap_pyfunction!(parse_device, m)?,
        wrap_pyfunction!(doctor_json, m)?,
        wrap_pyfunction!(snapshot_json, m)?,
        wrap_pyfunction!(pick_json, m)?,
        wrap_pyfunction!(bench_matmul_json, m)?,
        wrap_pyfunction!(tensor::create, m)?,
        wrap_pyfunction!(tensor::manual_seed, m)?,
        wrap_pyfunction!(tensor::synchronize, m)?,
        wrap_pyfunction!(tensor::memory_stats, m)?,
        wrap_pyfunction!(tensor::empty_cache, m)?,
        wrap_pyfunction!(tensor::reset_peak, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
