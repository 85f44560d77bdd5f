//! `accel`: which accelerators this machine has, how fast they multiply matrices, and what
//! memory they hold. With no arguments it runs the seeds' walkthrough.

mod bench;
mod devices;
mod doctor;
mod energy;
mod mem;
mod monitor;
mod out;
mod pick;
mod plot;
mod walkthrough;

use accelkit_core::units::parse_seconds;
use accelkit_exporter::{fleet, serve};

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "accel",
    version,
    about = "Find, use and measure compute accelerators (CUDA, Apple GPU, XLA/TPU, CPU)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// The walkthrough (no command) on this device instead of the best one: `cuda:1`,
    /// `xla:0`, `wgpu:0` (a software adapter too), `mps`
    #[arg(long, value_name = "DEVICE", value_parser = bench::parse_device)]
    device: Option<accelkit::Device>,
    /// The walkthrough's matrix size N (N x N by N x N, f32)
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = bench::parse_matrix_size)]
    size: usize,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// List every backend: its devices, or why it has none and how to fix it.
    Devices {
        /// Machine-readable output.
        #[arg(long, conflicts_with = "html")]
        json: bool,
        /// A self-contained HTML table (no scripts, nothing from the network), as a notebook
        /// shows `accel.probes()`.
        #[arg(long)]
        html: bool,
    },
    /// Why each backend works or not: per backend a verdict naming the root cause and its
    /// fix first, then the checklist. Exits 1 when any check fails (WARN and SKIP do not) or
    /// the best device does not work.
    Doctor {
        /// Machine-readable output (one object per check, stable keys, a cause id for each
        /// failure).
        #[arg(long, conflicts_with = "html")]
        json: bool,
        /// The checklist as self-contained HTML (no scripts, nothing from the network), as a
        /// notebook shows `accel.doctor()`.
        #[arg(long)]
        html: bool,
        /// The root file system the doctor reads (`/dev`, `/etc`, `/lib/modules`, `/tmp`,
        /// `/var/log`, `/.dockerenv`): another machine's, mounted, or a test's tree
        #[arg(long = "path.rootfs", value_name = "DIR", default_value = "/")]
        rootfs: std::path::PathBuf,
        /// Where sysfs is mounted (default: `<rootfs>/sys`)
        #[arg(long = "path.sysfs", value_name = "DIR")]
        sysfs: Option<std::path::PathBuf>,
        /// Where procfs is mounted (default: `<rootfs>/proc`)
        #[arg(long = "path.procfs", value_name = "DIR")]
        procfs: Option<std::path::PathBuf>,
    },
    /// Benchmarks, warmed up and synchronised.
    Bench {
        #[command(subcommand)]
        workload: bench::Workload,
    },
    /// Serve the machine's load as Prometheus metrics (dcgm-exporter's names for NVIDIA GPUs,
    /// accel_* for every device, the host and the backends), collected in the background.
    Serve {
        #[command(flatten)]
        args: serve::Args,
        #[command(flatten)]
        roots: RootArgs,
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
        #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
        watch: Option<f64>,
        /// With --watch: stop after this many reports.
        #[arg(long, requires = "watch", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// With --watch: after each report, the energy each device and the host used since
        /// the first (energy counters, else power integrated over time; the host's from RAPL).
        #[arg(long, requires = "watch", conflicts_with = "json")]
        energy: bool,
        /// Without --watch: seconds the CPU use is measured over (with --watch, it is measured
        /// over each interval).
        #[arg(long, value_name = "SECONDS", default_value = "0.5", value_parser = parse_seconds)]
        interval: f64,
        #[command(flatten)]
        roots: RootArgs,
    },
    /// Pick the least-loaded GPUs for a job (GPUtil's getAvailable): prints a
    /// CUDA_VISIBLE_DEVICES value of UUIDs; exit 1 with the reason when too few match.
    Pick {
        /// Only GPUs with at least this much free memory (e.g. 8GiB, 500MB, 1e9).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        min_free: Option<u64>,
        /// Only GPUs at most this busy, percent (0 to 100).
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
        max_util: Option<f64>,
        /// How many GPUs the job needs.
        #[arg(long, default_value = "1", value_parser = clap::value_parser!(u64).range(1..=1024))]
        count: u64,
        /// NVML's indices (PCI order, as nvidia-smi numbers GPUs) instead of UUIDs; set
        /// CUDA_DEVICE_ORDER=PCI_BUS_ID beside them, or CUDA may number them otherwise.
        #[arg(long)]
        index: bool,
        /// The picked GPUs as JSON (their readings), not a CUDA_VISIBLE_DEVICES value.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        roots: RootArgs,
    },
    /// A full-screen live view of the host's CPU and RAM and every device's load (q quits).
    Monitor {
        /// Seconds between samples (above 0, at most 86400).
        #[arg(long, value_name = "SECONDS", default_value = "1.0", value_parser = parse_seconds)]
        interval: f64,
        /// Stop after this many samples.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// One JSON document per sample, one per line, instead of the full-screen view.
        #[arg(long, conflicts_with = "html")]
        json: bool,
        /// One self-contained HTML page of the last sample, with lines of every sample
        /// (--count of them, 1 by default) for the host and each device (in a fleet view:
        /// each machine and its devices).
        #[arg(long)]
        html: bool,
        /// Serve the fleet view as a live page at ADDR (`/`, updated from `/events`; the
        /// round as JSON at `/snapshot`; `/healthz`) instead of showing it here; one
        /// machine's live page is `accel serve`'s.
        #[arg(long, value_name = "ADDR", conflicts_with_all = ["json", "html", "count"])]
        serve: Option<String>,
        /// The web configuration for --serve, as `accel serve --web.config.file` reads it
        /// (TLS, basic auth, headers, a rate limit).
        #[arg(long = "web.config.file", value_name = "FILE", requires = "serve")]
        web_config: Option<std::path::PathBuf>,
        #[command(flatten)]
        fleet: fleet::Options,
        #[command(flatten)]
        roots: RootArgs,
    },
}

