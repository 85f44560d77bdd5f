//! The values everything else is made of: dtypes (and host data of each dtype), shapes and
//! layouts, devices and backend kinds, typed capabilities, probe results, errors, the ledger
//! of what live tensors hold, the seedable generator behind `rand`/`randn`, and the host's own
//! facts. Nothing here knows a backend.

pub(crate) mod caps;
pub(crate) mod check;
pub(crate) mod cpu_peak;
pub(crate) mod cpuset;
pub(crate) mod device;
pub(crate) mod dtype;
pub(crate) mod error;
pub(crate) mod facts;
pub(crate) mod finding;
pub(crate) mod ledger;
pub mod probe;
pub(crate) mod rng;
pub(crate) mod shape;
pub(crate) mod threads;

pub(crate) use accelkit_core::{env, probe_child, system};
