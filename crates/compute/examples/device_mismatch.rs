//! The seeds' mixed-device error: a matmul of a GPU tensor and a CPU tensor is refused with a
//! clear message (an error value, not a crash); moving one side fixes it.

use accelkit::{Device, Tensor};

fn main() -> accelkit::Result<()> {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    let device = Device::best();
    let a = Tensor::new(&[[1i64, 1], [2, 2]], &device)?;
    let b = Tensor::new(&[[5i64, 6], [7, 8]], &Device::Cpu)?;
    if device == Device::Cpu {
        println!("no accelerator here, so both tensors are on the cpu and the product works:");
        println!("{}", a.matmul(&b)?);
        // Show the error anyway with a device that is not available.
        if let Err(e) = b.to_device(&Device::Cuda(0)) {
            println!("moving to cuda:0 fails with: {e}");
        }
        return Ok(());
    }
    match a.matmul(&b) {
        Ok(_) => println!("unexpected: mixed devices were accepted"),
        Err(e) => println!("error: {e}"),
    }
    println!("{}", a.cpu()?.matmul(&b)?);
    Ok(())
}