/// Where telemetry reads (node_exporter's flags): the host's `/sys` and `/proc` mounted
/// elsewhere in a container, or fixture trees in tests; and the TPU runtime's metrics service.
#[derive(clap::Args, Clone)]
struct RootArgs {
    /// Where sysfs is mounted (GPUs under class/drm, TPUs under bus/pci)
    #[arg(long = "path.sysfs", value_name = "DIR", default_value = "/sys")]
    sysfs: std::path::PathBuf,
    /// Where procfs is mounted (host CPU and RAM, processes' GPU use from fdinfo)
    #[arg(long = "path.procfs", value_name = "DIR", default_value = "/proc")]
    procfs: std::path::PathBuf,
    /// The TPU runtime's gRPC metrics service (answers while a TPU job runs)
    #[arg(
        long = "tpu.metrics-address",
        value_name = "HOST:PORT",
        default_value = "localhost:8431",
        value_parser = parse_host_port
    )]
    tpu_metrics: String,
    /// The kubelet's pod-resources API (which pods hold which devices; asked where the socket
    /// exists)
    #[arg(
        long = "kubelet.pod-resources-socket",
        value_name = "PATH",
        default_value = accelkit_telemetry::DEFAULT_POD_RESOURCES_SOCKET
    )]
    pod_resources: std::path::PathBuf,
}

impl RootArgs {
    fn roots(self) -> accelkit_telemetry::Roots {
        accelkit_telemetry::Roots {
            sysfs: self.sysfs,
            procfs: self.procfs,
            tpu_metrics: self.tpu_metrics,
            pod_resources: self.pod_resources,
        }
    }
}

