//! The XLA runtime (plugins loaded, their clients and devices) and tensor data on an XLA
//! device. Each op builds a StableHLO program ([`super::hlo`]), compiled once per distinct
//! program text and cached; execution is asynchronous, and `synchronize` waits for every
//! result produced since the last wait (`torch_xla.sync()`).

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::hlo::{self, Program, Val};
use super::pjrt::{self, Client, PjrtError};
pub(crate) use super::programs::{compile_count, compile_seconds};
use super::programs::{executable, forget_programs};
use super::{sys, Plugin};
use crate::backend::contract::{Backend, BackendStorage, Dist};
use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::caps::Hardware;
use crate::base::dtype::CpuStorage;
use crate::base::error::Room;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::base::shape::Layout;
use crate::{BackendKind, DType, Device, DeviceCaps, Error, Result, Shape};

/// One addressable device: which client, which of its devices.
pub(crate) struct XlaDevice {
    pub client: Arc<Client>,
    pub index: usize,
    pub device: Device,
    /// Results not yet waited for.
    pending: Mutex<Vec<Weak<pjrt::Buffer>>>,
}

pub(crate) struct Runtime {
    pub plugins: Vec<Plugin>,
    pub devices: Vec<Arc<XlaDevice>>,
}

/// How long one plugin may take to load and start its client (`ACCEL_PJRT_TIMEOUT`, checked
/// by the central parser: a bad value is an error naming it, reported as the probe's reason).
fn load_limit() -> std::result::Result<Duration, crate::base::env::EnvError> {
    crate::base::env::seconds("ACCEL_PJRT_TIMEOUT", 60.0, 0.1, 3600.0)
}

fn platform_rank(p: &str) -> u8 {
    match p.to_ascii_lowercase().as_str() {
        "tpu" => 0,
        "cuda" | "gpu" | "rocm" => 1,
        "cpu" => 3,
        _ => 2,
    }
}

