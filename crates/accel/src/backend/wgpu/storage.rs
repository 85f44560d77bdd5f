//! wgpu adapters, their devices, and tensor data (f32, i32, and f16 where the adapter has
//! `shader-f16`) in GPU buffers with WGSL kernels: a strided map (copies, casts, elementwise
//! ops with broadcasting), a reduction, and a register-blocked matmul.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use wgpu::util::DeviceExt;

use crate::backend::cpu::CpuStorage;
use crate::backend::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::probe::{Availability, DeviceInfo, Probe};
use crate::shape::Layout;
use crate::{DType, Device, Error, Result, Shape};

const MAX_RANK: usize = 8;
const BLOCK: u32 = 256;

/// What device-side timing needs: timestamps written between commands.
const TIMESTAMPS: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

/// A timestamp written into the queue, for device-side timing.
pub(crate) struct Timestamp {
    gpu: Arc<Gpu>,
    set: wgpu::QuerySet,
}

impl Timestamp {
    /// The GPU clock's reading, in nanoseconds (waits for the queue).
    fn read_ns(&self) -> Result<f64> {
        let (d, q) = self.gpu.device()?;
        let resolve = d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 8,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut ticks = [0u8; 8];
        self.gpu.read_back(&mut ticks, |enc, read| {
            enc.resolve_query_set(&self.set, 0..1, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, read, 0, 8);
        })?;
        Ok(u64::from_le_bytes(ticks) as f64 * q.get_timestamp_period() as f64)
    }

    /// Seconds from `start` to this timestamp, by the GPU's clock.
    pub fn seconds_since(&self, start: &Timestamp) -> Result<f64> {
        Ok((self.read_ns()? - start.read_ns()?) / 1e9)
    }
}

/// One adapter, its device and queue (opened on first use), and the compiled pipelines.
pub(crate) struct Gpu {
    pub ordinal: usize,
    adapter: wgpu::Adapter,
    opened: OnceLock<std::result::Result<(wgpu::Device, wgpu::Queue), String>>,
    /// Compiled pipelines by shader text: [checked, trusted] (see `pipeline`), kept apart so
    /// a text can never be handed out compiled the other way.
    pipelines: [Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>; 2],
    /// The last error wgpu reported outside an error scope.
    uncaptured: Arc<Mutex<Option<String>>>,
}

struct Registry {
    gpus: Vec<Arc<Gpu>>,
    problem: Option<String>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        let problem = adapters.is_empty().then(|| {
            if cfg!(target_os = "linux") {
                "no Vulkan adapter: no Vulkan loader (libvulkan.so.1) or no driver (ICD) found"
                    .to_string()
            } else {
                "no GPU adapter found".to_string()
            }
        });
        Registry {
            gpus: adapters
                .into_iter()
                .enumerate()
                .map(|(ordinal, adapter)| {
                    Arc::new(Gpu {
                        ordinal,
                        adapter,
                        opened: OnceLock::new(),
                        pipelines: Default::default(),
                        uncaptured: Arc::new(Mutex::new(None)),
                    })
                })
                .collect(),
            problem,
        }
    })
}

/// The adapter description `probe` reports, for every adapter (also used by the mps probe,
/// which must not go through the cached probe list while it is being built).
pub(crate) fn adapter_infos() -> Vec<DeviceInfo> {
    registry().gpus.iter().map(|g| info_of(g)).collect()
}

pub(crate) fn probe() -> Probe {
    let r = registry();
    if r.gpus.is_empty() {
        return Probe::unavailable(
            "wgpu",
            true,
            r.problem.clone().unwrap_or_default(),
            "install your GPU's Vulkan driver and the loader (Debian/Ubuntu: `apt install \
             libvulkan1 mesa-vulkan-drivers` gives AMD/Intel drivers and the lavapipe software \
             device); on macOS Metal needs nothing",
        );
    }
    let devices = r.gpus.iter().map(|g| info_of(g)).collect();
    Probe {
        backend: "wgpu",
        compiled: true,
        availability: Availability::Available { devices },
    }
}

fn info_of(g: &Gpu) -> DeviceInfo {
    let info = g.adapter.get_info();
    let limits = g.adapter.limits();
    let features = g.adapter.features();
    let f16 = features.contains(wgpu::Features::SHADER_F16);
    let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY)
        && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    DeviceInfo {
        device: Device::Wgpu(g.ordinal),
        name: info.name.clone(),
        memory_total_bytes: None,
        details: vec![
            ("backend".to_string(), format!("{:?}", info.backend)),
            ("device_type".to_string(), format!("{:?}", info.device_type)),
            ("vendor".to_string(), format!("0x{:04x}", info.vendor)),
            (
                "driver".to_string(),
                format!("{} {}", info.driver, info.driver_info)
                    .trim()
                    .to_string(),
            ),
            (
                "max_buffer_bytes".to_string(),
                limits.max_storage_buffer_binding_size.to_string(),
            ),
            (
                "max_workgroups_per_dimension".to_string(),
                limits.max_compute_workgroups_per_dimension.to_string(),
            ),
            ("shader_f16".to_string(), f16.to_string()),
            ("timestamp_queries".to_string(), timestamps.to_string()),
            (
                "dtypes".to_string(),
                if f16 { "f32, i32, f16" } else { "f32, i32" }.to_string(),
            ),
        ],
    }
}

