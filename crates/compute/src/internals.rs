//! Not API: the insides that this crate's own integration tests and the `accel` command reach
//! (the CUDA library search, the kernel sources and cache, the trust rules of files found on
//! disk). Hidden from the docs, left out of `docs/public-api.txt`, and free to change with the
//! code. A cargo feature would hide it better, but the test command would then build `accel`
//! and the CLI twice in release mode (with and without it), about 4 minutes on 2 cores.
#![doc(hidden)]

pub use crate::backend::cuda::{kernel_cache, kernels};
pub use crate::backend::native::{libs, trust};
pub use crate::backend::registry::distinct_hardware;