/// Loads every plugin once per process.
pub(crate) fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let env = crate::backend::cuda::libs::SearchEnv::from_process();
        let mut plugins = Vec::new();
        let mut clients: Vec<Arc<Client>> = Vec::new();
        let limit = load_limit();
        let candidates = super::plugin_candidates(&env);
        let (refused, mut set_aside) = ask_helpers(&candidates, &limit);
        if let Some(skip) = super::SKIP_IN_HELPER.get() {
            set_aside.extend(skip.iter().map(|p| (p.clone(), "skipped".to_string())));
        }
        let mut stalled_here = false;
        for (path, source) in candidates {
            let mut plugin = Plugin {
                path: path.clone(),
                source,
                platform: None,
                platform_version: None,
                pjrt_api_version: None,
                devices: 0,
                problem: None,
                stalled: false,
                preloaded: Vec::new(),
                notes: Vec::new(),
            };
            if let Some(r) = &refused {
                plugin.problem = Some(format!("not loaded: {}", r.reason));
                plugins.push(plugin);
                continue;
            }
            if let Some((_, why)) = set_aside.iter().find(|(p, _)| *p == path) {
                plugin.stalled = why.contains("did not start within");
                plugin.problem = Some(why.clone());
                plugins.push(plugin);
                continue;
            }
            if stalled_here {
                // A plugin whose constructor hangs holds the dynamic loader's lock: every
                // later dlopen in this process would wait behind it.
                plugin.problem = Some("not tried: an earlier plugin's load stalled".to_string());
                plugins.push(plugin);
                continue;
            }
            let limit = match &limit {
                Ok(l) => *l,
                Err(e) => {
                    // No time limit, no load: nothing runs that could not be stopped.
                    plugin.problem = Some(format!("not loaded: {e}"));
                    plugins.push(plugin);
                    continue;
                }
            };
            let is_tpu = path.file_name().is_some_and(|n| n == "libtpu.so");
            // Off a TPU VM, libtpu retries a metadata server for minutes unless
            // TPU_SKIP_MDS_QUERY is set: `accel::prepare_environment` sets it (the accel
            // command does, before any thread starts); the load's time limit bounds the rest.
            if is_tpu && std::path::Path::new("/tmp/libtpu_lockfile").exists() {
                plugin.problem = Some(
                    "/tmp/libtpu_lockfile exists: another process may hold the TPU (libtpu \
                     allows one process); stop it, or remove the file if it is stale"
                        .to_string(),
                );
            }
            // JAX's CUDA plugin needs the CUDA wheels' libraries loaded first, as JAX's own
            // package does: by absolute path, from the plugin's own site-packages.
            for lib in super::plugin_preloads(&path) {
                match crate::backend::cuda::libs::preload(&lib) {
                    Ok(()) => plugin.preloaded.push(lib),
                    Err(e) => plugin
                        .notes
                        .push(format!("could not preload {}: {e}", lib.display())),
                }
            }
            crate::base::helper::step(format!("{}{}", super::LOAD_STEP, path.display()));
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.clone();
            let _ = std::thread::Builder::new()
                .name("accel-pjrt-load".into())
                .spawn(move || {
                    // GPU plugins take most of the GPU's memory at start unless told not to;
                    // accel shares the GPU with its own CUDA backend and other processes.
                    let gpu = p.to_string_lossy().contains("cuda");
                    let options: &[(&str, bool)] =
                        if gpu { &[("preallocate", false)] } else { &[] };
                    let r = pjrt::Api::load(&p).and_then(|api| start_client(api, options));
                    let _ = tx.send(r);
                });
            match rx.recv_timeout(limit) {
                Ok(Ok((c, note))) => {
                    plugin.notes.extend(note);
                    plugin.platform = Some(c.platform.clone());
                    plugin.platform_version = Some(c.platform_version.clone());
                    plugin.pjrt_api_version =
                        Some(format!("{}.{}", c.api.version.0, c.api.version.1));
                    plugin.devices = c.devices.len();
                    if c.devices.is_empty() {
                        plugin
                            .problem
                            .get_or_insert_with(|| "the plugin started but has no devices".into());
                    }
                    clients.push(Arc::new(c));
                }
                Ok(Err(e)) => {
                    plugin.problem = Some(explain(&e, &path));
                }
                Err(_) => {
                    plugin.stalled = true;
                    stalled_here = true;
                    plugin.problem = Some(format!(
                        "did not start within {:.1} s (set ACCEL_PJRT_TIMEOUT to wait longer)",
                        limit.as_secs_f64()
                    ))
                }
            }
            plugins.push(plugin);
        }
        clients.sort_by_key(|c| platform_rank(&c.platform));
        let mut devices = Vec::new();
        for c in clients {
            for index in 0..c.devices.len() {
                let device = Device::Xla(devices.len());
                devices.push(Arc::new(XlaDevice {
                    client: c.clone(),
                    index,
                    device,
                    pending: Mutex::new(Vec::new()),
                }));
            }
        }
        Runtime { plugins, devices }
    })
}

/// Where the program enabled the probe helper: loads the plugins in helpers first, and sets
/// aside each one that stalls (past `ACCEL_PJRT_TIMEOUT`) or kills its helper (crash, or past
/// `ACCEL_PROBE_TIMEOUT`), asking again without it, until a helper loads the rest. Returns a
/// refusal that holds for every plugin (the helper could not run at all) and the plugins set
/// aside, with why.
#[allow(clippy::type_complexity)]
fn ask_helpers(
    candidates: &[(std::path::PathBuf, String)],
    limit: &std::result::Result<Duration, crate::base::env::EnvError>,
) -> (
    Option<crate::base::helper::Refusal>,
    Vec<(std::path::PathBuf, String)>,
) {
    use crate::base::helper;
    let mut aside: Vec<(std::path::PathBuf, String)> = Vec::new();
    if !helper::active() || candidates.is_empty() {
        return (None, aside);
    }
    for round in 0..=candidates.len() {
        let extra: Vec<std::ffi::OsString> = aside
            .iter()
            .flat_map(|(p, _)| ["--skip".into(), p.clone().into_os_string()])
            .collect();
        // The first round is the shared verdict (`helper::prestart` may have it already).
        let verdict = if round == 0 {
            helper::canary("xla")
        } else {
            helper::run_task("xla", &extra)
        };
        match verdict {
            Ok(Some(answer)) => {
                let new: Vec<std::path::PathBuf> = answer
                    .values("stalled")
                    .map(std::path::PathBuf::from)
                    .filter(|p| !aside.iter().any(|(q, _)| q == p))
                    .collect();
                if new.is_empty() {
                    return (None, aside);
                }
                for p in new {
                    aside.push((
                        p,
                        format!(
                            "did not start within {} in the probe helper (killed there; not \
                             loaded here): set ACCEL_PJRT_TIMEOUT to wait longer",
                            match limit {
                                Ok(l) => format!("{:.1} s", l.as_secs_f64()),
                                Err(_) => "its time limit".to_string(),
                            }
                        ),
                    ));
                }
            }
            Ok(None) => return (None, aside),
            Err(r) => match r.step.strip_prefix(super::LOAD_STEP) {
                Some(p) if !aside.iter().any(|(q, _)| q.as_os_str() == p) => aside.push((
                    std::path::PathBuf::from(p),
                    format!("not loaded: {}", r.reason),
                )),
                _ => return (Some(r), aside),
            },
        }
    }
    (None, aside)
}