/// What wgpu's allocator holds for `wgpu:i` (its memory blocks, including their free space),
/// if the device is open and the platform reports it (Vulkan and DX12 do).
pub(crate) fn allocator_reserved_bytes(i: usize) -> Option<u64> {
    let g = registry().gpus.get(i)?;
    let (d, _) = g.opened.get()?.as_ref().ok()?;
    d.generate_allocator_report()
        .map(|r| r.total_reserved_bytes)
}

pub(crate) fn gpu(i: usize) -> Result<Arc<Gpu>> {
    crate::backend::check(Device::Wgpu(i))?;
    registry()
        .gpus
        .get(i)
        .cloned()
        .ok_or_else(|| Error::System(format!("wgpu:{i} vanished")))
}

impl Gpu {
    fn device(&self) -> Result<&(wgpu::Device, wgpu::Queue)> {
        self.opened
            .get_or_init(|| {
                // Ask for the adapter's own limits: the defaults cap buffers at 256 MiB.
                let desc = wgpu::DeviceDescriptor {
                    label: Some("accel"),
                    required_limits: self.adapter.limits(),
                    required_features: self.adapter.features()
                        & (TIMESTAMPS | wgpu::Features::SHADER_F16),
                    ..Default::default()
                };
                let (d, q) = pollster::block_on(self.adapter.request_device(&desc))
                    .map_err(|e| format!("requesting a device failed: {e}"))?;
                let slot = self.uncaptured.clone();
                d.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                }));
                Ok((d, q))
            })
            .as_ref()
            .map_err(|e| Error::DeviceUnavailable {
                device: Device::Wgpu(self.ordinal),
                reason: e.clone(),
                hint: "check the GPU driver".to_string(),
                available: String::new(),
            })
    }

    /// An error wgpu reported asynchronously, if any (then cleared).
    fn take_error(&self, what: &str) -> Result<()> {
        match self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(Error::System(format!("wgpu:{} {what}: {e}", self.ordinal))),
            None => Ok(()),
        }
    }

    fn buffer(&self, bytes: u64) -> Result<wgpu::Buffer> {
        let (d, _) = self.device()?;
        let limit = self.adapter.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(Error::OutOfMemory {
                device: Device::Wgpu(self.ordinal),
                requested: bytes,
                requested_h: crate::memory::human_bytes(bytes),
                free: format!(
                    "the adapter binds at most {} per buffer; ",
                    crate::memory::human_bytes(limit)
                ),
                held: crate::memory::stats(&Device::Wgpu(self.ordinal)).allocated_bytes,
                hint: "use smaller tensors on this device".to_string(),
            });
        }
        let scope = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let b = d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::OutOfMemory {
                device: Device::Wgpu(self.ordinal),
                requested: bytes,
                requested_h: crate::memory::human_bytes(bytes),
                free: String::new(),
                held: crate::memory::stats(&Device::Wgpu(self.ordinal)).allocated_bytes,
                hint: format!("wgpu: {e}"),
            });
        }
        Ok(b)
    }

    /// The compiled pipeline of `src` (cached). `trusted`: compile without naga's runtime
    /// bounds checks and loop bounding, for kernels whose every index is proven in range and
    /// whose loops end (the matmuls).
    fn pipeline(&self, src: &str, trusted: bool) -> Result<Arc<wgpu::ComputePipeline>> {
        let cache = &self.pipelines[trusted as usize];
        if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(src) {
            return Ok(p.clone());
        }
        let (d, _) = self.device()?;
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(src.into()),
        };
        let module = if trusted {
            // SAFETY: wgpu requires that a module without runtime checks never indexes out of
            // bounds and that its loops terminate. `trusted` is true only from
            // WgpuStorage::matmul, for `blocked_matmul_wgsl`/MATMUL_SIMPLE: every global
            // read is guarded (row < m, col < n, k0 + kk < k) and indexes the dense copies made
            // by `copy_strided` in `matmul` (batch*rows*cols elements, batch stride 0 or
            // rows*cols), the write is guarded by row < m && col < n into the bsz*m*n output;
            // workgroup indices are < 256 by construction (kk * tile/4 + r/4 with
            // kk < 1024/tile, r < tile); loops run to k <= 2^31 in steps of at least 1, so the
            // u32 counters cannot wrap. `matmul` rejects bsz*m*k, bsz*k*n, bsz*m*n > 2^31
            // (products computed with checked_mul, so a wrapped one cannot pass).
            unsafe { d.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
        } else {
            d.create_shader_module(desc)
        };
        let p = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::System(format!(
                "wgpu:{} could not build a kernel: {e}",
                self.ordinal
            )));
        }
        let p = Arc::new(p);
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(src.to_string(), p.clone());
        Ok(p)
    }

    /// Runs `src`'s `main` with `buffers` bound at 0, 1, ... over `groups` workgroups.
    fn dispatch(
        &self,
        src: &str,
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        self.dispatch_with(src, false, buffers, groups)
    }

    /// [`Gpu::dispatch`], with `trusted` as in [`Gpu::pipeline`].
    fn dispatch_with(
        &self,
        src: &str,
        trusted: bool,
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        let (d, q) = self.device()?;
        let p = self.pipeline(src, trusted)?;
        let layout = p.get_bind_group_layout(0);
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        });
        let mut enc = d.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&p);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        }
        q.submit([enc.finish()]);
        self.take_error("kernel")
    }

    /// 1-D work of `n` items in 256-wide workgroups, spread over two dimensions when it needs
    /// more than the per-dimension limit.
    fn groups_1d(&self, n: usize) -> (u32, u32, u32) {
        let groups = n.div_ceil(BLOCK as usize).max(1) as u64;
        let cap = self
            .adapter
            .limits()
            .max_compute_workgroups_per_dimension
            .max(1) as u64;
        let x = groups.min(cap);
        (x as u32, groups.div_ceil(x) as u32, 1)
    }

    /// Fills `dst` from the GPU: `encode` copies into the mappable buffer it is given (of
    /// `dst`'s size); the work is submitted, waited for, and read back.
    fn read_back(
        &self,
        dst: &mut [u8],
        encode: impl FnOnce(&mut wgpu::CommandEncoder, &wgpu::Buffer),
    ) -> Result<()> {
        let (d, q) = self.device()?;
        let read = d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: dst.len() as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = d.create_command_encoder(&Default::default());
        encode(&mut enc, &read);
        q.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        read.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.synchronize()?;
        let fail = |e: &dyn std::fmt::Display| {
            Error::System(format!("wgpu:{} read-back failed: {e}", self.ordinal))
        };
        rx.recv().map_err(|e| fail(&e))?.map_err(|e| fail(&e))?;
        {
            let view = read.get_mapped_range(..).map_err(|e| fail(&e))?;
            dst.copy_from_slice(&view);
        }
        read.unmap();
        Ok(())
    }

    /// Writes a timestamp into the queue, where the adapter can (else None).
    pub fn timestamp(self: &Arc<Self>) -> Result<Option<Timestamp>> {
        let (d, q) = self.device()?;
        if !d.features().contains(TIMESTAMPS) {
            return Ok(None);
        }
        let set = d.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 1,
        });
        let mut enc = d.create_command_encoder(&Default::default());
        enc.write_timestamp(&set, 0);
        q.submit([enc.finish()]);
        Ok(Some(Timestamp {
            gpu: self.clone(),
            set,
        }))
    }

    /// Waits for all submitted work.
    pub fn synchronize(&self) -> Result<()> {
        let (d, _) = self.device()?;
        d.poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::System(format!("wgpu:{} wait failed: {e}", self.ordinal)))?;
        self.take_error("work")
    }

    fn params(&self, words: &[u32]) -> Result<wgpu::Buffer> {
        let (d, _) = self.device()?;
        Ok(d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck_u32(words),
            usage: wgpu::BufferUsages::STORAGE,
        }))
    }
}

