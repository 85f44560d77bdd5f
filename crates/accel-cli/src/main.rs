//! `accel`: which accelerators this machine has, how fast they multiply matrices, and what
//! memory they hold. With no arguments it runs the seeds' walkthrough.

mod bench;
mod devices;
mod doctor;
mod mem;
mod monitor;
mod out;
mod plot;
mod serve;
mod walkthrough;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "accel",
    version,
    about = "Find, use and measure compute accelerators (CUDA, Apple GPU, XLA/TPU, CPU)"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// List every backend: its devices, or why it has none and how to fix it.
    Devices {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Why each backend works or not: a checklist per backend, each failure with its fix.
    /// Exits 1 when the best device does not work.
    Doctor {
        /// Machine-readable output (one object per check, stable keys).
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks, warmed up and synchronised.
    Bench {
        #[command(subcommand)]
        workload: bench::Workload,
    },
    /// Serve the machine's load as Prometheus metrics (dcgm-exporter's names for NVIDIA GPUs,
    /// accel_* for every device, the host and the backends), collected in the background.
    Serve {
        /// Address to listen on (dcgm-exporter's port by default; 0.0.0.0:9400 for a fleet).
        #[arg(long, default_value = "127.0.0.1:9400", value_name = "ADDR")]
        listen: String,
        /// Seconds between collections (above 0, at most 86400).
        #[arg(long, default_value = "5", value_name = "SECONDS", value_parser = parse_interval)]
        interval: f64,
    },
    /// Print a shell completion script (bash: `source <(accel completions bash)`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `accel man | man -l -`).
    Man,
    /// Host CPU and RAM, and what accel holds on each device.
    Mem {
        /// Machine-readable output (with --watch: one JSON document per line).
        #[arg(long)]
        json: bool,
        /// Report again every SECONDS (above 0, at most 86400), like `nvidia-smi -l` (until
        /// Ctrl-C, or --count).
        #[arg(long, value_name = "SECONDS", value_parser = parse_interval)]
        watch: Option<f64>,
        /// With --watch: stop after this many reports.
        #[arg(long, requires = "watch", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
    },
    /// A full-screen live view of the host's CPU and RAM and every device's load (q quits).
    Monitor {
        /// Seconds between samples (above 0, at most 86400).
        #[arg(long, value_name = "SECONDS", default_value = "1.0", value_parser = parse_interval)]
        interval: f64,
        /// Stop after this many samples.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// One JSON document per sample, one per line, instead of the full-screen view.
        #[arg(long)]
        json: bool,
    },
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86400.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a number of seconds above 0 and at most 86400 (a day)"
        )),
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => walkthrough::run(),
        Some(Command::Devices { json }) => devices::run(json),
        Some(Command::Doctor { json }) => doctor::run(json),
        Some(Command::Bench { workload }) => bench::run(workload),
        Some(Command::Mem { json, watch, count }) => mem::run(json, watch, count),
        Some(Command::Serve { listen, interval }) => serve::run(&listen, interval),
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command(), "accel", &mut out);
            out::text(&String::from_utf8_lossy(&out))
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(command()).render(&mut out)?;
            out::text(&String::from_utf8_lossy(&out))
        }
        Some(Command::Monitor {
            interval,
            count,
            json,
        }) => monitor::run(interval, count, json),
    }
}

/// The version line: the crate's version and the backends compiled into this build.
fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let backends: Vec<&str> = accel::BackendKind::ALL
            .iter()
            .filter(|b| b.is_compiled())
            .map(|b| b.name())
            .collect();
        format!(
            "{} (backends compiled in: {})",
            env!("CARGO_PKG_VERSION"),
            backends.join(", ")
        )
    })
}

/// The command line's definition, with the version line.
fn command() -> clap::Command {
    Cli::command().version(version())
}

fn main() -> ExitCode {
    // SAFETY: the first statement of main: no other thread exists yet to read the
    // environment while it changes.
    unsafe { accel::prepare_environment() };
    // A bug must still read as one line, not a panic message and a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        eprintln!("error: internal error in accel: {msg} (please report this)");
        std::process::exit(1);
    }));
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; usage errors exit 2.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
