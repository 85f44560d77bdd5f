//! # accelkit-exporter
//!
//! The monitoring server behind `accel serve` and the fleet behind `accel monitor --hosts`:
//! Prometheus metrics, the `/snapshot` document and live pages over HTTP(S), with Prometheus'
//! web configuration (TLS, client certificates, basic auth with bcrypt), connection limits and
//! workload labels ([`serve`]); and many machines polled or read from Prometheus as one round
//! ([`fleet`]). Everything it reports comes from `accelkit::load` (monitoring interfaces only,
//! no compute context). [`input`] and [`out`] are the bounded file reads and the terminal-safe
//! output and JSON envelope it shares with the `accel` command.
//!
//! A crate of its own so that the command's compute side and its server side are separate
//! products; the `accel` binary (`accelkit-cli`) parses the arguments and calls in.
#![warn(missing_docs)]

pub mod fleet;
pub mod input;
pub mod out;
pub mod serve;
pub mod term;