fn bytemuck_u32(w: &[u32]) -> &[u8] {
    // SAFETY: `w` is a live borrowed &[u32]: its pointer is non-null and valid for
    // size_of_val(w) = 4 * len initialised bytes (u32 has no padding), u8 has alignment 1 and
    // every byte is a valid u8, and the result borrows `w` for the same lifetime.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
}

/// Tensor data in one GPU buffer: f32 and i32 on every adapter, f16 where it has `shader-f16`.
pub(crate) struct WgpuStorage {
    pub gpu: Arc<Gpu>,
    pub buf: wgpu::Buffer,
    pub len: usize,
    pub dtype: DType,
}

impl std::fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WgpuStorage(wgpu:{}, {} x {})",
            self.gpu.ordinal, self.len, self.dtype
        )
    }
}

fn unsupported(op: &'static str, dtype: DType) -> Error {
    let why = match dtype {
        DType::F16 => {
            "this adapter lacks `shader-f16`, so it has no f16; use f32 (.to_dtype(DType::F32))"
        }
        DType::I64 => {
            "WGSL has no 64-bit integers; use i32, or keep i64 data on the CPU (an integer sum is i64, as in PyTorch: cast to f32 first to sum on the GPU)"
        }
        _ => "WGSL has f32, i32 and (with `shader-f16`) f16 only; convert first on the CPU with .to_dtype(..)",
    };
    Error::unsupported(op, dtype, why)
}

impl Gpu {
    fn has_f16(&self) -> bool {
        self.adapter.features().contains(wgpu::Features::SHADER_F16)
    }

