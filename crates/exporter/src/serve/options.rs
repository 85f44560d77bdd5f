//! What `accel serve` is told on its command line: the exporter's options, the workload labels
//! of `--collector.process.labels` and the address `--listen` names.

use std::net::SocketAddr;
use std::time::Duration;

use accelkit_telemetry::Roots;

/// The exporter's options beyond where to listen.
pub struct Options {
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

/// A workload label of `--collector.process.labels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessLabel {
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
pub fn parse_process_label(s: &str) -> Result<ProcessLabel, String> {
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
pub fn parse_listen(listen: &str) -> Result<Vec<SocketAddr>, String> {
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
