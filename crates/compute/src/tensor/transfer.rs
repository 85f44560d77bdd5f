//! Where a tensor's data lives: copies between devices (`to_device`, `cpu`, `cuda`) and
//! page-locked host memory (`pin_memory`), a backend's `PinnedHost` under a `Buffer` that holds
//! its lock.

use std::sync::Arc;

use super::{Buffer, Tensor};
use crate::backend::contract::PinnedHost;
use crate::backend::dispatch::Storage;
use crate::base::shape::Layout;
use crate::{memory, Device, Error, Result, Shape};

impl Tensor {
    /// A copy on `device` (`x.to(d)`). On the same device it returns a new handle to the same
    /// data, as PyTorch does, and allocates nothing.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        Tensor::check_alloc(self.shape(), self.dtype(), device)?;
        if let Some(s) = self.buf.storage.to_device_direct(&self.layout, *device)? {
            return Tensor::from_storage(s, *device, self.shape().clone());
        }
        // A contiguous CPU view (a whole buffer, a pinned tensor's window, a narrowed run) is
        // uploaded as it lies, without a host copy first.
        #[allow(irrefutable_let_patterns)] // CPU-only builds
        if let Storage::Cpu(host) = &self.buf.storage {
            if self.layout.is_contiguous() {
                let start = self.layout.offset;
                let range = start..start + self.shape().elem_count();
                let s = Storage::upload(host.host_range(range), *device)?;
                return Tensor::from_storage(s, *device, self.shape().clone());
            }
        }
        let host = self.buf.storage.to_cpu(&self.layout)?;
        Tensor::from_cpu(host, self.shape().clone(), device)
    }

    /// A copy on the CPU (`x.cpu()`).
    pub fn cpu(&self) -> Result<Tensor> {
        self.to_device(&Device::Cpu)
    }

    /// A copy in page-locked ("pinned") host memory (`x.pin_memory()`), which CUDA GPUs copy
    /// to and from in one DMA, without staging through another buffer. From a CPU tensor (the
    /// same handle when it is pinned already) or, as `x.to("cpu", non_blocking=True)` does in
    /// PyTorch, from a CUDA tensor. Needs a CUDA GPU: pinning is the CUDA driver's job.
    pub fn pin_memory(&self) -> Result<Tensor> {
        if self.is_pinned() {
            return Ok(self.clone());
        }
        self.pinned_copy()
    }

    /// Whether this tensor's data is in pinned host memory (`x.is_pinned()`).
    pub fn is_pinned(&self) -> bool {
        self.buf.pinned.is_some()
    }

    fn pinned_copy(&self) -> Result<Tensor> {
        let gpu = match self.device() {
            Device::Cpu => crate::cuda::current_device().map_err(|e| {
                Error::invalid(
                    "pin_memory",
                    format!("pinned memory is made by the CUDA driver, and there is no usable CUDA GPU: {e}"),
                )
            })?,
            Device::Cuda(i) => i,
            d => {
                return Err(Error::invalid(
                    "pin_memory",
                    format!("pinned memory is for copies to and from CUDA GPUs; this tensor is on {d}: move it to the CPU first"),
                ))
            }
        };
        let (dtype, n) = (self.dtype(), self.shape().elem_count());
        memory::ensure_fits(Device::Cpu, Some((n * dtype.size_in_bytes()) as u64))?;
        let mut pinned = Storage::pinned_host(Device::Cuda(gpu), dtype, n)?;
        // The CPU's view is copied with several threads; a CUDA GPU's straight into the
        // window, in one DMA (the device checks above leave only these two). On an error the
        // PinnedHost gives its storage back to the lock as it drops.
        self.buf
            .storage
            .to_host(&self.layout, pinned.window_mut())?;
        Ok(Tensor::over_pinned(pinned, self.shape().clone()))
    }

    /// A tensor of `shape` over a backend's locked host memory, its window's elements.
    fn over_pinned(pinned: PinnedHost, shape: Shape) -> Tensor {
        let offset = pinned.offset();
        let (host, lock) = pinned.into_parts();
        let bytes = host.len() * host.dtype().size_in_bytes();
        crate::base::ledger::on_alloc(Device::Cpu, bytes);
        let buf = Buffer {
            storage: Storage::Cpu(host),
            device: Device::Cpu,
            bytes,
            pinned: Some(lock),
        };
        let mut layout = Layout::contiguous(shape);
        layout.offset = offset;
        Tensor {
            buf: Arc::new(buf),
            layout,
        }
    }

    /// A copy on the first CUDA GPU (`x.cuda()`).
    pub fn cuda(&self) -> Result<Tensor> {
        self.to_device(&Device::Cuda(0))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::backend::contract::{HostLock, PinnedHost};
    use crate::backend::dispatch::Storage;
    use crate::base::dtype::CpuStorage;
    use crate::{DType, Device, Result, Shape};

    /// A lock that locks nothing and notes the address of each storage given back: the
    /// ownership protocol between `PinnedHost`, `Buffer` and `HostLock`, which the CUDA lock
    /// (page-locking through the driver) follows on a GPU.
    #[derive(Debug)]
    struct Noting(Arc<Mutex<Vec<usize>>>);

    impl HostLock for Noting {
        fn give_back(self: Box<Self>, storage: CpuStorage) {
            self.0
                .lock()
                .unwrap()
                .push(storage.as_bytes().as_ptr() as usize);
            storage.release();
        }
    }

    /// A storage of 10 elements with the window at elements 3..9 holding 0..6.
    fn pinned(given: &Arc<Mutex<Vec<usize>>>) -> (PinnedHost, usize) {
        let storage = CpuStorage::full(DType::F32, 10, -1.0);
        let addr = storage.as_bytes().as_ptr() as usize;
        let mut p = PinnedHost::new(storage, 3, 6, Box::new(Noting(given.clone())));
        let vals: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
        p.window_mut().copy_from_slice(&bytes);
        (p, addr)
    }

    #[test]
    fn a_tensor_over_locked_memory_reads_its_window_and_gives_the_storage_back_once() -> Result<()>
    {
        let given = Arc::new(Mutex::new(Vec::new()));
        let (p, addr) = pinned(&given);
        let t = Tensor::over_pinned(p, Shape::from((2, 3)));
        assert!(t.is_pinned() && t.is_contiguous());
        assert_eq!(t.to_vec2::<f32>()?, [[0., 1., 2.], [3., 4., 5.]]);
        // Ops, views and copies read the window only (the padding holds -1).
        assert_eq!(t.sum_all()?.to_vec_f64()?, [15.0]);
        assert_eq!(t.t()?.to_vec2::<f32>()?, [[0., 3.], [1., 4.], [2., 5.]]);
        let plain = t.copy()?;
        assert!(!plain.is_pinned());
        assert_eq!(plain.to_vec2::<f32>()?, t.to_vec2::<f32>()?);
        // Uploading the window (here to the CPU backend's upload, as to a GPU's) copies only
        // its elements.
        let up = Storage::upload(
            match &t.buf.storage {
                Storage::Cpu(h) => h.host_range(3..9),
                #[allow(unreachable_patterns)]
                _ => unreachable!(),
            },
            Device::Cpu,
        )?;
        assert_eq!(up.len(), 6);
        // Every handle and view shares one buffer: the storage goes back when the last goes.
        let view = t.t()?;
        drop(t);
        assert!(given.lock().unwrap().is_empty());
        drop(view);
        assert_eq!(*given.lock().unwrap(), [addr]);
        Ok(())
    }

    #[test]
    fn locked_memory_that_never_became_a_tensor_goes_back_too() {
        let given = Arc::new(Mutex::new(Vec::new()));
        let (p, addr) = pinned(&given);
        // As on an error between `Backend::pinned_host` and the tensor (`pinned_copy`).
        drop(p);
        assert_eq!(*given.lock().unwrap(), [addr]);
    }

    #[test]
    fn a_window_that_is_not_in_its_storage_is_refused() {
        let given = Arc::new(Mutex::new(Vec::new()));
        let storage = CpuStorage::full(DType::F32, 4, 0.0);
        let r = std::panic::catch_unwind(|| {
            PinnedHost::new(storage, 2, 3, Box::new(Noting(given.clone())))
        });
        assert!(r.is_err());
    }
}