    /// The WGSL type of `dtype`, or the honest error.
    fn ty(&self, op: &'static str, dtype: DType) -> Result<&'static str> {
        if !super::holds(self.has_f16(), dtype) {
            return Err(unsupported(op, dtype));
        }
        Ok(match dtype {
            DType::F16 => "f16",
            DType::I32 => "i32",
            _ => "f32",
        })
    }
}

/// What every shader starts with: `enable f16` where used, and conversions as the CPU does
/// them: f32 -> i32 saturates with NaN -> 0 (Rust's `as`; WGSL leaves NaN undefined), and
/// f32 -> f16 is the backend's IEEE conversion at run time (beyond f16's range it gives
/// infinity, as the `half` crate does; a test checks it on the adapter).
fn prelude(f16: bool) -> String {
    let mut s = String::from(
        r#"fn isnan32(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
fn f32_to_i32(v: f32) -> i32 {
  if (isnan32(v)) { return 0; }
  if (v >= 2147483648.0) { return 2147483647; }
  if (v < -2147483648.0) { return bitcast<i32>(0x80000000u); }
  return i32(v);
}
"#,
    );
    if f16 {
        s = format!(
            r#"enable f16;
{s}fn to_f16(v: f32) -> f16 {{ return f16(v); }}
"#
        );
    }
    s
}

/// The WGSL expression converting `x` (of `from`) to `to`.
fn convert(x: &str, from: DType, to: DType) -> String {
    use DType::*;
    match (from, to) {
        (a, b) if a == b => x.to_string(),
        (F32, I32) => format!("f32_to_i32({x})"),
        (F16, I32) => format!("f32_to_i32(f32({x}))"),
        (F32, F16) => format!("to_f16({x})"),
        (I32, F16) => format!("to_f16(f32({x}))"),
        _ => format!("f32({x})"),
    }
}

const STRIDED: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<TA>;
@group(0) @binding(1) var<storage, read> b: array<TB>;
@group(0) @binding(2) var<storage, read_write> o: array<TO>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
// p: n, rank, offset a, offset b, dims[8], strides a[8], strides b[8], mode
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wg.y * nw.x + wg.x) * 256u + li;
  if (i >= p[0]) { return; }
  var r = i;
  var oa = p[2];
  var ob = p[3];
  // p[28]: 1 = both operands dense in the output's order, 2 = a dense and b one value
  // (a scalar), 0 = anything else: the per-dimension index arithmetic.
  if (p[28] == 1u) {
    oa = oa + i;
    ob = ob + i;
  } else if (p[28] == 2u) {
    oa = oa + i;
  } else {
    for (var d = i32(p[1]) - 1; d >= 0; d = d - 1) {
      let dim = p[4u + u32(d)];
      let c = r % dim;
      r = r / dim;
      oa = oa + c * p[12u + u32(d)];
      ob = ob + c * p[20u + u32(d)];
    }
  }
  let x = a[oa];
  let y = b[ob];
  o[i] = EXPR;
}
"#;

fn strided_params(
    n: usize,
    dims: &[usize],
    sa: &[usize],
    oa: usize,
    sb: &[usize],
    ob: usize,
) -> Result<Vec<u32>> {
    let too_big = |v: usize| v > u32::MAX as usize;
    if too_big(n) || too_big(oa) || too_big(ob) || dims.len() > MAX_RANK {
        return Err(Error::invalid(
            "wgpu kernel",
            "tensors above 2^32 elements or 8 dimensions are not supported on wgpu",
        ));
    }
    let mut p = vec![0u32; 4 + 3 * MAX_RANK];
    p[0] = n as u32;
    p[1] = dims.len() as u32;
    p[2] = oa as u32;
    p[3] = ob as u32;
    for i in 0..dims.len() {
        p[4 + i] = dims[i] as u32;
        p[12 + i] = sa[i] as u32;
        p[20 + i] = sb[i] as u32;
    }
    Ok(p)
}

impl WgpuStorage {
    pub fn from_cpu(gpu: &Arc<Gpu>, data: &CpuStorage) -> Result<WgpuStorage> {
        gpu.ty("to_device", data.dtype())?;
        let bytes = data.as_bytes();
        let buf = gpu.buffer(bytes.len() as u64)?;
        let (_, q) = gpu.device()?;
        // Queue writes come in whole 4-byte words: an odd number of f16 gets a padded copy.
        if bytes.len() % 4 != 0 {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            q.write_buffer(&buf, 0, &padded);
        } else if !bytes.is_empty() {
            q.write_buffer(&buf, 0, bytes);
        }
        Ok(WgpuStorage {
            gpu: gpu.clone(),
            buf,
            len: data.len(),
            dtype: data.dtype(),
        })
    }

    fn empty(gpu: &Arc<Gpu>, dtype: DType, len: usize) -> Result<WgpuStorage> {
        Ok(WgpuStorage {
            gpu: gpu.clone(),
            buf: gpu.buffer((len * dtype.size_in_bytes()) as u64)?,
            len,
            dtype,
        })
    }

    /// The whole buffer on the host (waits).
    fn download(&self) -> Result<CpuStorage> {
        let mut host = CpuStorage::full(self.dtype, self.len, 0.0);
        let bytes = self.len * self.dtype.size_in_bytes();
        if bytes == 0 {
            return Ok(host);
        }
        // Buffer copies come in whole 4-byte words (the buffer is padded to them).
        let words = bytes.next_multiple_of(4);
        let mut staged = vec![0u8; words];
        self.gpu.read_back(&mut staged, |enc, read| {
            enc.copy_buffer_to_buffer(&self.buf, 0, read, 0, words as u64);
        })?;
        host.as_bytes_mut().copy_from_slice(&staged[..bytes]);
        Ok(host)
    }

