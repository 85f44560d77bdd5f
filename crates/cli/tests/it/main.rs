//! The `accel` command's integration tests: the built binary, run as a user runs it.
//! One test binary per crate (a module per former file), so the test command links each
//! crate's tests once.

mod cli;
mod cli_random;
mod completions;
mod doctor;
mod doctor_corpus;
mod fleet;
mod hostile;
mod monitor;
mod peers;
mod probe_helper;
mod schemas;
mod serve;
mod serve_common;
mod serve_load;
mod walkthrough;
mod webconfig_toolkit;
mod workloads;
