//! The readers against recorded machines (`tests/fixtures`: sysfs, procfs and ioreg text of
//! real hosts) and, for the TPU, against a real gRPC metrics service. Unit tests: they reach
//! the readers' parsers, which are not the crate's API.

mod apple;
mod drm;
mod tpu;