    pub fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        if l.is_contiguous() && l.offset == 0 && l.shape.elem_count() == self.len {
            return self.download();
        }
        self.copy_strided(l)?.download()
    }

    /// Runs the strided kernel: `out[i] = expr(x = self[view i], y = rhs[view i])`.
    fn map(
        &self,
        expr: &str,
        la: &Layout,
        rhs: Option<(&WgpuStorage, &Layout)>,
        out: &Shape,
        out_dtype: DType,
    ) -> Result<WgpuStorage> {
        let n = out.elem_count();
        let o = WgpuStorage::empty(&self.gpu, out_dtype, n)?;
        if n == 0 {
            return Ok(o);
        }
        let sa = la.broadcast_strides(out);
        let (b, sb, ob) = match rhs {
            Some((s, l)) => (s, l.broadcast_strides(out), l.offset),
            None => (self, sa.clone(), la.offset),
        };
        let dense = Layout::contiguous(out.clone()).strides;
        // Both operands dense in the output's order (a dimension of size 1 has no stride that
        // matters): rank 0 tells the kernel so.
        let is_dense = |s: &[usize]| {
            out.dims()
                .iter()
                .zip(s.iter().zip(&dense))
                .all(|(&d, (&x, &y))| d == 1 || x == y)
        };
        let mode = if !is_dense(&sa) {
            0
        } else if is_dense(&sb) {
            1
        } else if sb.iter().all(|&x| x == 0) {
            2
        } else {
            0
        };
        let dims = if mode == 0 { out.dims() } else { &[] };
        let mut p = strided_params(n, dims, &sa, la.offset, &sb, ob)?;
        p.push(mode);
        let pb = self.gpu.params(&p)?;
        let f16 = [self.dtype, b.dtype, out_dtype].contains(&DType::F16);
        let src = prelude(f16)
            + &STRIDED
                .replace("TA", self.gpu.ty("kernel", self.dtype)?)
                .replace("TB", self.gpu.ty("kernel", b.dtype)?)
                .replace("TO", self.gpu.ty("kernel", out_dtype)?)
                .replace("EXPR", expr);
        self.gpu.dispatch(
            &src,
            &[&self.buf, &b.buf, &o.buf, &pb],
            self.gpu.groups_1d(n),
        )?;
        Ok(o)
    }

    pub fn copy_strided(&self, l: &Layout) -> Result<WgpuStorage> {
        self.map("x", l, None, &l.shape, self.dtype)
    }

    pub fn cast(&self, l: &Layout, dtype: DType) -> Result<WgpuStorage> {
        self.gpu.ty("to_dtype", dtype)?;
        self.map(&convert("x", self.dtype, dtype), l, None, &l.shape, dtype)
    }

    pub fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &WgpuStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<WgpuStorage> {
        let e = match (op, self.dtype) {
            (BinaryOp::Maximum, DType::I32) => "max(x, y)".to_string(),
            // NaN-propagating, as PyTorch's maximum.
            (BinaryOp::Maximum, _) => "select(select(y, x, x > y), x, isnan32(f32(x)))".to_string(),
            (_, dt) => {
                let sym = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    _ => "/",
                };
                if dt == DType::F16 {
                    // In f32, rounded once to f16, as the CPU does.
                    format!("to_f16(f32(x) {sym} f32(y))")
                } else {
                    // i32 wraps on overflow in WGSL, as in PyTorch.
                    format!("x {sym} y")
                }
            }
        };
        self.map(&e, ll, Some((rhs, rl)), out, self.dtype)
    }

    pub fn unary(&self, op: UnaryOp, l: &Layout) -> Result<WgpuStorage> {
        let t = self.gpu.ty("unary op", self.dtype)?;
        let e = match op {
            UnaryOp::Neg => "-x".to_string(),
            UnaryOp::Relu => format!("select(x, {t}(0), x < {t}(0))"),
            UnaryOp::Exp if self.dtype == DType::F16 => "to_f16(exp(f32(x)))".to_string(),
            UnaryOp::Exp => "exp(x)".to_string(),
        };
        self.map(&e, l, None, &l.shape, self.dtype)
    }

    pub fn reduce(&self, op: ReduceOp, l: &Layout, dim: Option<usize>) -> Result<WgpuStorage> {
        if op == ReduceOp::Sum && !self.dtype.is_float() {
            // PyTorch sums integers to i64, which WGSL has not.
            return Err(unsupported("sum", DType::I64));
        }
        let c = self.copy_strided(l)?;
        let (outer, r, inner) = l.reduce_split(dim);
        let nout = outer * inner;
        if nout == 0 {
            return WgpuStorage::empty(&self.gpu, self.dtype, 0);
        }
        // Floats accumulate in f32 (f16 too, as on the CPU); i32 (max only) in i32.
        let acc = if self.dtype.is_float() {
            DType::F32
        } else {
            DType::I32
        };
        // Some drivers (llvmpipe) stop a shader loop after 65535 iterations: each thread
        // takes at most CHUNK / 256 elements, and long rows are split into parts that a
        // second pass combines.
        const CHUNK: usize = 256 * 8192;
        let parts = r.div_ceil(CHUNK).max(1);
        if parts == 1 {
            return c.reduce_pass(op, (outer, r, inner), r, 1, r, self.dtype);
        }
        let first = if op == ReduceOp::Max {
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        // partial[q * parts + part], in the accumulator's type; the last pass combines each
        // output's parts (the mean divides by r there).
        let partial = c.reduce_pass(first, (outer, r, inner), CHUNK, parts, 1, acc)?;
        partial.reduce_pass(op, (nout, parts, 1), parts, 1, r, self.dtype)
    }

    /// One reduction pass over rows of `r` elements (`outer` x `r` x `inner`), each split in
    /// `parts` of `chunk`; writes `nout * parts` results of `out` dtype. A mean divides by
    /// `divisor`.
    fn reduce_pass(
        &self,
        op: ReduceOp,
        (outer, r, inner): (usize, usize, usize),
        chunk: usize,
        parts: usize,
        divisor: usize,
        out: DType,
    ) -> Result<WgpuStorage> {
        let nout = outer * inner;
        let o = WgpuStorage::empty(&self.gpu, out, nout * parts)?;
        // Short rows, or many outputs with rows a thread can walk alone (within llvmpipe's
        // 65535 loop iterations): a thread per output.
        let per_thread = parts == 1 && (r <= 64 || (nout >= 4096 && r <= 4096));
        let float = self.dtype.is_float();
        let acc = if float { "f32" } else { "i32" };
        let (init, comb, fin) = match op {
            ReduceOp::Sum => ("0.0", "acc + v", "acc"),
            ReduceOp::Mean => ("0.0", "acc + v", "acc / f32(p[5])"),
            // NaN wins, as in PyTorch.
            ReduceOp::Max if float => ("bitcast<f32>(0xff800000u)", "max(acc, v)", "acc"),
            ReduceOp::Max => ("bitcast<i32>(0x80000000u)", "max(acc, v)", "acc"),
        };
        let acc_dtype = if float { DType::F32 } else { DType::I32 };
        let f16 = self.dtype == DType::F16 || out == DType::F16;
        let nan_wins = if op == ReduceOp::Max && float {
            "if (nan != 0u) { res = bitcast<f32>(0x7fc00000u); }"
        } else {
            ""
        };
        let head = format!(
            r#"
@group(0) @binding(0) var<storage, read> a: array<{t_in}>;
@group(0) @binding(1) var<storage, read_write> o: array<{t_out}>;
@group(0) @binding(2) var<storage, read> p: array<u32>;
// p: outer, r, inner, chunk, parts, divisor
fn fold(acc: {acc}, v: {acc}) -> {acc} {{ return {comb}; }}
fn load(i: u32) -> {acc} {{ return {acc}(a[i]); }}
fn is_nan(v: {acc}) -> bool {{ return {float} && isnan32(f32(v)); }}
"#,
            t_in = self.gpu.ty("reduction", self.dtype)?,
            t_out = self.gpu.ty("reduction", out)?,
        );
        let store = convert("res", acc_dtype, out);
        let (body, groups) = if per_thread {
            // One thread per output, looping over its short row: for many small rows, where a
            // workgroup per output would leave most of its 256 threads idle.
            let body = format!(
                r#"
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let q = (wg.y * nw.x + wg.x) * 256u + li;
  let inner = p[2];
  let r = p[1];
  if (q >= p[0] * inner) {{ return; }}
  let a0 = q / inner;
  let c = q % inner;
  var acc: {acc} = {init};
  var nan = 0u;
  for (var j = 0u; j < r; j = j + 1u) {{
    let v = load((a0 * r + j) * inner + c);
    if (is_nan(v)) {{ nan = 1u; }}
    acc = fold(acc, v);
  }}
  var res = {fin};
  {nan_wins}
  o[q] = {store};
}}
"#
            );
            (body, self.gpu.groups_1d(nout))
        } else {
            // One workgroup per (output, part): 256 threads stride over the part, then a tree
            // in workgroup memory. Outputs beyond the per-dimension limit wrap into z.
            let body = format!(
                r#"
var<workgroup> sh: array<{acc}, 256>;
var<workgroup> shn: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let q = wg.z * nw.x + wg.x;
  let part = wg.y;
  let inner = p[2];
  let r = p[1];
  let live = q < p[0] * inner;
  let j0 = part * p[3];
  let j1 = min(r, j0 + p[3]);
  var acc: {acc} = {init};
  var nan = 0u;
  if (live) {{
    let a0 = q / inner;
    let c = q % inner;
    for (var j = j0 + li; j < j1; j = j + 256u) {{
      let v = load((a0 * r + j) * inner + c);
      if (is_nan(v)) {{ nan = 1u; }}
      acc = fold(acc, v);
    }}
  }}
  sh[li] = acc;
  shn[li] = nan;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w = w / 2u) {{
    if (li < w) {{
      sh[li] = fold(sh[li], sh[li + w]);
      shn[li] = shn[li] | shn[li + w];
    }}
    workgroupBarrier();
  }}
  if (live && li == 0u) {{
    acc = sh[0];
    nan = shn[0];
    var res = {fin};
    {nan_wins}
    o[q * p[4] + part] = {store};
  }}
}}
"#
            );
            let cap = self
                .gpu
                .adapter
                .limits()
                .max_compute_workgroups_per_dimension
                .max(1) as usize;
            let x = nout.min(cap);
            (body, (x as u32, parts as u32, nout.div_ceil(x) as u32))
        };
        let src = prelude(f16) + &head + &body;
        let pb = self.gpu.params(&[
            outer as u32,
            r as u32,
            inner as u32,
            chunk as u32,
            parts as u32,
            divisor as u32,
        ])?;
        self.gpu.dispatch(&src, &[&self.buf, &o.buf, &pb], groups)?;
        Ok(o)
    }

    pub fn matmul(&self, rhs: &WgpuStorage, spec: &MatmulSpec) -> Result<WgpuStorage> {
        let MatmulSpec { bsz, m, n, k, a, b } = *spec;
        // The kernels index in u32 and run without naga's bounds checks and loop bounding,
        // which is safe only while every index and loop counter fits with room to spare.
        const LIMIT: usize = 1 << 31;
        let size = |x: usize, y: usize| bsz.checked_mul(x)?.checked_mul(y);
        if [size(m, k), size(k, n), size(m, n)]
            .iter()
            .any(|e| e.is_none_or(|e| e > LIMIT))
        {
            return Err(Error::invalid(
                "matmul",
                "operands or results above 2^31 elements are not supported on wgpu",
            ));
        }
        let out = WgpuStorage::empty(&self.gpu, self.dtype, bsz * m * n)?;
        if bsz * m * n == 0 {
            return Ok(out);
        }
        let cap = self
            .gpu
            .adapter
            .limits()
            .max_compute_workgroups_per_dimension as usize;
        if bsz > cap {
            return Err(Error::invalid(
                "matmul",
                format!("a batch of {bsz} matrices is more than this adapter's {cap} workgroups per dimension; split the batch"),
            ));
        }
        // Dense operands: a batch stride of 0 stays 0 (one matrix for every batch).
        let dense =
            |s: &WgpuStorage, st: (usize, usize, usize, usize), rows: usize, cols: usize| {
                let batch = if st.0 == 0 { 1 } else { bsz };
                let l = Layout {
                    shape: Shape::from((batch, rows, cols)),
                    strides: vec![st.0, st.1, st.2],
                    offset: st.3,
                };
                s.copy_strided(&l)
                    .map(|c| (c, if st.0 == 0 { 0 } else { rows * cols }))
            };
        let (da, sa) = dense(self, a, m, k)?;
        let (db, sb) = dense(rhs, b, k, n)?;
        let pb = self
            .gpu
            .params(&[m as u32, n as u32, k as u32, sa as u32, sb as u32])?;
        let kernel = matmul_kernel(&self.gpu, self.dtype, (m, n, k))?;
        if n.div_ceil(kernel.tile).max(m.div_ceil(kernel.tile)) > cap {
            return Err(Error::invalid(
                "matmul",
                format!("a {m}x{n} result needs more than this adapter's {cap} workgroups per dimension"),
            ));
        }
        let groups = (
            n.div_ceil(kernel.tile) as u32,
            m.div_ceil(kernel.tile) as u32,
            bsz as u32,
        );
        self.gpu.dispatch_with(
            &kernel.src,
            true,
            &[&da.buf, &db.buf, &out.buf, &pb],
            groups,
        )?;
        Ok(out)
    }
}

