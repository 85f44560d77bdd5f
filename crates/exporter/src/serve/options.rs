//! What `accel serve` is told on its command line: the exporter's options, the workload labels
//! of `--collector.process.labels` and the address `--listen` names.

use std::net::SocketAddr;
use std::time::Duration;

use accelkit_core::units::parse_seconds;
use accelkit_telemetry::Roots;

/// The exporter's options beyond where to listen.
pub(crate) struct Options {
    /// Seconds between collections.
    pub interval: f64,
    /// Where telemetry reads.
    pub roots: Roots,
    /// Prometheus's web configuration file (TLS, basic auth).
    pub web_config: Option<std::path::PathBuf>,
    /// Requests served at once.
    pub max_requests: usize,
    /// Host names a request's Host header may name (empty: any).
    pub allowed_hosts: Vec<String>,
    /// Time for a request's head to arrive (default 10 s).
    pub header_timeout: Option<Duration>,
    /// Time a keep-alive connection may sit silent between requests (default 2 min).
    pub idle_timeout: Option<Duration>,
    /// Open connections at once (default: below the descriptor limit).
    pub max_connections: Option<usize>,
    /// Workload labels on the per-process series (`--collector.process.labels`).
    pub process_labels: Vec<ProcessLabel>,
}

/// `accel serve`'s command line (node_exporter's and exporter-toolkit's flag names), for the
/// command to flatten into its parser, as exporter-toolkit's `kingpinflag` adds the web flags
/// to an exporter's: each flag, its help and its check beside what it sets.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Address to listen on (dcgm-exporter's port by default; 0.0.0.0:9400 for a fleet).
    /// `:9400` listens on every interface, as node_exporter's `--web.listen-address`.
    #[arg(long, default_value = "127.0.0.1:9400", value_name = "ADDR", value_parser = listen_flag)]
    listen: String,
    /// Seconds between collections (above 0, at most 86400).
    #[arg(long, default_value = "5", value_name = "SECONDS", value_parser = parse_seconds)]
    interval: f64,
    /// Prometheus's web configuration file, as node_exporter reads it: TLS
    /// (tls_server_config), basic authentication (basic_auth_users, bcrypt hashes),
    /// response headers, a rate limit; loaded again when it or a certificate changes, and
    /// on SIGHUP.
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config: Option<std::path::PathBuf>,
    /// Requests served at once; more are answered 503 (node_exporter's default, 40). Live
    /// pages' `/events` streams are counted apart: at most half of N (at least one) open
    /// at once, each ended when its client stops reading
    #[arg(long = "web.max-requests", value_name = "N", default_value = "40", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_requests: u64,
    /// Answer only requests whose Host header names one of these (names or addresses,
    /// without the port, separated by ','); others get 421. A web page on this machine
    /// then cannot read `/` or `/snapshot` through DNS rebinding. Default: any host
    #[arg(
        long = "web.allowed-hosts",
        value_name = "HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// Seconds a request's head may take to arrive, from its first byte (a client slower
    /// than that is disconnected).
    #[arg(long = "web.header-timeout", value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    header_timeout: f64,
    /// Seconds a keep-alive connection may sit silent between requests before it is
    /// closed (Prometheus scrapes again well within the default).
    #[arg(long = "web.idle-timeout", value_name = "SECONDS", default_value = "120", value_parser = parse_seconds)]
    idle_timeout: f64,
    /// Open connections at once; at the cap the oldest connection not in a request is
    /// closed for a new one (default: the descriptor limit less a reserve of 64).
    #[arg(long = "web.max-connections", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: Option<u64>,
    /// Labels naming each process's workload on the per-process series, and an
    /// accel_device_workload_info series per device and workload: from the processes'
    /// cgroups container_id, pod_uid, qos_class, hpc_job (Slurm's job and step), unit
    /// (systemd's); from the kubelet's pod-resources API namespace, pod, container (a
    /// process's when one container holds its device), which also add one
    /// accel_device_owner_info series per device and container holding it and the
    /// kubelet's three collector series (only then is the kubelet asked). Off by
    /// default: each distinct value is a new series (with hpc_job, every job leaves its
    /// own series behind until they go stale), so on a shared machine the series count
    /// grows with the number of workloads run: per device, one info series per workload
    /// and owner, and each process series once per workload it ran in.
    #[arg(long = "collector.process.labels", value_name = "LABELS", value_delimiter = ',', value_parser = parse_process_label)]
    process_labels: Vec<ProcessLabel>,
}

impl Args {
    /// Where to listen, and the options these flags set, reading telemetry under `roots`.
    pub(crate) fn split(self, roots: Roots) -> (String, Options) {
        let o = Options {
            interval: self.interval,
            roots,
            web_config: self.web_config,
            max_requests: self.max_requests as usize,
            allowed_hosts: self.allowed_hosts,
            header_timeout: Some(Duration::from_secs_f64(self.header_timeout)),
            idle_timeout: Some(Duration::from_secs_f64(self.idle_timeout)),
            max_connections: self.max_connections.map(|n| n as usize),
            process_labels: self.process_labels,
        };
        (self.listen, o)
    }
}

