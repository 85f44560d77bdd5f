//! `accel serve`: the machine's load as Prometheus metrics, for a fleet (Prometheus scrapes
//! every machine; Grafana shows them). CUDA GPUs carry dcgm-exporter's names and labels
//! (`DCGM_FI_DEV_GPU_UTIL{gpu, UUID, device, modelName, Hostname}`, memory in MiB as it
//! reports it), so dashboards made for dcgm-exporter work unchanged; every device, the host
//! and the backends' availability also have `accel_*` series.
//!
//! A background thread samples every `--interval` and renders the exposition text once; a
//! scrape only copies the latest text, so it never waits on a slow probe or driver.

mod client_certs;
mod conns;
pub(crate) mod http;
pub(crate) mod live;
mod options;
mod series;
mod tls;
pub(crate) mod webconfig;

use std::collections::BTreeMap;

use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use accelkit::load::{Sampler, Snapshot};
use accelkit_telemetry::Vendor;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub(crate) use options::bind;
pub use options::Args;
pub(crate) use options::{parse_listen, ProcessLabel};

type Labels = Vec<(String, String)>;
type FloatFamily = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;

/// Families registered under `name` on first use.
struct Metrics<'a> {
    registry: &'a mut Registry,
    families: Vec<(String, FloatFamily)>,
}

impl Metrics<'_> {
    fn set(&mut self, name: &str, help: &str, labels: &[(&str, String)], v: f64) {
        let fam = match self.families.iter().find(|(n, _)| n == name) {
            Some((_, f)) => f.clone(),
            None => {
                let f = FloatFamily::default();
                self.registry.register(name, help, f.clone());
                self.families.push((name.to_string(), f.clone()));
                f
            }
        };
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), escape_label(v)))
            .collect();
        fam.get_or_create(&labels).set(v);
    }
}

