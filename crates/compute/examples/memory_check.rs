//! The seeds' memory checks: CPU use and RAM (psutil), what the allocator holds (PyTorch's
//! memory_allocated / memory_reserved), and that each copy between devices allocates.

use std::time::Duration;

use accelkit::memory::{self, human_bytes};
use accelkit::{Device, Tensor};

fn main() -> accelkit::Result<()> {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    println!(
        "CPU use: {:.1}%",
        accelkit::system::cpu_percent(Duration::from_secs(1))?
    );
    let m = accelkit::system::memory()?;
    println!(
        "RAM in use: {:.2} GB / total {:.2} GB",
        m.used_bytes as f64 / 1e9,
        m.total_bytes as f64 / 1e9
    );

    let device = Device::best();
    let x = Tensor::randn(0.0, 1.0, (1000, 1000), &device)?; // on the device
    let y = x.cpu()?; // a copy in RAM (the same handle when the device is the CPU)
    let z = y.to_device(&device)?; // another copy on the device
    for d in [device, Device::Cpu] {
        let s = memory::stats(&d);
        println!(
            "{d}: allocated {}, reserved {}, peak {}",
            human_bytes(s.allocated_bytes),
            human_bytes(s.reserved_bytes),
            human_bytes(s.peak_allocated_bytes)
        );
        if device == Device::Cpu {
            break;
        }
    }
    drop((x, y, z)); // the seeds' `del`: memory comes back when the last handle goes
    println!(
        "after drop: allocated {}",
        human_bytes(memory::stats(&device).allocated_bytes)
    );
    Ok(())
}
