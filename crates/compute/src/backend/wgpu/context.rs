//! One wgpu adapter in use: adapters found once (the backend's own adapter registry), each
//! one's device opened on first use, buffers, compiled pipelines (cached per shader text),
//! dispatches and timestamps.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use wgpu::util::DeviceExt;

use crate::base::error::Room;
use crate::{BackendKind, DType, Device, Error, Result};

/// Most dimensions a strided kernel takes.
pub(super) const MAX_RANK: usize = 8;
/// Threads per workgroup of the elementwise and reduction kernels.
pub(super) const BLOCK: u32 = 256;

/// What device-side timing needs: timestamps written between commands.
pub(super) const TIMESTAMPS: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

/// A timestamp written into the queue, for device-side timing.
pub(crate) struct Timestamp {
    gpu: Arc<WgpuContext>,
    set: wgpu::QuerySet,
}

impl Timestamp {
    /// The GPU clock's reading, in nanoseconds (waits for the queue).
    pub(super) fn read_ns(&self) -> Result<f64> {
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
pub(crate) struct WgpuContext {
    pub ordinal: usize,
    pub(super) adapter: wgpu::Adapter,
    opened: OnceLock<std::result::Result<(wgpu::Device, wgpu::Queue), String>>,
    /// Compiled pipelines by shader text: [checked, trusted] (see `pipeline`), kept apart so
    /// a text can never be handed out compiled the other way.
    pipelines: [Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>; 2],
    /// The last error wgpu reported outside an error scope.
    uncaptured: Arc<Mutex<Option<String>>>,
}

pub(super) struct Registry {
    pub(super) gpus: Vec<Arc<WgpuContext>>,
    pub(super) problem: Option<String>,
}

pub(super) fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        // Vulkan's loader and drivers cannot be stopped once enumerating: where the program
        // enabled the probe helper, a child enumerates first, killed at its deadline.
        if let Err(r) = crate::base::probe_child::canary("wgpu") {
            return Registry {
                gpus: Vec::new(),
                problem: Some(r.reason),
            };
        }
        crate::base::probe_child::step("create the wgpu instance");
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        crate::base::probe_child::step("enumerate Vulkan/Metal adapters");
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
                    Arc::new(WgpuContext {
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

/// What wgpu's allocator holds for `wgpu:i` (its memory blocks, including their free space),
/// if the device is open and the platform reports it (Vulkan and DX12 do).
pub(crate) fn allocator_reserved_bytes(i: usize) -> Option<u64> {
    let g = registry().gpus.get(i)?;
    let (d, _) = g.opened.get()?.as_ref().ok()?;
    d.generate_allocator_report()
        .map(|r| r.total_reserved_bytes)
}

pub(crate) fn gpu(i: usize) -> Result<Arc<WgpuContext>> {
    registry()
        .gpus
        .get(i)
        .cloned()
        .ok_or_else(|| Error::internal(format!("wgpu:{i} is not among the adapters found")))
}

impl WgpuContext {
    pub(super) fn device(&self) -> Result<&(wgpu::Device, wgpu::Queue)> {
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
                available: Vec::new(),
            })
    }

    /// An error wgpu reported asynchronously, if any (then cleared).
    pub(super) fn take_error(&self, what: &str) -> Result<()> {
        match self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(Error::backend(
                BackendKind::Wgpu,
                format!("wgpu:{} {what}", self.ordinal),
                e.to_string(),
            )),
            None => Ok(()),
        }
    }

    pub(super) fn buffer(&self, bytes: u64) -> Result<wgpu::Buffer> {
        let (d, _) = self.device()?;
        let limit = self.adapter.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(Error::out_of_memory(
                Device::Wgpu(self.ordinal),
                bytes,
                Room::BufferLimit { max: limit },
                "use smaller tensors on this device",
            ));
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
            return Err(Error::out_of_memory(
                Device::Wgpu(self.ordinal),
                bytes,
                Room::Unknown,
                format!("wgpu: {e}"),
            ));
        }
        Ok(b)
    }

    /// The compiled pipeline of `src` (cached). `trusted`: compile without naga's runtime
    /// bounds checks and loop bounding, for kernels whose every index is proven in range and
    /// whose loops end (the matmuls).
    pub(super) fn pipeline(&self, src: &str, trusted: bool) -> Result<Arc<wgpu::ComputePipeline>> {
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
            return Err(Error::backend(
                BackendKind::Wgpu,
                format!("wgpu:{} could not build a kernel", self.ordinal),
                e,
            ));
        }
        let p = Arc::new(p);
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(src.to_string(), p.clone());
        Ok(p)
    }

    /// Runs `src`'s `main` with `buffers` bound at 0, 1, ... over `groups` workgroups.
    pub(super) fn dispatch(
        &self,
        src: &str,
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        self.dispatch_with(src, false, buffers, groups)
    }

    /// [`WgpuContext::dispatch`], with `trusted` as in [`WgpuContext::pipeline`].
    pub(super) fn dispatch_with(
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
    pub(super) fn groups_1d(&self, n: usize) -> (u32, u32, u32) {
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
    pub(super) fn read_back(
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
            Error::backend(
                BackendKind::Wgpu,
                format!("wgpu:{} read-back failed", self.ordinal),
                e.to_string(),
            )
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
        d.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| {
            Error::backend(
                BackendKind::Wgpu,
                format!("wgpu:{} wait failed", self.ordinal),
                e.to_string(),
            )
        })?;
        self.take_error("work")
    }

    pub(super) fn params(&self, words: &[u32]) -> Result<wgpu::Buffer> {
        let (d, _) = self.device()?;
        Ok(d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck_u32(words),
            usage: wgpu::BufferUsages::STORAGE,
        }))
    }
}

pub(super) fn bytemuck_u32(w: &[u32]) -> &[u8] {
    // SAFETY: `w` is a live borrowed &[u32]: its pointer is non-null and valid for
    // size_of_val(w) = 4 * len initialised bytes (u32 has no padding), u8 has alignment 1 and
    // every byte is a valid u8, and the result borrows `w` for the same lifetime.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
}

impl WgpuContext {
    /// Whether the adapter is a software one (lavapipe, SwiftShader): the CPU again.
    pub(super) fn is_software(&self) -> bool {
        self.adapter.get_info().device_type == wgpu::DeviceType::Cpu
    }

    pub(super) fn has_f16(&self) -> bool {
        self.adapter.features().contains(wgpu::Features::SHADER_F16)
    }

    /// The WGSL type of `dtype`, or the honest error.
    pub(super) fn ty(&self, op: &'static str, dtype: DType) -> Result<&'static str> {
        if !holds(self.has_f16(), dtype) {
            return Err(unsupported(op, dtype));
        }
        Ok(match dtype {
            DType::F16 => "f16",
            DType::I32 => "i32",
            _ => "f32",
        })
    }
}

pub(super) fn unsupported(op: &'static str, dtype: DType) -> Error {
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

/// Whether an adapter (with or without `shader-f16`) holds tensors of `dtype`.
fn holds(has_f16: bool, dtype: crate::DType) -> bool {
    use crate::DType::*;
    match dtype {
        F32 | I32 => true,
        F16 => has_f16,
        F64 | I64 | BF16 => false,
    }
}
