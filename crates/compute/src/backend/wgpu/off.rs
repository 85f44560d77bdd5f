//! The wgpu backend left out of the build (no `wgpu` feature): `backend::off`'s stand-in.

use crate::BackendKind;
crate::backend::off::compiled_out!(Wgpu, WgpuStorage, Timestamp, BackendKind::Wgpu);

/// Every adapter's description, as the probe reports it (none in this build).
pub(crate) fn adapter_infos() -> Vec<crate::base::probe::DeviceInfo> {
    Vec::new()
}

/// The probe helper's answer for `wgpu` in this build: whether it is available (never).
pub(crate) fn helper_answer(available: bool) -> crate::backend::off::Available {
    crate::backend::off::Available { available }
}
