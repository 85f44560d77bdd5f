//! The seeds' device checks: `torch.cuda.is_available()`, `device_count()`,
//! `torch.backends.mps.is_built()/is_available()`, `torch_xla.devices()`, and the list of
//! devices with the best one first.

use accel::Device;

fn main() -> accel::Result<()> {
    println!("cuda available: {}", accel::cuda::is_available());
    println!("cuda device count: {}", accel::cuda::device_count());
    if let Some(d) = accel::cuda::devices().first() {
        println!("current cuda device: {}", accel::cuda::current_device()?);
        println!("cuda device 0: {}", d.name()?);
    }
    println!("MPS built: {}", accel::mps::is_built());
    println!("MPS available: {}", accel::mps::is_available());
    match accel::xla::device() {
        Ok(d) => println!("xla device: {d} (all: {:?})", accel::xla::devices()),
        Err(e) => println!("xla: {e}"),
    }
    // The seeds' `devices` list: every CUDA GPU, then mps, ..., then the CPU.
    let devices = accel::available_devices();
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    println!("Available devices: {names:?}");
    let device = Device::best();
    println!("chosen: {device} ({})", device.name()?);
    Ok(())
}