/// Starts a client with `options`; when the plugin rejects them, starts it with its defaults
/// and says so (a GPU plugin that refuses `preallocate=false` takes 75% of the GPU's memory).
pub(crate) fn start_client(
    api: Arc<pjrt::Api>,
    options: &[(&str, bool)],
) -> std::result::Result<(Client, Option<String>), PjrtError> {
    if options.is_empty() {
        return Client::create(api, &[]).map(|c| (c, None));
    }
    match Client::create(api.clone(), options) {
        Ok(c) => Ok((c, None)),
        Err(e) => {
            let asked: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let c = Client::create(api, &[])?;
            Ok((
                c,
                Some(format!(
                    "the plugin rejected the client option{} {} ({e}) and runs with its \
                     defaults{}",
                    if asked.len() == 1 { "" } else { "s" },
                    asked.join(", "),
                    if options.iter().any(|(k, _)| *k == "preallocate") {
                        ": it may take most of the GPU's memory at start"
                    } else {
                        ""
                    }
                )),
            ))
        }
    }
}

fn explain(e: &PjrtError, path: &std::path::Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "libtpu.so" && e.message.contains("jellyfish") || e.message.contains("TPU") {
        format!("no TPU on this machine ({e})")
    } else {
        e.to_string()
    }
}

pub(crate) fn probe() -> Probe {
    let rt = runtime();
    if rt.devices.is_empty() {
        let reason = if rt.plugins.is_empty() {
            "no PJRT plugin found".to_string()
        } else {
            rt.plugins
                .iter()
                .map(|p| {
                    format!(
                        "{}: {}",
                        p.path.display(),
                        p.problem.as_deref().unwrap_or("no devices")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Probe::unavailable(
            BackendKind::Xla,
            true,
            reason,
            "install a plugin: `pip install lammps-jax-pjrt-cpu` (XLA on the CPU), \
             `pip install jax[cuda13]` (NVIDIA GPUs) or `pip install libtpu` (on a TPU VM); \
             or set ACCEL_PJRT_PLUGIN=/path/to/plugin.so",
        );
    }
    let devices = rt
        .devices
        .iter()
        .map(|d| {
            let desc = &d.client.devices[d.index];
            let plugin = rt
                .plugins
                .iter()
                .find(|p| p.platform.as_deref() == Some(d.client.platform.as_str()));
            let mut details = vec![
                ("platform".to_string(), d.client.platform.clone()),
                ("kind".to_string(), desc.kind.clone()),
                ("id".to_string(), desc.id.to_string()),
                ("debug".to_string(), desc.debug.clone()),
            ];
            if let Some(p) = plugin {
                details.push(("plugin".to_string(), p.path.display().to_string()));
                if !p.preloaded.is_empty() {
                    details.push((
                        "preloaded_libraries".to_string(),
                        p.preloaded.len().to_string(),
                    ));
                }
                for note in &p.notes {
                    details.push(("plugin_note".to_string(), note.clone()));
                }
                details.push((
                    "pjrt_api_version".to_string(),
                    p.pjrt_api_version.clone().unwrap_or_default(),
                ));
            }
            if !d.client.platform_version.is_empty() {
                details.push((
                    "platform_version".to_string(),
                    d.client.platform_version.clone(),
                ));
            }
            let mem = d.client.memory_stats(d.index);
            let total = match &mem {
                Ok((_, limit)) => limit.map(|l| l as u64),
                Err(e) => {
                    let why = if e.code == sys::ERROR_CODE_UNIMPLEMENTED {
                        "not available (the plugin does not report it)".to_string()
                    } else {
                        format!("not available ({e})")
                    };
                    details.push(("memory_stats".to_string(), why));
                    None
                }
            };
            let cpu = d.client.platform.eq_ignore_ascii_case("cpu");
            DeviceInfo {
                device: d.device,
                name: format!("{} {}", d.client.platform, desc.kind),
                memory_total_bytes: total,
                caps: DeviceCaps {
                    dtypes: DType::ALL.to_vec(),
                    hardware: if cpu {
                        Hardware::HostCpuEmulated
                    } else {
                        Hardware::Accelerator
                    },
                    platform: Some(d.client.platform.clone()),
                    ..DeviceCaps::default()
                },
                details,
            }
        })
        .collect();
    Probe {
        backend: BackendKind::Xla,
        compiled: true,
        availability: Availability::Available { devices },
    }
}

pub(crate) fn device(i: usize) -> Result<Arc<XlaDevice>> {
    runtime()
        .devices
        .get(i)
        .cloned()
        .ok_or_else(|| Error::System(format!("xla:{i} vanished")))
}

// ---- storage --------------------------------------------------------------------------------

/// A dense 1-D buffer of `len` elements on one XLA device.
pub(crate) struct XlaStorage {
    pub dev: Arc<XlaDevice>,
    pub buf: Arc<pjrt::Buffer>,
    pub len: usize,
    pub dtype: DType,
}

impl std::fmt::Debug for XlaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XlaStorage({}, {} x {})",
            self.dev.device, self.len, self.dtype
        )
    }
}

fn buffer_type(d: DType) -> i32 {
    match d {
        DType::F16 => sys::BUFFER_TYPE_F16,
        DType::BF16 => sys::BUFFER_TYPE_BF16,
        DType::F32 => sys::BUFFER_TYPE_F32,
        DType::F64 => sys::BUFFER_TYPE_F64,
        DType::I32 => sys::BUFFER_TYPE_S32,
        DType::I64 => sys::BUFFER_TYPE_S64,
    }
}

/// A PJRT error as ours: `RESOURCE_EXHAUSTED` is `OutOfMemory` (with what the plugin reports
/// free), anything else a backend error that keeps the plugin's.
fn perr<'a>(dev: &'a XlaDevice, what: &str, bytes: usize) -> impl Fn(PjrtError) -> Error + 'a {
    let what = what.to_string();
    move |e| {
        if e.code == sys::ERROR_CODE_RESOURCE_EXHAUSTED {
            let room = match device_memory(dev) {
                Some((free, total)) => Room::Free { free, total },
                None => Room::Said(String::new()),
            };
            Error::out_of_memory(
                dev.device,
                bytes as u64,
                room,
                format!(
                    "XLA ran out of memory while {what} ({e}); free tensors you no longer \
                     need, or use smaller shapes"
                ),
            )
        } else {
            Error::backend(
                BackendKind::Xla,
                format!("XLA {what} on {} failed", dev.device),
                e,
            )
        }
    }
}

