//! `accel serve`: the machine's load as Prometheus metrics, for a fleet (Prometheus scrapes
//! every machine; Grafana shows them). CUDA GPUs carry dcgm-exporter's names and labels
//! (`DCGM_FI_DEV_GPU_UTIL{gpu, UUID, device, modelName, Hostname}`, memory in MiB as it
//! reports it), so dashboards made for dcgm-exporter work unchanged; every device, the host
//! and the backends' availability also have `accel_*` series.
//!
//! A background thread samples every `--interval` and renders the exposition text once; a
//! scrape only copies the latest text, so it never waits on a slow probe or driver.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use accel::load::{Sampler, Snapshot};
use accel::probe::Availability;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type FloatFamily = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;

/// The OpenMetrics text format `prometheus-client` writes (Prometheus reads it, and it is
/// what the scrape negotiates).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

struct Latest {
    text: Arc<String>,
    at: Instant,
}

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
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        fam.get_or_create(&labels).set(v);
    }
}

/// TCP_NODELAY on the listening socket (Linux passes it on to every accepted connection): the
/// server writes a response's headers and body separately, and Nagle's algorithm would hold
/// the body until the client's delayed ACK, 40 ms later.
fn no_delay(listener: &std::net::TcpListener) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: the fd is the listener's, open for this call; the option value is a
        // c_int on the stack with its size passed; setsockopt reads it and copies it.
        let _ = unsafe {
            libc::setsockopt(
                listener.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                &on as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    #[cfg(not(unix))]
    let _ = listener;
}

fn hostname() -> String {
    sysinfo::System::host_name().unwrap_or_else(|_| "localhost".into())
}

/// The exposition text of one snapshot.
pub fn render(s: &Snapshot, host: &str, collect_seconds: f64) -> String {
    let mut registry = Registry::default();
    let mut m = Metrics {
        registry: &mut registry,
        families: Vec::new(),
    };
    const MIB: f64 = 1024.0 * 1024.0;
    // dcgm-exporter's series, for CUDA GPUs.
    for d in &s.devices {
        let accel::Device::Cuda(i) = d.device else {
            continue;
        };
        let l = [
            ("gpu", i.to_string()),
            ("UUID", d.uuid.clone().unwrap_or_default()),
            ("device", format!("nvidia{i}")),
            ("modelName", d.name.clone()),
            ("Hostname", host.to_string()),
        ];
        let mut dcgm = |name, help, v: Option<f64>| {
            if let Some(v) = v {
                m.set(name, help, &l, v);
            }
        };
        dcgm(
            "DCGM_FI_DEV_GPU_UTIL",
            "GPU utilization (in %)",
            d.utilization_percent.map(f64::from),
        );
        dcgm(
            "DCGM_FI_DEV_FB_USED",
            "Framebuffer memory used (in MiB)",
            d.memory_used_bytes.map(|b| b as f64 / MIB),
        );
        dcgm(
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB)",
            d.memory_total_bytes
                .zip(d.memory_used_bytes)
                .map(|(t, u)| t.saturating_sub(u) as f64 / MIB),
        );
        dcgm(
            "DCGM_FI_DEV_GPU_TEMP",
            "GPU temperature (in C)",
            d.temperature_c.map(f64::from),
        );
        dcgm("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)", d.power_w);
        dcgm(
            "DCGM_FI_DEV_SM_CLOCK",
            "SM clock frequency (in MHz)",
            d.clock_sm_mhz.map(f64::from),
        );
        dcgm(
            "DCGM_FI_DEV_MEM_CLOCK",
            "Memory clock frequency (in MHz)",
            d.clock_memory_mhz.map(f64::from),
        );
    }
    // accel's series, for every device.
    for d in &s.devices {
        let l = [
            ("device", d.device.to_string()),
            ("backend", d.backend.to_string()),
            ("name", d.name.clone()),
            ("Hostname", host.to_string()),
        ];
        m.set(
            "accel_device_info",
            "1 for every device accel found; its name and backend are labels",
            &l,
            1.0,
        );
        m.set(
            "accel_device_accel_allocated_bytes",
            "Bytes this process's live tensors hold on the device",
            &l,
            d.accel_allocated_bytes as f64,
        );
        let mut set = |name, help, v: Option<f64>| {
            if let Some(v) = v {
                m.set(name, help, &l, v);
            }
        };
        set(
            "accel_device_utilization_percent",
            "Device utilization, percent, where the driver reports it",
            d.utilization_percent.map(f64::from),
        );
        set(
            "accel_device_memory_used_bytes",
            "Device memory in use by every process, where the driver reports it",
            d.memory_used_bytes.map(|b| b as f64),
        );
        set(
            "accel_device_memory_total_bytes",
            "Device memory in all, where the driver reports it",
            d.memory_total_bytes.map(|b| b as f64),
        );
        set(
            "accel_device_temperature_celsius",
            "Device temperature",
            d.temperature_c.map(f64::from),
        );
        set("accel_device_power_watts", "Device power draw", d.power_w);
    }
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
    m.set(
        "accel_host_memory_total_bytes",
        "Installed RAM",
        &l,
        h.memory.total_bytes as f64,
    );
    m.set(
        "accel_host_memory_used_bytes",
        "RAM in use",
        &l,
        h.memory.used_bytes as f64,
    );
    m.set(
        "accel_host_memory_available_bytes",
        "RAM available without swapping",
        &l,
        h.memory.available_bytes as f64,
    );
    for p in accel::devices() {
        let (up, reason) = match &p.availability {
            Availability::Available { devices } => (1.0, format!("{} device(s)", devices.len())),
            Availability::Unavailable { reason, .. } => (0.0, reason.clone()),
        };
        m.set(
            "accel_backend_available",
            "1 when the backend has usable devices; the reason when not",
            &[
                ("backend", p.backend.to_string()),
                ("reason", reason),
                ("Hostname", host.to_string()),
            ],
            up,
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
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

pub fn run(listen: &str, interval: f64) -> anyhow::Result<()> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        anyhow::anyhow!(
            "'{listen}' is not an address to listen on (such as 127.0.0.1:9400 or 0.0.0.0:9400)"
        )
    })?;
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    no_delay(&listener);
    let server = tiny_http::Server::from_listener(listener, None)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| addr.to_string(), |a| a.to_string());
    let host = hostname();
    // The first collection before the first scrape: probing the backends takes a moment.
    let mut sampler = Sampler::new()?;
    let t = Instant::now();
    let first = sampler.sample();
    let latest = Arc::new(RwLock::new(Latest {
        text: Arc::new(render(&first, &host, t.elapsed().as_secs_f64())),
        at: Instant::now(),
    }));
    let every = Duration::from_secs_f64(interval);
    {
        let latest = latest.clone();
        let host = host.clone();
        std::thread::Builder::new()
            .name("accel-collect".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let t = Instant::now();
                let snap = sampler.sample();
                let text = Arc::new(render(&snap, &host, t.elapsed().as_secs_f64()));
                let mut l = latest.write().unwrap_or_else(|e| e.into_inner());
                *l = Latest {
                    text,
                    at: Instant::now(),
                };
            })?;
    }
    crate::out::line(format!(
        "serving http://{bound}/metrics and /healthz (collecting every {interval} s); Ctrl-C stops"
    ))?;
    let server = Arc::new(server);
    let stale = every.mul_f64(3.0) + Duration::from_secs(5);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let server = server.clone();
            let latest = latest.clone();
            std::thread::Builder::new()
                .name(format!("accel-http-{i}"))
                .spawn(move || {
                    for req in server.incoming_requests() {
                        let (text, at) = {
                            let l = latest.read().unwrap_or_else(|e| e.into_inner());
                            (l.text.clone(), l.at)
                        };
                        let header = |k: &str, v: &str| {
                            tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes())
                                .expect("ASCII header")
                        };
                        let resp = match (req.method(), req.url().split('?').next()) {
                            (tiny_http::Method::Get, Some("/metrics")) => {
                                tiny_http::Response::from_data(text.as_bytes().to_vec())
                                    .with_header(header("Content-Type", CONTENT_TYPE))
                            }
                            (tiny_http::Method::Get, Some("/healthz")) => {
                                if at.elapsed() < stale {
                                    tiny_http::Response::from_data(b"ok\n".to_vec())
                                } else {
                                    tiny_http::Response::from_data(
                                        format!(
                                            "stale: the last collection was {:.0} s ago\n",
                                            at.elapsed().as_secs_f64()
                                        )
                                        .into_bytes(),
                                    )
                                    .with_status_code(503)
                                }
                            }
                            (tiny_http::Method::Get, Some("/")) => tiny_http::Response::from_data(
                                b"accel exporter: /metrics, /healthz\n".to_vec(),
                            ),
                            _ => tiny_http::Response::from_data(b"not found\n".to_vec())
                                .with_status_code(404),
                        };
                        let _ = req.respond(resp);
                    }
                })
        })
        .collect::<Result<_, _>>()?;
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
