//! The seeds' model moves: `linear.cuda()` / `linear.cpu()`, and — what PyTorch lacks — asking
//! a model which device it is on.

use accelkit::nn::{Linear, Module};
use accelkit::{DType, Device, Tensor};

fn main() -> accelkit::Result<()> {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    let mut linear = Linear::new(4, 2, true, &Device::Cpu)?;
    println!(
        "parameters: {}, device: {}",
        linear.num_parameters(),
        linear.device()
    );

    let device = Device::best();
    linear.to_device(&device)?; // every parameter is copied
    println!("after to_device: {}", linear.device());
    let x = Tensor::ones((3, 4), DType::F32, &device)?;
    println!("{}", linear.forward(&x)?);

    linear.cpu()?;
    println!("after cpu(): {}", linear.device());
    if let Err(e) = linear.cuda() {
        println!("cuda(): {e}");
    }
    Ok(())
}
