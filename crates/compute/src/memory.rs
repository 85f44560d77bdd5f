//! Memory accounting per device: what live tensors hold (allocated), what the allocator keeps
//! (reserved), the peak, and the device's free/total memory where it is known. PyTorch's
//! `torch.cuda.memory_allocated()` / `memory_reserved()`, for every device, the CPU included.

use serde::Serialize;

use crate::base::error::Room;
use crate::{Device, Error, Result};

/// A snapshot of one device's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    /// The device.
    pub device: Device,
    /// Bytes held by live tensors on the device.
    pub allocated_bytes: u64,
    /// The most `allocated_bytes` has been since start (or the last `reset_peak`).
    pub peak_allocated_bytes: u64,
    /// Bytes the allocator holds: live tensors plus freed buffers it keeps for reuse (on the
    /// CPU, large buffers up to 1 GiB; `empty_cache` returns them). On wgpu, the memory blocks
    /// wgpu's own allocator reports holding, where it reports them (Vulkan, DX12).
    pub reserved_bytes: u64,
    /// Free memory on the whole device, where known (for the CPU: available RAM).
    pub free_bytes: Option<u64>,
    /// Total memory of the device, where known.
    pub total_bytes: Option<u64>,
}

/// The memory statistics of `device`.
pub fn stats(device: &Device) -> MemoryStats {
    let c = crate::base::ledger::with_counters(|m| m.get(device).copied().unwrap_or_default());
    let (free, total) = match device {
        Device::Cpu => match crate::base::system::memory() {
            Ok(m) => (Some(m.available_bytes), Some(m.total_bytes)),
            Err(_) => (None, None),
        },
        _ => match crate::backend::dispatch::device_memory(*device) {
            Some((f, t)) => (Some(f), Some(t)),
            None => (None, None),
        },
    };
    MemoryStats {
        device: *device,
        allocated_bytes: c.allocated,
        peak_allocated_bytes: c.peak,
        reserved_bytes: match crate::backend::dispatch::allocator_reserved_bytes(*device) {
            Some(r) => r.max(c.allocated),
            None => c.allocated + crate::backend::dispatch::cached_bytes(*device),
        },
        free_bytes: free,
        total_bytes: total,
    }
}

/// Restarts peak tracking from the current allocation (`torch.cuda.reset_peak_memory_stats`).
pub fn reset_peak(device: &Device) {
    crate::base::ledger::with_counters(|m| {
        let c = m.entry(*device).or_default();
        c.peak = c.allocated;
    });
}

/// Returns cached, unused memory to the device or the OS (`torch.cuda.empty_cache()`).
pub fn empty_cache(device: &Device) -> Result<()> {
    device.check()?;
    crate::backend::dispatch::empty_cache(*device);
    Ok(())
}

pub use accelkit_core::units::human_bytes;

/// Host allocations above this size are checked against available RAM first: Linux would
/// hand out the address space and then kill the process when the pages are touched.
const CHECK_ABOVE_BYTES: u64 = 64 << 20;

/// Fails with `OutOfMemory` when `bytes` cannot be allocated on `device`. Cheap for the
/// common case: small requests are not checked, so no op pays for a look at the OS.
pub(crate) fn ensure_fits(device: Device, bytes: Option<u64>) -> Result<()> {
    if bytes.is_some_and(|b| b <= CHECK_ABOVE_BYTES) {
        return Ok(());
    }
    let oom = |requested: u64, room: Room| {
        Error::out_of_memory(
            device,
            requested,
            room,
            "free tensors you no longer need (drop them), use smaller shapes or a \
             smaller dtype (f16/bf16), or process the data in batches",
        )
    };
    let Some(bytes) = bytes else {
        return Err(oom(u64::MAX, Room::Overflow));
    };
    if let Device::Cpu = device {
        // Freed buffers in the cache can be handed out (or returned to the OS) first.
        let m = crate::base::system::memory()?;
        let cached = crate::backend::dispatch::cached_bytes(device);
        if bytes > m.available_bytes + cached {
            return Err(oom(
                bytes,
                Room::Ram {
                    available: m.available_bytes,
                    total: m.total_bytes,
                },
            ));
        }
    } else if let Some((free, total)) = crate::backend::dispatch::device_memory(device) {
        let cached = crate::backend::dispatch::cached_bytes(device);
        if bytes > free + cached {
            return Err(oom(bytes, Room::Free { free, total }));
        }
    } else {
        // The device does not say what it has free; the data is staged in host memory on
        // its way there, so at least that must fit.
        let m = crate::base::system::memory()?;
        if bytes > m.available_bytes {
            return Err(oom(
                bytes,
                Room::Staging {
                    available: m.available_bytes,
                },
            ));
        }
    }
    Ok(())
}
