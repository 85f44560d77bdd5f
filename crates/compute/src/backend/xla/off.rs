//! The XLA backend left out of the build (no `xla` feature, or not Linux): `backend::off`'s
//! stand-in.

use crate::BackendKind;
crate::backend::off::compiled_out!(Xla, XlaStorage, TimingPoint, BackendKind::Xla);