/// A timing point on XLA device `i`: now, and, when work is still queued, a mark that notes
/// when the latest result becomes ready (PJRT has no device timestamps; its ready events are
/// the closest clock: see `pjrt::ReadyMark`).
pub(crate) struct TimingPoint {
    recorded: std::time::Instant,
    /// The mark, and the event it watches (kept alive until the mark is read).
    latest: Option<(Arc<pjrt::ReadyMark>, pjrt::Event)>,
}

impl TimingPoint {
    /// None when the plugin cannot watch its events (then only the wall clock is left).
    pub fn record(i: usize) -> Result<Option<TimingPoint>> {
        let dev = device(i)?;
        let recorded = std::time::Instant::now();
        let latest = dev
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .find_map(Weak::upgrade);
        let latest = match latest {
            None => None,
            Some(b) => {
                let watched = b.ready_event().and_then(|e| Ok((e.mark_ready()?, e)));
                match watched {
                    Ok(w) => Some(w),
                    Err(_) => return Ok(None),
                }
            }
        };
        Ok(Some(TimingPoint { recorded, latest }))
    }

    /// When the work queued before this point was done: the latest result's ready time, or
    /// the moment of recording when nothing was queued.
    fn done(&self) -> Result<std::time::Instant> {
        match &self.latest {
            None => Ok(self.recorded),
            Some((m, _event)) => m
                .wait(std::time::Duration::from_secs(60))
                .map(|t| t.max(self.recorded))
                .ok_or_else(|| Error::System("an XLA ready event did not fire within 60 s".into())),
        }
    }

