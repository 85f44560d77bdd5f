//! The seeds' tensor moves: create on the CPU, `.cuda()`/`.to(device)` and back, and create
//! directly on the chosen device. Each move between devices is a copy.

use accelkit::{Device, Tensor};

fn main() -> accelkit::Result<()> {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    let data = [[1i64, 2], [3, 4]];
    let x = Tensor::new(&data, &Device::Cpu)?;
    println!("initial: is_cuda = {}", x.is_cuda());

    if accelkit::cuda::is_available() {
        let x = x.cuda()?; // a copy in GPU memory
        println!("after cuda(): is_cuda = {}", x.is_cuda());
        let x = x.cpu()?;
        println!("back on cpu: is_cuda = {}", x.is_cuda());
    }

    // The seeds' tip: create the tensor on the device from the start.
    let device = Device::best();
    let y = Tensor::new(&data, &device)?;
    println!("{y}");
    println!("device: {}", y.device());

    // `to_device` of another device copies; of the same device it is the same data.
    let z = y.to_device(&Device::Cpu)?;
    println!("copied to {}: {z}", z.device());
    Ok(())
}