/// A size: bytes, or with a unit (`8GiB`, `8G`, `500MB`, `500MiB`, `1.5TB`, `1e9`). K/M/G/T
/// alone are binary units, as nvidia-smi and GPUtil count memory.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "'{s}' is not a size: use bytes or a unit such as 8GiB, 500MB"
            ))
        }
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * mult < 1.8e19 => Ok((v * mult) as u64),
        _ => Err(format!(
            "'{s}' is not a size: use bytes or a unit such as 8GiB, 500MB"
        )),
    }
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a percentage from 0 to 100")),
    }
}

/// `HOST:PORT` (a name or an address; `[V6]:PORT`): a usage error otherwise.
fn parse_host_port(s: &str) -> Result<String, String> {
    let bad = || format!("'{s}' is not HOST:PORT (such as localhost:8431 or 10.0.0.2:8431)");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            }));
    match port.parse::<u16>() {
        Ok(p) if p > 0 && host_ok => Ok(s.to_string()),
        _ => Err(bad()),
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => walkthrough::run(cli.device, cli.size),
        Some(Command::Devices { json, html }) => devices::run(json, html),
        Some(Command::Doctor {
            json,
            html,
            rootfs,
            sysfs,
            procfs,
        }) => doctor::run(
            json,
            html,
            &accelkit::doctor::Roots {
                sysfs: sysfs.unwrap_or_else(|| rootfs.join("sys")),
                procfs: procfs.unwrap_or_else(|| rootfs.join("proc")),
                rootfs,
            },
        ),
        Some(Command::Bench { workload }) => bench::run(workload),
        Some(Command::Mem {
            json,
            watch,
            count,
            energy,
            interval,
            roots,
        }) => mem::run(json, watch, count, energy, interval, roots.roots()),
        Some(Command::Serve { args, roots }) => serve::run(args, roots.roots()),
        Some(Command::Pick {
            min_free,
            max_util,
            count,
            index,
            json,
            roots,
        }) => pick::run(
            accelkit_telemetry::Criteria {
                min_free_bytes: min_free,
                max_util_percent: max_util,
                count: count as usize,
                ..Default::default()
            },
            index,
            json,
            roots.roots(),
        ),
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
            html,
            serve,
            web_config,
            fleet,
            roots,
        }) => {
            if let Some(addr) = serve {
                if !fleet.is_fleet() {
                    anyhow::bail!("--serve serves the fleet view (--hosts, --hostfile or --prometheus); one machine's live page is accel serve's /");
                }
                fleet::page::serve(&fleet, interval, &addr, web_config)
            } else if fleet.is_fleet() && html {
                fleet::page::print(&fleet, interval, count.unwrap_or(1))
            } else if fleet.is_fleet() {
                fleet::view::run(&fleet, interval, count, json)
            } else {
                monitor::run(interval, count, json, html, roots.roots())
            }
        }
    }
}

/// The version line: the crate's version and the backends compiled into this build.
fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let backends: Vec<&str> = accelkit::BackendKind::ALL
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
    unsafe { accelkit::prepare_environment() };
    // `accel __probe-helper <task>`: this program run as its own probe helper (a child that
    // tries a driver's or plugin's start and is killed if it hangs).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "__probe-helper") {
        let task = args.get(1).map(|t| t.to_string_lossy().into_owned());
        accelkit::probe_helper_main(&task.unwrap_or_default(), args.get(2..).unwrap_or_default());
    }
    if let Ok(me) = std::env::current_exe() {
        accelkit::enable_probe_helper(me);
    }
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
            // A help text that cannot be written (`accel --help > /dev/full`) is a failure; a
            // reader that went away (`| head`) is not.
            let code = if e.use_stderr() { 2 } else { 0 };
            return match e.print() {
                Err(w) if w.kind() != std::io::ErrorKind::BrokenPipe => ExitCode::from(1),
                _ => ExitCode::from(code),
            };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the message with its context chain on one line ("file: section: cause").
            // The chain can carry text from outside (a remote host's answer, a file's name).
            eprintln!("error: {}", out::printable_lines(&format!("{e:#}")));
            ExitCode::from(1)
        }
    }
}