/// A label value as the exposition formats require it: `\`, `"` and line feeds escaped.
/// prometheus-client writes values as given, and values here come from outside (a process
/// can name itself `a"b`, a driver's error text can hold a newline): one unescaped quote would
/// make Prometheus reject the whole scrape.
pub(crate) fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Prometheus label values: `""` for an unknown value.
fn or_empty(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

/// Backend availability as telemetry sees it: the hardware and driver each backend would use,
/// found through monitoring interfaces (NVML, sysfs, IOKit), without loading any compute
/// library. `xla` counts TPU chips only (XLA's GPU and CPU plugins are not looked for).
fn backend_availability(s: &Snapshot) -> Vec<(&'static str, bool, String)> {
    let up = |v: Vendor| {
        s.devices
            .iter()
            .filter(|d| d.reading.vendor == v && d.reading.up && d.reading.mig_parent.is_none())
            .count()
    };
    let why = |v: Vendor, what: &str| -> String {
        let c = s.collectors.iter().find(|c| c.collector == v.name());
        match c {
            Some(c) if !c.success => format!(
                "{} reader failed: {}",
                v,
                c.error.clone().unwrap_or_default()
            ),
            Some(c) => c.note.clone().unwrap_or_else(|| format!("no {what} found")),
            None => format!("no {what} reader on this platform"),
        }
    };
    let one = |v: Vendor, what: &str| -> (bool, String) {
        match up(v) {
            0 => (false, why(v, what)),
            n => (true, format!("{n} {what}(s)")),
        }
    };
    let (cuda, cuda_why) = one(Vendor::Nvidia, "NVIDIA GPU");
    let (mps, mps_why) = one(Vendor::Apple, "Apple GPU");
    let (xla, xla_why) = one(Vendor::Tpu, "TPU chip");
    let gpus = up(Vendor::Nvidia) + up(Vendor::Amd) + up(Vendor::Intel) + up(Vendor::Apple);
    vec![
        ("cpu", true, "the host".to_string()),
        ("cuda", cuda, cuda_why),
        ("mps", mps, mps_why),
        ("xla", xla, xla_why),
        (
            "wgpu",
            gpus > 0,
            if gpus > 0 {
                format!("{gpus} GPU(s)")
            } else {
                "no GPU found".to_string()
            },
        ),
    ]
}

/// `/healthz`'s text: `ok`, or `degraded` with each failing reader and its reason (still
/// 200: the exporter works and says what it cannot see; 503 is for a stalled collection).
fn health_of(s: &Snapshot) -> String {
    let failing: Vec<String> = s
        .collectors
        .iter()
        .filter(|c| !c.success)
        .map(|c| {
            format!(
                "collector {} failed: {}",
                c.collector,
                c.error.clone().unwrap_or_default()
            )
        })
        .collect();
    if failing.is_empty() {
        "ok\n".to_string()
    } else {
        format!("degraded: {}\n", failing.join("; "))
    }
}

/// What the exporter knows beside one snapshot: how long the collection took, when each
/// collector last succeeded, and the requests refused for their credentials (when basic
/// authentication is on).
#[derive(Default)]
pub(crate) struct Context {
    /// Seconds the collection took.
    pub collect_seconds: f64,
    /// When each collector last answered in time.
    pub last_success: BTreeMap<&'static str, Instant>,
    /// The web config's counters and certificate, when a web config is given.
    pub web: Option<Arc<webconfig::WebStatus>>,
    /// Workload labels on the per-process series (`--collector.process.labels`).
    pub process_labels: Vec<ProcessLabel>,
    /// Collections published so far (the live page's streams send one event per collection).
    pub seq: u64,
    /// The last samples for the live page's lines, and who watches it.
    pub history: live::History,
    /// How many live pages are open (the page is rendered only while one is).
    pub watchers: live::Watchers,
}

impl Context {
    /// Notes which collectors succeeded in `s`.
    fn saw(&mut self, s: &Snapshot) {
        let now = Instant::now();
        for c in &s.collectors {
            if c.success {
                self.last_success.insert(c.collector, now);
            }
        }
    }
}

/// The exposition text of one snapshot.
pub(crate) fn render(s: &Snapshot, host: &str, cx: &Context) -> String {
    let mut registry = Registry::default();
    let mut m = Metrics {
        registry: &mut registry,
        families: Vec::new(),
    };
    dcgm_series(&mut m, s, host);
    device_series(&mut m, s, host, &cx.process_labels);
    collector_series(&mut m, s, host, cx);
    host_series(&mut m, s, host, cx.collect_seconds);
    if let Some(w) = &cx.web {
        web_series(&mut m, w, host);
        if w.auth_on.load(Ordering::Relaxed) {
            let c = Counter::<u64>::default();
            c.inc_by(w.auth_failures.load(Ordering::Relaxed));
            registry.register(
                "accel_http_auth_failures",
                "Requests refused for missing or wrong credentials (basic authentication)",
                c,
            );
        }
    }
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

/// dcgm-exporter's series (the `DCGM` table), for NVIDIA GPUs.
fn dcgm_series(m: &mut Metrics, s: &Snapshot, host: &str) {
    // dcgm-exporter's series, for NVIDIA GPUs that are up (whole GPUs; `gpu` is NVML's index,
    // as dcgm-exporter's is).
    for d in &s.devices {
        let r = &d.reading;
        if r.vendor != Vendor::Nvidia || !r.up || r.mig_parent.is_some() {
            continue;
        }
        let i = r.index;
        let l = [
            ("gpu", i.to_string()),
            ("UUID", or_empty(&r.uuid)),
            ("pci_bus_id", or_empty(&r.pci_bus_id)),
            ("device", format!("nvidia{i}")),
            ("modelName", r.name.clone()),
            ("Hostname", host.to_string()),
        ];
        for g in series::DCGM {
            if let Some(v) = (g.value)(r) {
                m.set(g.name, g.help, &l, v);
            }
        }
    }
}

/// accel's series of every device: up, info, what this process holds, the `DEVICE` table, ECC, throttling and processes.
fn device_series(m: &mut Metrics, s: &Snapshot, host: &str, labels: &[ProcessLabel]) {
    // accel's series, for every device of every vendor.
    for d in &s.devices {
        let r = &d.reading;
        let l = [
            ("device", r.id()),
            ("vendor", r.vendor.to_string()),
            ("name", r.name.clone()),
            ("uuid", or_empty(&r.uuid)),
            ("pci_bus_id", or_empty(&r.pci_bus_id)),
            ("mig_parent", or_empty(&r.mig_parent)),
            ("Hostname", host.to_string()),
        ];
        m.set(
            "accel_device_up",
            "1 while the device answers its monitoring interface; 0 once it is gone or its reader fails (the row stays)",
            &l,
            if r.up { 1.0 } else { 0.0 },
        );
        m.set(
            "accel_device_info",
            "1 for every device found; its driver, status and this process's name for it are labels",
            &[
                ("device", r.id()),
                ("vendor", r.vendor.to_string()),
                ("driver", or_empty(&r.driver)),
                ("status", or_empty(&r.status)),
                ("accel_device", d.accel_device.map(|a| a.to_string()).unwrap_or_default()),
                ("Hostname", host.to_string()),
            ],
            1.0,
        );
        m.set(
            "accel_device_accel_allocated_bytes",
            "Bytes this process's live tensors hold on the device",
            &l,
            d.accel_allocated_bytes as f64,
        );
        for g in series::DEVICE {
            if let Some(v) = (g.value)(r) {
                m.set(g.name, g.help, &l, v);
            }
        }
        for (kind, v) in [
            ("corrected", r.ecc_corrected_errors),
            ("uncorrected", r.ecc_uncorrected_errors),
        ] {
            if let Some(v) = v {
                m.set(
                    "accel_device_ecc_errors",
                    "Memory errors since the driver loaded (volatile ECC counters)",
                    &[
                        ("device", r.id()),
                        ("kind", kind.to_string()),
                        ("Hostname", host.to_string()),
                    ],
                    v as f64,
                );
            }
        }
        for (xid, n) in &r.xid_errors {
            m.set(
                "accel_device_xid_errors",
                "NVIDIA XID errors since the exporter started, by XID (NVML's events; 79: fallen off the bus)",
                &[
                    ("device", r.id()),
                    ("xid", xid.to_string()),
                    ("Hostname", host.to_string()),
                ],
                *n as f64,
            );
        }
        if let Some(xid) = r.last_xid {
            m.set(
                "accel_device_last_xid_info",
                "1, labelled with the last XID error the device reported since the exporter started",
                &[
                    ("device", r.id()),
                    ("xid", xid.to_string()),
                    ("Hostname", host.to_string()),
                ],
                1.0,
            );
        }
        for reason in &r.throttle_reasons {
            m.set(
                "accel_device_throttle_reason",
                "1 for each reason the clocks are held down now (NVML's clocks-event reasons)",
                &[
                    ("device", r.id()),
                    ("reason", reason.clone()),
                    ("Hostname", host.to_string()),
                ],
                1.0,
            );
        }
        let mut workloads = std::collections::BTreeSet::new();
        for p in &r.processes {
            let mut pl = vec![
                ("device", r.id()),
                ("pid", p.pid.to_string()),
                ("user", or_empty(&p.user)),
                ("command", or_empty(&p.command)),
                ("Hostname", host.to_string()),
            ];
            let wl: Vec<(&'static str, String)> = labels
                .iter()
                .map(|l| (l.name(), l.value(p.workload.as_ref())))
                .collect();
            pl.extend(wl.iter().cloned());
            if !labels.is_empty() && wl.iter().any(|(_, v)| !v.is_empty()) {
                workloads.insert(wl);
            }
            if let Some(b) = p.memory_bytes {
                m.set(
                    "accel_device_process_memory_bytes",
                    "Device memory a process holds",
                    &pl,
                    b as f64,
                );
            }
            if let Some(b) = p.busy_percent {
                m.set(
                    "accel_device_process_busy_percent",
                    "A process's share of the device's engines since the previous sample",
                    &pl,
                    b,
                );
            }
        }
        // Who the kubelet gave the device, whether or not it runs a process on it now: one
        // series per container, asked for by naming any of the kubelet's labels.
        if labels.iter().any(|l| l.named_by_kubelet()) {
            for o in &r.owners {
                m.set(
                    "accel_device_owner_info",
                    "1 for each container the kubelet gave the device (pod-resources API)",
                    &[
                        ("device", r.id()),
                        ("namespace", o.namespace.clone()),
                        ("pod", o.pod.clone()),
                        ("container", o.container.clone()),
                        ("resource", o.resource.clone()),
                        ("Hostname", host.to_string()),
                    ],
                    1.0,
                );
            }
        }
        for wl in workloads {
            let mut l = vec![("device", r.id())];
            l.extend(wl);
            l.push(("Hostname", host.to_string()));
            m.set(
                "accel_device_workload_info",
                "1 for each workload (container, pod, Slurm job, unit) with a process on the device",
                &l,
                1.0,
            );
        }
    }
}

/// The web config's reload and the serving certificate's expiry.
fn web_series(m: &mut Metrics, w: &webconfig::WebStatus, host: &str) {
    let l = [("Hostname", host.to_string())];
    m.set(
        "accel_exporter_web_config_last_reload_success",
        "1 when the web config file last loaded (at start, on a change or SIGHUP); 0 while a changed file does not load and the previous version serves",
        &l,
        if w.reload_ok.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
    );
    let t = w.cert_not_after.load(Ordering::Relaxed);
    if t != 0 {
        m.set(
            "accel_exporter_tls_certificate_expiry_timestamp_seconds",
            "When the serving certificate expires (Unix time; alert well before it)",
            &l,
            t as f64,
        );
    }
}

/// How each reader (the host's and every vendor's) did in the last collection, and how long
/// ago it last answered in time.
fn collector_series(m: &mut Metrics, s: &Snapshot, host: &str, cx: &Context) {
    for c in &s.collectors {
        let l = [
            ("collector", c.collector.to_string()),
            ("Hostname", host.to_string()),
        ];
        m.set(
            "accel_collector_success",
            "1 when the reader (the host's or a vendor's) answered in time in the last collection",
            &l,
            if c.success { 1.0 } else { 0.0 },
        );
        m.set(
            "accel_collector_duration_seconds",
            "How long the reader took in the last collection",
            &l,
            c.duration_s,
        );
        if let Some(t) = cx.last_success.get(c.collector) {
            m.set(
                "accel_collector_last_success_age_seconds",
                "Seconds from the reader's last answer in time to the last collection (grows while it fails or hangs)",
                &l,
                t.elapsed().as_secs_f64(),
            );
        }
    }
}

/// The host, the backends' availability and the exporter itself.
fn host_series(m: &mut Metrics, s: &Snapshot, host: &str, collect_seconds: f64) {
    // A failed host reader leaves the last good numbers in the snapshot: not exported as now
    // (its accel_collector_success is 0).
    let host_ok = s
        .collectors
        .iter()
        .all(|c| c.collector != "host" || c.success);
    if host_ok {
        host_values(m, s, host);
    }
    exporter_series(m, s, host, collect_seconds);
}

/// The host's CPU, memory and load.
fn host_values(m: &mut Metrics, s: &Snapshot, host: &str) {
    let l = [("Hostname", host.to_string())];
    let h = &s.host;
    m.set(
        "accel_host_cpu_percent",
        "Whole-machine CPU use since the previous sample, percent",
        &l,
        f64::from(h.cpu_percent),
    );
    for (core, p) in h.cpu_per_core_percent.iter().enumerate() {
        m.set(
            "accel_host_cpu_core_percent",
            "Each logical core's use since the previous sample, percent",
            &[("core", core.to_string()), ("Hostname", host.to_string())],
            f64::from(*p),
        );
    }
    for (name, help, v) in [
        (
            "accel_host_memory_total_bytes",
            "Installed RAM",
            h.memory.total_bytes,
        ),
        (
            "accel_host_memory_used_bytes",
            "RAM in use",
            h.memory.used_bytes,
        ),
        (
            "accel_host_memory_available_bytes",
            "RAM available without swapping",
            h.memory.available_bytes,
        ),
        (
            "accel_host_swap_total_bytes",
            "Swap space",
            h.memory.swap_total_bytes,
        ),
        (
            "accel_host_swap_used_bytes",
            "Swap in use",
            h.memory.swap_used_bytes,
        ),
    ] {
        m.set(name, help, &l, v as f64);
    }
    if let Some(la) = h.load_average {
        for (w, v) in ["1m", "5m", "15m"].iter().zip(la) {
            m.set(
                "accel_host_load_average",
                "Run-queue load average",
                &[("window", w.to_string()), ("Hostname", host.to_string())],
                v,
            );
        }
    }
}

/// The backends' availability and the exporter itself.
fn exporter_series(m: &mut Metrics, s: &Snapshot, host: &str, collect_seconds: f64) {
    let l = [("Hostname", host.to_string())];
    let h = &s.host;
    for (backend, up, reason) in backend_availability(s) {
        m.set(
            "accel_backend_available",
            "1 when telemetry finds hardware and a driver for the backend (NVML, sysfs, IOKit; no compute library is loaded); the reason when not",
            &[
                ("backend", backend.to_string()),
                ("reason", reason),
                ("Hostname", host.to_string()),
            ],
            if up { 1.0 } else { 0.0 },
        );
    }
    m.set(
        "accel_exporter_collection_seconds",
        "Seconds the last collection took",
        &l,
        collect_seconds,
    );
    m.set(
        "accel_exporter_last_collection_timestamp_seconds",
        "When the last collection ended (Unix time)",
        &l,
        s.time_unix_s,
    );
    if let Some(rss) = h.process_rss_bytes {
        m.set(
            "accel_exporter_resident_memory_bytes",
            "The exporter's own resident memory",
            &l,
            rss as f64,
        );
    }
}

/// What one collection publishes: both text formats, the JSON snapshot, the health line, and
/// while someone has the live page open, its body.
fn publish(snap: &accelkit::load::Snapshot, host: &str, cx: &mut Context) -> http::Published {
    let om = render(snap, host, cx);
    let classic = om.strip_suffix("# EOF\n").unwrap_or(&om).to_string();
    // One conversion to a JSON value, for the history and the page; its text is /snapshot.
    let (doc, snapshot) = match crate::out::json_value("monitor", snap) {
        Ok(mut doc) => {
            // The name the series carry (the node's, under Kubernetes), here too.
            doc["hostname"] = host.into();
            let text = doc.to_string();
            (doc, text)
        }
        Err(e) => (serde_json::Value::Null, format!("{{\"error\":\"{e}\"}}")),
    };
    cx.history.push(&doc);
    let page = if cx.watchers.count() > 0 {
        cx.history.page(&doc).into()
    } else {
        bytes::Bytes::new()
    };
    cx.seq += 1;
    http::Published {
        openmetrics: om.into(),
        text: classic.into(),
        snapshot: snapshot.into(),
        health: health_of(snap),
        at: Instant::now(),
        page,
        seq: cx.seq,
        host: host.to_string(),
    }
}

/// `accel serve`: collects every `--interval` seconds the telemetry under `roots` and serves
/// `/metrics`, `/snapshot`, `/` and `/events` on `--listen` (`host:port`, or `:port` for every
/// address) until stopped.
pub fn run(args: Args, roots: accelkit_telemetry::Roots) -> anyhow::Result<()> {
    let (listen, o) = args.split(roots);
    let listen = listen.as_str();
    let addrs = parse_listen(listen).map_err(|e| anyhow::anyhow!(e))?;
    // The web config first: a mistake in it is an error before anything listens.
    let web = match &o.web_config {
        Some(p) => webconfig::WebConfig::load(p)?,
        None => webconfig::WebConfig::none(),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let auth = if web.auth.is_some() {
        ", basic auth"
    } else {
        ""
    };
    let listener = bind(&addrs)?;
    let local = listener.local_addr().ok();
    let bound = local.map_or_else(|| listen.to_string(), |a| a.to_string());
    // The first collection before the first scrape. Telemetry only: no compute library is
    // loaded, no PJRT client or Vulkan instance made.
    // The kubelet is asked only for its labels: with them off, a scrape of a Kubernetes node
    // has no series more than anywhere else (no `collector="kubelet"` either).
    let mut roots = o.roots;
    if !o.process_labels.iter().any(|l| l.named_by_kubelet()) {
        roots.pod_resources = std::path::PathBuf::new();
    }
    let mut sampler = Sampler::with_roots(roots);
    let cert = web.cert.clone();
    let live = webconfig::Live::new(o.web_config.clone(), web);
    live.watch()?;
    let mut cx = Context {
        web: o.web_config.is_some().then(|| live.status.clone()),
        process_labels: o.process_labels.clone(),
        ..Context::default()
    };
    let t = Instant::now();
    let first = sampler.sample();
    cx.collect_seconds = t.elapsed().as_secs_f64();
    cx.saw(&first);
    // The machine's name: the node's in Kubernetes (NODE_NAME from the downward API, as
    // dcgm-exporter reads it; a pod's own host name is the pod's), else as the sampler read it.
    let host = std::env::var("NODE_NAME")
        .ok()
        .filter(|n| {
            !n.is_empty()
                && n.len() <= 253
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        })
        .unwrap_or_else(|| first.hostname.clone());
    if let (Some(c), Some(a)) = (&cert, local) {
        for w in tls::cert_warnings(c, &a, &host, now) {
            eprintln!("accel serve: warning: {w}");
        }
    }
    let watchers = cx.watchers.clone();
    let latest = Arc::new(RwLock::new(publish(&first, &host, &mut cx)));
    // Devices are found again at every collection, and collections are at most 10 s apart,
    // so a GPU that disappears is shown down within 10 s whatever --interval says.
    let every = Duration::from_secs_f64(o.interval.min(10.0));
    {
        let latest = latest.clone();
        let host = host.clone();
        std::thread::Builder::new()
            .name("accel-collect".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let t = Instant::now();
                let snap = sampler.sample();
                cx.collect_seconds = t.elapsed().as_secs_f64();
                cx.saw(&snap);
                let p = publish(&snap, &host, &mut cx);
                *latest.write().unwrap_or_else(|e| e.into_inner()) = p;
            })?;
    }
    let mut limits = http::Limits::for_this_process(every.mul_f64(3.0) + Duration::from_secs(5));
    limits.max_requests = o.max_requests;
    limits.allowed_hosts = o
        .allowed_hosts
        .iter()
        .map(|h| {
            h.trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        })
        .filter(|h| !h.is_empty())
        .collect();
    if let Some(t) = o.header_timeout {
        limits.header_timeout = t;
    }
    if let Some(t) = o.idle_timeout {
        limits.idle_timeout = t;
    }
    if let Some(n) = o.max_connections {
        limits.max_connections = n;
    }
    // The banner is a courtesy: an exporter whose stdout went away (a closed pipe, a full
    // disk) keeps serving, and says so on stderr.
    let banner = format!(
        "serving {scheme}://{bound}/metrics, /snapshot and /healthz (collecting every {} s{auth}); Ctrl-C stops",
        every.as_secs_f64()
    );
    if let Err(e) = crate::out::line(&banner) {
        eprintln!("accel serve: {banner} (stdout: {e})");
    }
    http::serve(listener, latest, live, limits, watchers)
}
