//! Why a reading or a choice of device failed: one enum for every reader and for [`crate::pick()`],
//! each variant with the values that explain it and, where there is one, what to do
//! ([`Error::hint`]). Its text is what `accel` prints and what `/metrics` and `--json` carry as a
//! collector's `error`.

use std::fmt;
use std::time::Duration;

use super::vendor::Vendor;

/// Why telemetry could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The vendor's monitoring library is not on this machine (`libnvidia-ml.so.1`: no NVIDIA
    /// driver is installed).
    NotInstalled {
        /// The library's file name.
        library: &'static str,
        /// Whose driver brings it ("NVIDIA").
        driver: &'static str,
    },
    /// The library is there but would not start: the driver is not loaded, its version does
    /// not match the library's, or its start hung or crashed in the probe child.
    NotStarted {
        /// The library, with the file tried where there was one (`NVML (/usr/lib/...)`).
        library: String,
        /// What it said.
        detail: String,
    },
    /// A call into a started monitoring interface failed.
    Query {
        /// The interface (`NVML`, `IOKit`, `sysfs`).
        interface: &'static str,
        /// Which call, and what it said.
        detail: String,
    },
    /// A GPU was asked for by identity and none was given.
    NoIdentity,
    /// The monitoring interface knows no GPU of that UUID or PCI address.
    UnknownDevice {
        /// What the interface said.
        detail: String,
    },
    /// This build has no such reader.
    NotCompiled {
        /// The cargo feature that adds it.
        feature: &'static str,
    },
    /// A reader did not answer within the sample's deadline (a hung driver or sysfs file).
    Timeout {
        /// The deadline it missed.
        deadline: Duration,
    },
    /// A reader is still in a read asked in an earlier sample (a read that blocks in the
    /// kernel cannot be cancelled): this sample does not wait for it again.
    Stuck {
        /// How long ago that read was asked.
        since: Duration,
    },
    /// A reader's thread ended (it panicked): its vendor stays unread.
    ReaderStopped,
    /// [`crate::pick()`]: this machine has no GPU of the vendor asked for.
    NoDevice {
        /// The vendor asked for.
        vendor: Vendor,
    },
    /// [`crate::pick()`]: zero devices were asked for.
    ZeroCount,
    /// [`crate::pick()`]: fewer devices meet the criteria than were asked for.
    TooFew {
        /// The vendor asked for.
        vendor: Vendor,
        /// How many were asked for.
        asked: usize,
        /// How many meet the criteria.
        matched: usize,
        /// Why each other device was refused ("GPU 1: 2.00 GiB free, 8.00 GiB asked").
        refusals: Vec<String>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotInstalled { library, driver } => {
                write!(f, "{library} not found: no {driver} driver is installed")
            }
            Error::NotStarted { library, detail } => {
                write!(f, "{library} failed to start: {detail}")
            }
            Error::Query { interface, detail } => write!(f, "{interface} {detail}"),
            Error::NoIdentity => f.write_str("no GPU identity to look up"),
            Error::UnknownDevice { detail } => write!(f, "NVML does not know this GPU: {detail}"),
            Error::NotCompiled { feature } => {
                write!(f, "accel was built without the `{feature}` feature")
            }
            Error::Timeout { deadline } => write!(
                f,
                "timed out: no answer within {:.1} s",
                deadline.as_secs_f64()
            ),
            Error::Stuck { since } => write!(
                f,
                "timed out: its read asked {:.0} s ago has not returned",
                since.as_secs_f64()
            ),
            Error::ReaderStopped => f.write_str("the reader stopped"),
            Error::NoDevice { vendor } => write!(f, "no {vendor} GPU on this machine"),
            Error::ZeroCount => f.write_str("asked for 0 devices: --count must be at least 1"),
            Error::TooFew {
                vendor,
                asked,
                matched,
                refusals,
            } => {
                let es = if *matched == 1 { "es" } else { "" };
                write!(f, "asked for {asked} {vendor} GPU(s), {matched} match{es}")?;
                if !refusals.is_empty() {
                    write!(f, ": {}", refusals.join("; "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// What to do about it, where that is known.
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            Error::NotInstalled { .. } => {
                "install the NVIDIA driver (nvidia-smi works once it is); in a container, start \
                 it with the NVIDIA Container Toolkit (`--gpus all`)"
            }
            Error::NotStarted { .. } => {
                "run nvidia-smi: when it fails too, the kernel module is not loaded or does not \
                 match the library (reboot after a driver upgrade); `accel doctor` checks each step"
            }
            Error::Timeout { .. } | Error::Stuck { .. } => {
                "a driver or a sysfs file is not answering: `accel doctor` names the step; the \
                 other vendors' readings go on without it"
            }
            Error::NotCompiled { .. } => "build accel with its default features",
            Error::NoDevice { .. } => "`accel devices` lists what this machine has",
            Error::TooFew { .. } => {
                "ask for less free memory or a higher utilisation limit (`accel pick --min-free`, \
                 `--max-util`), for fewer GPUs, or wait until one is freed"
            }
            Error::ZeroCount => "ask for at least one (--count 1)",
            Error::Query { .. }
            | Error::NoIdentity
            | Error::UnknownDevice { .. }
            | Error::ReaderStopped => return None,
        })
    }
}
