//! The seeds' device checks: `torch.cuda.is_available()`, `device_count()`,
//! `torch.backends.mps.is_built()/is_available()`, `torch_xla.devices()`, and the list of
//! devices with the best one first.

use accelkit::Device;

fn main() -> accelkit::Result<()> {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    println!("cuda available: {}", accelkit::cuda::is_available());
    println!("cuda device count: {}", accelkit::cuda::device_count());
    if let Some(d) = accelkit::cuda::devices().first() {
        println!("current cuda device: {}", accelkit::cuda::current_device()?);
        println!("cuda device 0: {}", d.name()?);
    }
    println!("MPS built: {}", accelkit::mps::is_built());
    println!("MPS available: {}", accelkit::mps::is_available());
    match accelkit::xla::device() {
        Ok(d) => println!("xla device: {d} (all: {:?})", accelkit::xla::devices()),
        Err(e) => println!("xla: {e}"),
    }
    // The seeds' `devices` list: every CUDA GPU, then mps, ..., then the CPU.
    let devices = accelkit::available_devices();
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    println!("Available devices: {names:?}");
    let device = Device::best();
    println!("chosen: {device} ({})", device.name()?);
    Ok(())
}
