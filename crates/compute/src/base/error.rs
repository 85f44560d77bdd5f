//! One error type for the whole library. Every message is lowercase, names the values that
//! explain it, and where there is something to do about it, says what.

use crate::base::ledger::human_bytes;
use crate::{BackendKind, DType, Device, Shape};

/// The result type of every fallible call in `accel`.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong, as a value. No user input makes `accel` panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- devices -------------------------------------------------------------------------
    /// A device name that does not parse.
    #[error("unknown device '{name}': {hint}")]
    UnknownDevice {
        /// What the user wrote.
        name: String,
        /// What would have been accepted.
        hint: String,
    },

    /// A device that parses but does not exist or cannot be used on this machine.
    #[error(
        "device {device} is not available: {reason} (available devices: {}){}",
        device_list(available),
        hint_suffix(hint)
    )]
    DeviceUnavailable {
        /// The device asked for.
        device: Device,
        /// Why it cannot be used.
        reason: String,
        /// What to do about it, if anything.
        hint: String,
        /// The devices that do exist (none listed when the device exists but failed).
        available: Vec<Device>,
    },

    /// A backend left out of this build by a cargo feature.
    #[error("the {backend} backend is not compiled into this build; rebuild with `--features {feature}`")]
    NotCompiled {
        /// Backend name (`cuda`, `xla`, `wgpu`).
        backend: &'static str,
        /// The cargo feature that enables it.
        feature: &'static str,
    },

    /// Two tensors of one op live on different devices.
    #[error("expected all tensors to be on the same device, but found {lhs} and {rhs} (in {op}); move one with .to_device(&{lhs}) or .to_device(&{rhs})")]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// Device of the first operand.
        lhs: Device,
        /// Device of the second operand.
        rhs: Device,
    },

    // ---- shapes and dtypes ---------------------------------------------------------------
    /// Shapes that the operation cannot combine.
    #[error("shape mismatch in {op}: {lhs} and {rhs}{}", hint_suffix(hint))]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// Shape of the first operand.
        lhs: Shape,
        /// Shape of the second operand.
        rhs: Shape,
        /// Which rule was broken.
        hint: String,
    },

    /// Two operands of different dtypes (accel does not promote silently).
    #[error("dtype mismatch in {op}: {lhs} and {rhs}; convert one side with .to_dtype(DType::{rhs_upper}) or .to_dtype(DType::{lhs_upper})", lhs_upper = lhs.variant_name(), rhs_upper = rhs.variant_name())]
    DTypeMismatch {
        /// The operation.
        op: &'static str,
        /// Dtype of the first operand.
        lhs: DType,
        /// Dtype of the second operand.
        rhs: DType,
    },

    /// An operation that does not exist for this dtype.
    #[error("{op} is not supported for dtype {dtype}{}", hint_suffix(hint))]
    UnsupportedDType {
        /// The operation.
        op: &'static str,
        /// The dtype given.
        dtype: DType,
        /// What to do instead.
        hint: String,
    },

    /// A dimension index out of range.
    #[error("dimension {dim} is out of range for a {rank}-d tensor (in {op}); valid dimensions are {valid}")]
    DimOutOfRange {
        /// The operation.
        op: &'static str,
        /// The dimension asked for.
        dim: isize,
        /// Rank of the tensor.
        rank: usize,
        /// The valid range, as text.
        valid: String,
    },

    /// Data that does not describe a tensor (ragged nested vectors, wrong element count...).
    #[error("invalid tensor data: {0}")]
    InvalidData(String),

    /// Any other bad argument.
    #[error("invalid argument to {op}: {msg}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        msg: String,
    },

    /// A shape too large for any memory: its size in bytes overflows what a pointer can
    /// address (as PyTorch's "storage size calculation overflowed").
    #[error("the shape {shape} of {dtype} in {op} is too large to exist: its size in bytes overflows what memory can address (at most 2^63 - 1 bytes); check the sizes")]
    SizeOverflow {
        /// The operation.
        op: &'static str,
        /// The shape asked for.
        shape: Shape,
        /// Its element type.
        dtype: DType,
    },

    // ---- resources -----------------------------------------------------------------------
    /// An allocation that the device cannot satisfy.
    #[error("out of memory on {device}: tried to allocate {requested} bytes ({}); {}this process holds {held} bytes on {device}{}", human_bytes(*requested), room.account(device), hint_suffix(hint))]
    OutOfMemory {
        /// The device.
        device: Device,
        /// Bytes asked for (`u64::MAX` when the size overflows: [`Room::Overflow`]).
        requested: u64,
        /// How much room there was, as far as it is known.
        room: Room,
        /// Bytes this process holds on the device.
        held: u64,
        /// What to try.
        hint: String,
    },

    /// A call into a driver or runtime library failed (the CUDA driver, cuBLAS, a PJRT
    /// plugin, wgpu). `source` is the library's own error, kept for `Error::source()`.
    #[error("{context}: {source}")]
    Backend {
        /// The backend whose library failed.
        backend: BackendKind,
        /// What accel was doing, with the device.
        context: String,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// A broken invariant inside accel, not the caller's doing: the message asks for a report.
    #[error("internal error: {what}; please report this")]
    Internal {
        /// What was found broken, with the values that show it.
        what: String,
    },

    /// A wait on a device that did not end in time.
    #[error("{what} did not finish within {seconds} s")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        seconds: u64,
    },

    /// The host's own facts (its CPU, its memory) could not be read.
    #[error(transparent)]
    Host(#[from] accelkit_core::system::SystemError),

    /// An I/O or operating-system error while probing.
    #[error("{context}: {source}")]
    Io {
        /// What accel was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

fn device_list(devices: &[Device]) -> String {
    let names: Vec<String> = devices.iter().map(Device::to_string).collect();
    names.join(", ")
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    }
}

/// How much room there was when an allocation failed ([`Error::OutOfMemory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Room {
    /// The device's driver says this many bytes are free of its total.
    Free {
        /// Bytes free.
        free: u64,
        /// The device's memory, in bytes.
        total: u64,
    },
    /// Host RAM: bytes available of the total.
    Ram {
        /// Bytes available.
        available: u64,
        /// The host's RAM, in bytes.
        total: u64,
    },
    /// The device does not report its free memory; the host, which stages the data on its
    /// way there, has this many bytes available.
    Staging {
        /// Host bytes available.
        available: u64,
    },
    /// The adapter binds at most this many bytes per buffer (wgpu).
    BufferLimit {
        /// Bytes one buffer may hold.
        max: u64,
    },
    /// The size in bytes overflows 64 bits.
    Overflow,
    /// Nothing is known of the room there was.
    Unknown,
}

