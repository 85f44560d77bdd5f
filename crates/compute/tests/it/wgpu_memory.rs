//! wgpu memory accounting: tensors' bytes per dtype, and reserved from wgpu's allocator
//! report. One test in its own process, so no other test allocates on the adapter meanwhile.
#![cfg(feature = "wgpu")]

use crate::common;

use accelkit::{DType, Tensor};

/// Named `wgpu::...` so that `cargo test wgpu` selects the wgpu backend's tests.
mod wgpu {
    #[allow(unused_imports)]
    use super::*;

    #[test]
    fn memory_is_accounted_per_dtype_with_the_allocator_report() -> accelkit::Result<()> {
        // One process runs every module's tests: the device counters are shared.
        let _serial = crate::common::lock();
        for d in common::devices_of("wgpu", "wgpu memory accounting") {
            accelkit::memory::reset_peak(&d);
            let before = accelkit::memory::stats(&d);
            let a = Tensor::zeros((1 << 20) + 1, DType::F32, &d)?;
            let b = Tensor::zeros(1001, DType::I32, &d)?;
            let mid = accelkit::memory::stats(&d);
            assert_eq!(
                mid.allocated_bytes,
                before.allocated_bytes + 4 * ((1 << 20) + 1) + 4 * 1001
            );
            // Peak tracking restarted at `before`: the peak is what is live now.
            assert_eq!(mid.peak_allocated_bytes, mid.allocated_bytes);
            if d.supports(DType::F16) {
                let h = Tensor::zeros(3, DType::F16, &d)?;
                assert_eq!(
                    accelkit::memory::stats(&d).allocated_bytes,
                    mid.allocated_bytes + 6
                );
                drop(h);
            }
            drop((a, b));
            let after = accelkit::memory::stats(&d);
            assert_eq!(after.allocated_bytes, before.allocated_bytes);
            let f16_bytes = if d.supports(DType::F16) { 6 } else { 0 };
            assert_eq!(
                after.peak_allocated_bytes,
                mid.allocated_bytes + f16_bytes,
                "the peak remembers the largest moment"
            );
        }
        Ok(())
    }
}