/// `--listen`: checked as clap parses it, so a malformed address is a usage error (exit 2);
/// kept as written.
fn listen_flag(s: &str) -> Result<String, String> {
    parse_listen(s).map(|_| s.to_string())
}

/// A workload label of `--collector.process.labels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessLabel {
    /// The Kubernetes namespace of the process's pod.
    Namespace,
    /// The pod's name.
    Pod,
    /// The container's name.
    Container,
    /// The container runtime's id of the container.
    ContainerId,
    /// The pod's UID.
    PodUid,
    /// The pod's QoS class (Guaranteed, Burstable, BestEffort).
    QosClass,
    /// The Slurm job and step.
    HpcJob,
    /// The systemd unit.
    Unit,
}

impl ProcessLabel {
    const ALL: [(&'static str, ProcessLabel); 8] = [
        ("namespace", ProcessLabel::Namespace),
        ("pod", ProcessLabel::Pod),
        ("container", ProcessLabel::Container),
        ("container_id", ProcessLabel::ContainerId),
        ("pod_uid", ProcessLabel::PodUid),
        ("qos_class", ProcessLabel::QosClass),
        ("hpc_job", ProcessLabel::HpcJob),
        ("unit", ProcessLabel::Unit),
    ];

    /// Whether the label is a name the kubelet gives (and so also labels the owner series).
    pub(super) fn named_by_kubelet(self) -> bool {
        matches!(
            self,
            ProcessLabel::Namespace | ProcessLabel::Pod | ProcessLabel::Container
        )
    }

    pub(super) fn name(self) -> &'static str {
        ProcessLabel::ALL
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("", |(n, _)| n)
    }

    /// This label's value for a workload (empty when its cgroup does not say).
    pub(super) fn value(self, w: Option<&accelkit_telemetry::Workload>) -> String {
        let Some(w) = w else {
            return String::new();
        };
        match self {
            ProcessLabel::Namespace => w.namespace.clone().unwrap_or_default(),
            ProcessLabel::Pod => w.pod.clone().unwrap_or_default(),
            ProcessLabel::Container => w.container.clone().unwrap_or_default(),
            ProcessLabel::ContainerId => w.container_id.clone().unwrap_or_default(),
            ProcessLabel::PodUid => w.pod_uid.clone().unwrap_or_default(),
            ProcessLabel::QosClass => w.qos_class.clone().unwrap_or_default(),
            ProcessLabel::HpcJob => match (w.slurm_job, &w.slurm_step) {
                (Some(j), Some(s)) => format!("{j}.{s}"),
                (Some(j), None) => j.to_string(),
                _ => String::new(),
            },
            ProcessLabel::Unit => w.unit.clone().unwrap_or_default(),
        }
    }
}

/// One name of `--collector.process.labels`.
pub(crate) fn parse_process_label(s: &str) -> Result<ProcessLabel, String> {
    if let Some((_, l)) = ProcessLabel::ALL.iter().find(|(n, _)| *n == s.trim()) {
        return Ok(*l);
    }
    let names: Vec<&str> = ProcessLabel::ALL.iter().map(|(n, _)| *n).collect();
    let why = match s.trim() {
        "job" => "'job' is named hpc_job (dcgm-exporter's name)".to_string(),
        _ => format!("'{s}' is not a process label"),
    };
    Err(format!("{why}; the labels are {}", names.join(", ")))
}

/// The address `--listen` names: `HOST:PORT`, `[V6]:PORT`, or node_exporter's `:PORT` for
/// every interface (IPv6 and IPv4 where the host has IPv6).
pub(crate) fn parse_listen(listen: &str) -> Result<Vec<SocketAddr>, String> {
    let bad = || {
        format!(
            "'{listen}' is not an address to listen on (such as 127.0.0.1:9400, 0.0.0.0:9400, [::]:9400 or :9400 for every interface)"
        )
    };
    if let Some(port) = listen.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| bad())?;
        return Ok(vec![
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
        ]);
    }
    listen
        .parse::<SocketAddr>()
        .map(|a| vec![a])
        .map_err(|_| bad())
}

/// A listener on the first of `addrs` that can be bound (`:PORT` gives [::], which takes IPv4
/// too on a dual-stack host, then 0.0.0.0), or why none could.
pub fn bind(addrs: &[SocketAddr]) -> anyhow::Result<std::net::TcpListener> {
    let mut tried = Vec::new();
    addrs
        .iter()
        .find_map(|a| {
            std::net::TcpListener::bind(a)
                .map_err(|e| tried.push(format!("{a}: {e}")))
                .ok()
        })
        .ok_or_else(|| anyhow::anyhow!("cannot listen on {}", tried.join("; ")))
}