    /// Seconds from `start` to the end of the work queued before this point.
    pub fn seconds_since(&self, start: &TimingPoint) -> Result<f64> {
        Ok(self
            .done()?
            .saturating_duration_since(start.recorded)
            .as_secs_f64())
    }
}

/// Waits for every result produced on `dev` since the last wait.
pub(crate) fn synchronize(i: usize) -> Result<()> {
    let dev = device(i)?;
    let pending: Vec<Weak<pjrt::Buffer>> =
        std::mem::take(&mut *dev.pending.lock().unwrap_or_else(|e| e.into_inner()));
    // Every result is waited for, even after one failed, and every failure is reported: the
    // first as the error, with how many more failed.
    let mut errors = Vec::new();
    for b in pending.iter().filter_map(Weak::upgrade) {
        if let Err(e) = b.ready() {
            errors.push(e);
        }
    }
    let n = errors.len();
    match errors.into_iter().next() {
        None => Ok(()),
        Some(first) => {
            let what = if n == 1 {
                "waiting for a result".to_string()
            } else {
                format!("waiting for results ({n} failed; the first error)")
            };
            Err(perr(&dev, &what, 0)(first))
        }
    }
}

impl XlaStorage {
    pub fn from_cpu(dev: &Arc<XlaDevice>, data: &CpuStorage) -> Result<XlaStorage> {
        let buf = dev
            .client
            .buffer_from_host(
                data.as_bytes(),
                buffer_type(data.dtype()),
                data.dtype().size_in_bytes(),
                &[data.len() as i64],
                dev.index,
            )
            .map_err(perr(dev, "copying to the device", data.as_bytes().len()))?;
        Ok(XlaStorage {
            dev: dev.clone(),
            buf: Arc::new(buf),
            len: data.len(),
            dtype: data.dtype(),
        })
    }

    /// The whole buffer on the host.
    fn download(&self) -> Result<CpuStorage> {
        let mut host = CpuStorage::full(self.dtype, self.len, 0.0);
        if self.len > 0 {
            self.buf.to_host(host.as_bytes_mut()).map_err(perr(
                &self.dev,
                "copying to the host",
                0,
            ))?;
        }
        Ok(host)
    }