impl Room {
    /// The room in words, ending in "; " (empty when nothing is known), as the error says it.
    fn account(&self, device: &Device) -> String {
        match *self {
            Room::Free { free, total } => format!(
                "{} free of {} total on {device}; ",
                human_bytes(free),
                human_bytes(total)
            ),
            Room::Ram { available, total } => format!(
                "{} available of {} total RAM; ",
                human_bytes(available),
                human_bytes(total)
            ),
            Room::Staging { available } => format!(
                "{device} does not report its free memory, and the host, which stages the data, has {} available; ",
                human_bytes(available)
            ),
            Room::BufferLimit { max } => {
                format!("the adapter binds at most {} per buffer; ", human_bytes(max))
            }
            Room::Overflow => "the size overflows 64 bits; ".to_string(),
            Room::Unknown => String::new(),
        }
    }
}

impl Error {
    /// The one constructor of [`Error::OutOfMemory`]: what was asked, the room there was, what
    /// this process holds on the device (its live tensors), and what to try.
    pub(crate) fn out_of_memory(
        device: Device,
        requested: u64,
        room: Room,
        hint: impl Into<String>,
    ) -> Self {
        Error::OutOfMemory {
            device,
            requested,
            room,
            held: crate::base::ledger::allocated(device),
            hint: hint.into(),
        }
    }

    /// A failed library call of `backend`, keeping the library's error as the source.
    #[cfg_attr(
        not(any(feature = "cuda", feature = "xla", feature = "wgpu")),
        allow(dead_code)
    )]
    pub(crate) fn backend(
        backend: BackendKind,
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Backend {
            backend,
            context: context.into(),
            source: source.into(),
        }
    }

    /// A broken invariant: [`Error::Internal`].
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Error::Internal { what: what.into() }
    }

    pub(crate) fn invalid(op: &'static str, msg: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            msg: msg.into(),
        }
    }

    pub(crate) fn shape(
        op: &'static str,
        lhs: &Shape,
        rhs: &Shape,
        hint: impl Into<String>,
    ) -> Self {
        Error::ShapeMismatch {
            op,
            lhs: lhs.clone(),
            rhs: rhs.clone(),
            hint: hint.into(),
        }
    }

    pub(crate) fn unsupported(op: &'static str, dtype: DType, hint: impl Into<String>) -> Self {
        Error::UnsupportedDType {
            op,
            dtype,
            hint: hint.into(),
        }
    }
}