struct MatmulKernel {
    src: String,
    /// Rows and columns of C per workgroup.
    tile: usize,
}

/// The matmul shader for `dtype`: floats accumulate in f32 (f16 is rounded once at the
/// end, as on the CPU), i32 in i32 (wrapping).
fn matmul_kernel(
    gpu: &Gpu,
    dtype: DType,
    (m, n, k): (usize, usize, usize),
) -> Result<MatmulKernel> {
    let t = gpu.ty("matmul", dtype)?;
    let acc = if dtype.is_float() { "f32" } else { "i32" };
    let acc_dtype = if dtype.is_float() {
        DType::F32
    } else {
        DType::I32
    };
    // The register-blocked kernels are faster everywhere, lavapipe included (2.7x at N=256);
    // the simple one stays for comparisons, within llvmpipe's 65535 loop iterations. The
    // 128x128 kernel does 64 multiply-adds per 4 vec4 reads of workgroup memory (the 64x64
    // one 16 per 2) but runs a quarter as many workgroups: for large products on hardware
    // GPUs, which need many workgroups to fill their cores, and everywhere on software ones
    // (lavapipe: 1.2-1.4x the 64x64 kernel at N=256-512).
    let big = (m >= 1024 && n >= 1024) || crate::wgpu::is_software(gpu.ordinal);
    let tile = match super::matmul_kernel() {
        "simple" if k < 65535 => 16,
        "blocked128" => 128,
        "auto" if big => 128,
        _ => 64,
    };
    let body = if tile == 16 {
        MATMUL_SIMPLE.to_string()
    } else {
        blocked_matmul_wgsl(tile)
    };
    let src = prelude(dtype == DType::F16)
        + &body
            .replace("TYPE", t)
            .replace("ACC", acc)
            .replace("STORE", &convert("v", acc_dtype, dtype));
    Ok(MatmulKernel { src, tile })
}