    /// Runs `prog` (whose arguments are `inputs`' buffers, in order) and wraps its output.
    fn run(&self, prog: Program, out: &Val, inputs: &[&XlaStorage]) -> Result<XlaStorage> {
        let (mlir, n) = prog.finish(out);
        if n == 0 {
            // Nothing to compute: XLA rejects some zero-sized programs.
            return XlaStorage::from_cpu(&self.dev, &CpuStorage::full(out.dtype, 0, 0.0));
        }
        let exe = executable(&self.dev, &mlir)?;
        let args: Vec<&pjrt::Buffer> = inputs.iter().map(|s| s.buf.as_ref()).collect();
        let buf = Arc::new(
            exe.execute(&args, Some(self.dev.index), &self.dev.client)
                .map_err(perr(
                    &self.dev,
                    "running a program",
                    n * out.dtype.size_in_bytes(),
                ))?,
        );
        let mut pending = self.dev.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|w| w.strong_count() > 0);
        pending.push(Arc::downgrade(&buf));
        Ok(XlaStorage {
            dev: self.dev.clone(),
            buf,
            len: n,
            dtype: out.dtype,
        })
    }

    /// An operand's view in `p` (callers made it expressible with [`Self::expressible`]).
    fn operand(&self, p: &mut Program, l: &Layout) -> Result<Val> {
        let a = p.arg(self.len, self.dtype);
        p.view(&a, l).ok_or_else(|| {
            Error::System(format!(
                "internal: a view of shape {:?} with strides {:?} reached an XLA program",
                l.shape.dims(),
                l.strides
            ))
        })
    }

    /// `self` and its layout, made dense through the host when a program cannot express it.
    fn expressible(&self, l: &Layout) -> Result<Option<XlaStorage>> {
        let mut p = Program::new();
        let a = p.arg(self.len, self.dtype);
        if p.view(&a, l).is_some() {
            Ok(None)
        } else {
            let host = self.download()?.copy_strided(l);
            Ok(Some(XlaStorage::from_cpu(&self.dev, &host)?))
        }
    }
}

/// (free, total) bytes of an XLA device, where its plugin reports them.
fn device_memory(dev: &XlaDevice) -> Option<(u64, u64)> {
    let (used, limit) = dev.client.memory_stats(dev.index).ok()?;
    let limit = limit? as u64;
    Some((limit.saturating_sub(used as u64), limit))
}

/// The XLA backend.
pub(crate) struct Xla;

fn ordinal(device: Device) -> Result<usize> {
    match device {
        Device::Xla(i) => Ok(i),
        d => Err(Error::System(format!(
            "internal error: the xla backend was asked about {d}"
        ))),
    }
}

impl Backend for Xla {
    type Storage = XlaStorage;
    type Event = TimingPoint;
    const KIND: BackendKind = BackendKind::Xla;

    fn probe() -> Probe {
        probe()
    }
    fn synchronize(device: Device) -> Result<()> {
        synchronize(ordinal(device)?)
    }
    fn device_memory(device: Device) -> Option<(u64, u64)> {
        let i = ordinal(device).ok()?;
        device_memory(runtime().devices.get(i)?)
    }
    fn cached_bytes(_: Device) -> u64 {
        0
    }
    fn allocator_reserved_bytes(_: Device) -> Option<u64> {
        None
    }
    fn empty_cache(device: Device) {
        if let Device::Xla(i) = device {
            if let Ok(dev) = self::device(i) {
                forget_programs(&dev);
            }
        }
    }
    fn host_cached_bytes() -> u64 {
        0
    }
    fn empty_host_cache() {}
    fn record_event(device: Device) -> Result<Option<TimingPoint>> {
        TimingPoint::record(ordinal(device)?)
    }
    fn seconds_between(start: &TimingPoint, end: &TimingPoint) -> Result<f64> {
        end.seconds_since(start)
    }
    fn upload(device: Device, data: &CpuStorage) -> Result<XlaStorage> {
        XlaStorage::from_cpu(&self::device(ordinal(device)?)?, data)
    }
    // Made on the host and uploaded.
    fn full(_: Device, _: DType, _: usize, _: f64) -> Result<Option<XlaStorage>> {
        Ok(None)
    }
    fn arange(_: Device, _: DType, _: f64, _: f64, _: usize) -> Result<Option<XlaStorage>> {
        Ok(None)
    }
    fn random(_: Device, _: DType, _: usize, _: u64, _: Dist) -> Result<Option<XlaStorage>> {
        Ok(None)
    }
}

