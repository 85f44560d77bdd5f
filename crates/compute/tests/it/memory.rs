//! Memory accounting: tensors' bytes are counted while they live and given back when they
//! are dropped. One test in its own process, so no other test allocates meanwhile.

use accelkit::{memory, nn::Linear, nn::Module, DType, Device, Tensor};

#[test]
fn allocation_is_counted_and_returned() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let d = Device::Cpu;
    // Earlier tests in this process may have left freed buffers in the cache.
    memory::empty_cache(&d)?;
    memory::reset_peak(&d);
    let before = memory::stats(&d);
    let t = Tensor::zeros((1000, 1000), DType::F32, &d)?;
    let during = memory::stats(&d);
    assert_eq!(during.allocated_bytes - before.allocated_bytes, 4_000_000);
    // Peak tracking restarted at `before`: the peak is what is live now.
    assert_eq!(during.peak_allocated_bytes, during.allocated_bytes);
    assert_eq!(
        during.reserved_bytes, during.allocated_bytes,
        "the CPU caches nothing"
    );
    assert!(during.total_bytes.unwrap() >= during.free_bytes.unwrap());

    // A same-device to_device, a view and a clone share the buffer: no new bytes.
    let same = t.to_device(&d)?;
    let view = t.t()?;
    let handle = t.clone();
    assert_eq!(memory::stats(&d).allocated_bytes, during.allocated_bytes);
    // A conversion or a contiguous copy of a view allocates (the seeds' warning that
    // .cpu()/.cuda() copy applies to every real copy).
    let half = t.to_dtype(DType::F16)?;
    assert_eq!(
        memory::stats(&d).allocated_bytes - during.allocated_bytes,
        2_000_000
    );
    let copy = view.contiguous()?;
    assert_eq!(
        memory::stats(&d).allocated_bytes - during.allocated_bytes,
        6_000_000
    );
    drop((half, copy));
    let now = memory::stats(&d);
    assert_eq!(now.allocated_bytes, during.allocated_bytes);
    assert_eq!(
        now.peak_allocated_bytes,
        during.allocated_bytes + 6_000_000,
        "the peak remembers the largest moment"
    );

    // The buffer goes back only when its last user goes.
    drop((t, same, view));
    assert_eq!(memory::stats(&d).allocated_bytes, during.allocated_bytes);
    drop(handle);
    let after = memory::stats(&d);
    assert_eq!(after.allocated_bytes, before.allocated_bytes);
    // Large freed buffers stay reserved for reuse, like PyTorch's CUDA caching allocator...
    assert!(
        after.reserved_bytes >= after.allocated_bytes + 4_000_000,
        "{after:?}"
    );
    // ...a same-sized result takes one back instead of asking the OS...
    let again = Tensor::ones((1000, 1000), DType::F32, &d)?;
    assert_eq!(memory::stats(&d).reserved_bytes, after.reserved_bytes);
    assert_eq!(
        again.sum_all()?.to_scalar::<f32>()?,
        1e6,
        "a reused buffer holds the new values"
    );
    drop(again);
    // ...and empty_cache gives them all back.
    memory::empty_cache(&d)?;
    let emptied = memory::stats(&d);
    assert_eq!(emptied.reserved_bytes, emptied.allocated_bytes);

    memory::reset_peak(&d);
    assert_eq!(
        memory::stats(&d).peak_allocated_bytes,
        before.allocated_bytes
    );

    // A model's parameters are counted too: 10x20 weights + 20 biases, f32.
    let model = Linear::new(20, 10, true, &d)?;
    assert_eq!(model.num_parameters(), 210);
    assert_eq!(
        memory::stats(&d).allocated_bytes - before.allocated_bytes,
        840
    );
    drop(model);
    assert_eq!(memory::stats(&d).allocated_bytes, before.allocated_bytes);
    assert_eq!(memory::human_bytes(1536), "1.50 KiB");
    Ok(())
}

#[test]
fn host_figures_are_plausible() -> accelkit::Result<()> {
    let m = accelkit::system::memory()?;
    assert!(
        m.total_bytes > 0 && m.available_bytes <= m.total_bytes && m.used_bytes <= m.total_bytes
    );
    let rss = accelkit::system::process_rss_bytes().unwrap();
    assert!(rss > 1 << 20, "rss {rss}");
    let p = accelkit::system::cpu_percent(std::time::Duration::from_millis(50))?;
    assert!((0.0..=100.0).contains(&p), "{p}");
    let info = accelkit::system::cpu_info();
    assert!(info.logical_cores >= 1);
    Ok(())
}
