//! A backend left out of the build: the same items as the real one, over types that have no
//! values, so the dispatch code needs no `cfg`. Its probe says it is not compiled in and how
//! to rebuild; every device call is the same error value. No storage or event of it can
//! exist, so its storage ops are empty matches.

/// Defines `$backend` (implementing `Backend`), `$storage` and `$event` for a backend the
/// build leaves out.
#[allow(unused_macros)] // every backend is compiled into the default build
macro_rules! compiled_out {
    ($backend:ident, $storage:ident, $event:ident, $kind:expr) => {
        /// This backend, compiled out of this build.
        pub(crate) struct $backend;

        /// Storage of a compiled-out backend: no value exists.
        #[derive(Debug)]
        pub(crate) enum $storage {}

        /// Event of a compiled-out backend: no value exists.
        pub(crate) enum $event {}

        fn not_compiled<T>() -> $crate::Result<T> {
            Err($crate::Error::NotCompiled {
                backend: $kind.name(),
                feature: $kind.feature().unwrap_or_default(),
            })
        }

        impl $crate::backend::contract::Backend for $backend {
            type Storage = $storage;
            type Event = $event;
            const KIND: $crate::BackendKind = $kind;

            fn probe() -> $crate::base::probe::Probe {
                $crate::base::probe::Probe::not_compiled($kind)
            }
            fn synchronize(_: usize) -> $crate::Result<()> {
                not_compiled()
            }
            fn record_event(_: usize) -> $crate::Result<Option<$event>> {
                not_compiled()
            }
            fn seconds_between(start: &$event, _: &$event) -> $crate::Result<f64> {
                match *start {}
            }
            fn upload(_: usize, _: $crate::base::dtype::HostSlice<'_>) -> $crate::Result<$storage> {
                not_compiled()
            }
            fn full(
                _: usize,
                _: $crate::DType,
                _: usize,
                _: f64,
            ) -> $crate::Result<Option<$storage>> {
                not_compiled()
            }
            fn arange(
                _: usize,
                _: $crate::DType,
                _: f64,
                _: f64,
                _: usize,
            ) -> $crate::Result<Option<$storage>> {
                not_compiled()
            }
            fn random(
                _: usize,
                _: $crate::DType,
                _: usize,
                _: u64,
                _: $crate::backend::contract::Dist,
            ) -> $crate::Result<Option<$storage>> {
                not_compiled()
            }
        }

        impl $crate::backend::contract::BackendStorage for $storage {
            fn dtype(&self) -> $crate::DType {
                match *self {}
            }
            fn len(&self) -> usize {
                match *self {}
            }
            fn to_cpu(
                &self,
                _: &$crate::base::shape::Layout,
            ) -> $crate::Result<$crate::base::dtype::CpuStorage> {
                match *self {}
            }
            fn to_host(&self, _: &$crate::base::shape::Layout, _: &mut [u8]) -> $crate::Result<()> {
                match *self {}
            }
            fn copy_strided(&self, _: &$crate::base::shape::Layout) -> $crate::Result<Self> {
                match *self {}
            }
            fn to_dtype(
                &self,
                _: &$crate::base::shape::Layout,
                _: $crate::DType,
            ) -> $crate::Result<Self> {
                match *self {}
            }
            fn binary(
                &self,
                _: $crate::backend::ops::BinaryOp,
                _: &$crate::base::shape::Layout,
                _: &Self,
                _: &$crate::base::shape::Layout,
                _: &$crate::Shape,
            ) -> $crate::Result<Self> {
                match *self {}
            }
            fn unary(
                &self,
                _: $crate::backend::ops::UnaryOp,
                _: &$crate::base::shape::Layout,
            ) -> $crate::Result<Self> {
                match *self {}
            }
            fn reduce(
                &self,
                _: $crate::backend::ops::ReduceOp,
                _: &$crate::base::shape::Layout,
                _: Option<usize>,
                _: $crate::DType,
            ) -> $crate::Result<Self> {
                match *self {}
            }
            fn matmul(
                &self,
                _: &Self,
                _: &$crate::backend::ops::MatmulSpec,
            ) -> $crate::Result<Self> {
                match *self {}
            }
        }
    };
}

#[allow(unused_imports)]
pub(crate) use compiled_out;

/// A probe helper's answer that says only whether the backend is available (CUDA's, and a
/// backend's compiled out of this build).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Available {
    pub available: bool,
}