/// A register-blocked matmul shader with `tile` x `tile` blocks of C per 16x16 workgroup
/// (`tile` is 64 or 128). Each thread computes (tile/64)^2 groups of 4x4 outputs, held in vec4
/// accumulators: rows 64g + 4y .. +3 and columns 64h + 4x .. +3 for its (x, y), so
/// neighbouring threads read neighbouring vec4s of workgroup memory. Per step along k the
/// workgroup stages a tile x BK panel of A and a BK x tile panel of B there (BK = 1024 / tile:
/// four elements per thread each, bounds-checked and zero outside, so any shape works); each
/// thread then reads 2 * (tile/64) vec4s per k and does 16 * (tile/64)^2 multiply-adds with
/// them. `workgroup_id.z` is the batch. TYPE, ACC and STORE are filled in per dtype.
fn blocked_matmul_wgsl(tile: usize) -> String {
    let g = tile / 64;
    let bk = 1024 / tile;
    let vecs = tile / 4;
    let mut compute = String::new();
    for gi in 0..g {
        compute += &format!(
            "      let a{gi} = ta[kk * {vecs}u + {}u + lid.y];\n",
            gi * 16
        );
    }
    for gj in 0..g {
        compute += &format!(
            "      let b{gj} = tb[kk * {vecs}u + {}u + lid.x];\n",
            gj * 16
        );
    }
    for gi in 0..g {
        for gj in 0..g {
            for (i, c) in ["x", "y", "z", "w"].iter().enumerate() {
                let q = (gi * g + gj) * 4 + i;
                compute += &format!("      acc[{q}] = acc[{q}] + a{gi}.{c} * b{gj};\n");
            }
        }
    }
    format!(
        r#"
@group(0) @binding(0) var<storage, read> a: array<TYPE>;
@group(0) @binding(1) var<storage, read> b: array<TYPE>;
@group(0) @binding(2) var<storage, read_write> c: array<TYPE>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
// p: m, n, k, batch stride of a, batch stride of b
// ta[kk * {vecs} + i]: rows 4i..4i+3 of the A panel at column kk; tb[kk * {vecs} + j]:
// columns 4j..4j+3 of the B panel at row kk.
var<workgroup> ta: array<vec4<ACC>, 256>;
var<workgroup> tb: array<vec4<ACC>, 256>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let m = p[0]; let n = p[1]; let k = p[2];
  let z = wg.z;
  let ba = z * p[3];
  let bb = z * p[4];
  let row0 = wg.y * {tile}u;
  let col0 = wg.x * {tile}u;
  // acc[(gi * {g} + gj) * 4 + i]: row 64 gi + 4 lid.y + i, columns 64 gj + 4 lid.x ..
  var acc: array<vec4<ACC>, {nacc}>;
  for (var k0 = 0u; k0 < k; k0 = k0 + {bk}u) {{
    for (var s = 0u; s < 4u; s = s + 1u) {{
      let e = li + s * 256u;
      // A: consecutive threads read consecutive k of one row.
      let r = e / {bk}u;
      let kk = e % {bk}u;
      var va = ACC(0);
      if (row0 + r < m && k0 + kk < k) {{ va = ACC(a[ba + (row0 + r) * k + k0 + kk]); }}
      ta[kk * {vecs}u + r / 4u][r % 4u] = va;
      // B: consecutive threads read consecutive columns of one row.
      let kb = e / {tile}u;
      let cb = e % {tile}u;
      var vb = ACC(0);
      if (k0 + kb < k && col0 + cb < n) {{ vb = ACC(b[bb + (k0 + kb) * n + col0 + cb]); }}
      tb[kb * {vecs}u + cb / 4u][cb % 4u] = vb;
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < {bk}u; kk = kk + 1u) {{
{compute}    }}
    workgroupBarrier();
  }}
  for (var gi = 0u; gi < {g}u; gi = gi + 1u) {{
    for (var i = 0u; i < 4u; i = i + 1u) {{
      let row = row0 + gi * 64u + lid.y * 4u + i;
      for (var gj = 0u; gj < {g}u; gj = gj + 1u) {{
        for (var j = 0u; j < 4u; j = j + 1u) {{
          let col = col0 + gj * 64u + lid.x * 4u + j;
          if (row < m && col < n) {{
            let v = acc[(gi * {g}u + gj) * 4u + i][j];
            c[z * m * n + row * n + col] = STORE;
          }}
        }}
      }}
    }}
  }}
}}
"#,
        nacc = g * g * 4,
    )
}

/// One thread per output, no shared memory: the plain reference kernel, for comparisons.
const MATMUL_SIMPLE: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<TYPE>;
@group(0) @binding(1) var<storage, read> b: array<TYPE>;
@group(0) @binding(2) var<storage, read_write> c: array<TYPE>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let m = p[0]; let n = p[1]; let k = p[2];
  let z = wg.z;
  let row = wg.y * 16u + lid.y;
  let col = wg.x * 16u + lid.x;
  if (row >= m || col >= n) { return; }
  let ra = z * p[3] + row * k;
  let cb = z * p[4] + col;
  var acc = ACC(0);
  for (var q = 0u; q < k; q = q + 1u) {
    acc = acc + ACC(a[ra + q]) * ACC(b[cb + q * n]);
  }
  let v = acc;
  c[z * m * n + row * n + col] = STORE;
}
"#;