impl BackendStorage for XlaStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        if l.is_contiguous() && l.offset == 0 && l.shape.elem_count() == self.len {
            return self.download();
        }
        match self.copy_strided(l) {
            Ok(c) => c.download(),
            Err(_) => Ok(self.download()?.copy_strided(l)),
        }
    }
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        dst.copy_from_slice(XlaStorage::to_cpu(self, l)?.as_bytes());
        Ok(())
    }
    fn to_device_direct(&self, _: &Layout, _: Device) -> Result<Option<XlaStorage>> {
        Ok(None)
    }
    fn copy_strided(&self, l: &Layout) -> Result<XlaStorage> {
        self.to_dtype(l, self.dtype)
    }
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.to_dtype(&Layout::contiguous(l.shape.clone()), dtype);
        }
        let mut p = Program::new();
        let v = self.operand(&mut p, l)?;
        let c = p.convert(&v, dtype);
        self.run(p, &c, &[self])
    }
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &XlaStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(ll)? {
            return d.binary(op, &Layout::contiguous(ll.shape.clone()), rhs, rl, out);
        }
        if let Some(d) = rhs.expressible(rl)? {
            return self.binary(op, ll, &d, &Layout::contiguous(rl.shape.clone()), out);
        }
        let mut p = Program::new();
        let a = self.operand(&mut p, ll)?;
        let b = rhs.operand(&mut p, rl)?;
        let r = p.binary_op(op, &a, &b, out.dims());
        self.run(p, &r, &[self, rhs])
    }
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.unary(op, &Layout::contiguous(l.shape.clone()));
        }
        let mut p = Program::new();
        let x = self.operand(&mut p, l)?;
        let r = p.unary_op(op, &x);
        self.run(p, &r, &[self])
    }
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.reduce(op, &Layout::contiguous(l.shape.clone()), dim, out_dtype);
        }
        let mut p = Program::new();
        let x = self.operand(&mut p, l)?;
        let r = p.reduce_op(op, &x, dim);
        if r.dtype != out_dtype {
            return Err(Error::System(format!(
                "internal error: XLA's {op:?} gives {} where {out_dtype} was asked",
                r.dtype
            )));
        }
        self.run(p, &r, &[self])
    }
    fn matmul(&self, rhs: &XlaStorage, spec: &MatmulSpec) -> Result<XlaStorage> {
        let MatmulSpec { m, n, k, a, b, .. } = *spec;
        let (la, lb) = hlo::matmul_layouts(spec);
        if let Some(d) = self.expressible(&la)? {
            // The dense copy holds one matrix when the batch stride was 0.
            let dense = MatmulSpec {
                a: (if a.0 == 0 { 0 } else { m * k }, k, 1, 0),
                ..*spec
            };
            return d.matmul(rhs, &dense);
        }
        if let Some(d) = rhs.expressible(&lb)? {
            let dense = MatmulSpec {
                b: (if b.0 == 0 { 0 } else { k * n }, n, 1, 0),
                ..*spec
            };
            return self.matmul(&d, &dense);
        }
        let mut p = Program::new();
        let va = self.operand(&mut p, &la)?;
        let vb = rhs.operand(&mut p, &lb)?;
        let r = p.matmul_op(spec, &va, &vb);
        self.run(p, &r, &[self, rhs])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XLA's CPU plugin from the test environment (scripts/test.sh installs it).
    fn cpu_plugin() -> Option<std::path::PathBuf> {
        let env = crate::backend::cuda::libs::SearchEnv::from_process();
        super::super::plugin_candidates(&env)
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| p.to_string_lossy().contains("cpu"))
    }

    #[test]
    fn a_client_option_the_plugin_rejects_is_reported_and_the_client_still_starts() {
        let Some(path) = cpu_plugin() else {
            let required = std::env::var("ACCEL_TEST_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|b| b.trim() == "xla"));
            assert!(
                !required,
                "ACCEL_TEST_REQUIRE names xla but no CPU plugin was found"
            );
            println!("skipped: xla: no CPU PJRT plugin (a_client_option_the_plugin_rejects)");
            return;
        };
        let api = pjrt::Api::load(&path).expect("the CPU plugin loads");
        let (c, note) = start_client(api.clone(), &[]).expect("starts with no options");
        assert!(note.is_none() && !c.devices.is_empty());
        drop(c);
        let r = start_client(api, &[("accel_no_such_option", true)]);
        let (c, note) = r.expect("starts, with its defaults if it must");
        assert!(!c.devices.is_empty());
        // XLA's CPU plugin refuses option names it does not know.
        let note = note.expect("the rejection is reported");
        assert!(
            note.contains("accel_no_such_option=true") && note.contains("defaults"),
            "{note}"
        );
    }
}
