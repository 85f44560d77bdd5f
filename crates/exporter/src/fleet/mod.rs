//! `accel monitor --hosts` / `--hostfile` / `--prometheus`: many machines in one screen.
//!
//! `--hosts` polls each machine's `accel serve` (`/snapshot`, the same document as
//! `accel monitor --json`) in parallel, each with a timeout, so a host that is down or slow
//! never freezes the view; `--prometheus` reads the same rows from a Prometheus server's HTTP
//! API (instant queries of the `accel_*` series and of dcgm-exporter's `DCGM_FI_*` series, so
//! machines running dcgm-exporter instead of accel appear too): polling suits a handful of
//! machines, a fleet of hundreds is read from the engine that already collects it.

pub(crate) mod client;
pub mod page;
pub(crate) mod rows;
pub mod view;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::Value;

use accelkit_core::units::parse_seconds;
use client::{HttpConfig, Target};
use rows::{from_snapshot_bytes, now_unix, totals, DeviceRow, HostRow, Round};

/// Where the rows come from.
pub(crate) enum Source {
    /// Each machine's `accel serve`.
    Hosts(Vec<Target>),
    /// A Prometheus server.
    Prometheus(Target),
}

/// The fleet options of `accel monitor` (its flags, for the command to flatten into its
/// parser): where the machines are, and how to reach them.
#[derive(clap::Args, Clone, Debug)]
pub struct Options {
    /// A fleet view: poll these machines' `accel serve` (HOST:PORT or https://HOST:PORT,
    /// comma-separated), one row each.
    #[arg(long, value_name = "HOST:PORT,...", conflicts_with = "prometheus")]
    hosts: Option<String>,
    /// A fleet view of the machines listed in FILE (one HOST:PORT per line, # comments).
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    hostfile: Option<PathBuf>,
    /// A fleet view read from a Prometheus server's HTTP API (accel's and dcgm-exporter's
    /// series), e.g. http://prometheus:9090.
    #[arg(long, value_name = "URL")]
    prometheus: Option<String>,
    /// Credentials and CA for the fleet view, in Prometheus's http_config shape
    /// (basic_auth with password_file, tls_config with ca_file).
    #[arg(long = "http-config", value_name = "FILE")]
    http_config: Option<PathBuf>,
    /// Seconds each host (or Prometheus) has to answer in the fleet view.
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = parse_seconds)]
    timeout: f64,
}

impl Options {
    /// Whether any source of machines is given (else `accel monitor` shows this machine).
    pub fn is_fleet(&self) -> bool {
        self.hosts.is_some() || self.hostfile.is_some() || self.prometheus.is_some()
    }

    fn source(&self) -> anyhow::Result<Source> {
        if let Some(p) = &self.prometheus {
            return Ok(Source::Prometheus(Target::parse(p, 9090)?));
        }
        let mut list: Vec<String> = Vec::new();
        if let Some(h) = &self.hosts {
            list.extend(
                h.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
        }
        if let Some(f) = &self.hostfile {
            let text = crate::input::read_config(f, "the host file")?;
            list.extend(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or("").trim())
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
        }
        if list.is_empty() {
            bail!("no hosts given (--hosts HOST:PORT,... or a --hostfile with one per line)");
        }
        if list.len() > 10_000 {
            bail!(
                "{} hosts: poll at most 10,000 (read a larger fleet through --prometheus)",
                list.len()
            );
        }
        Ok(Source::Hosts(
            list.iter()
                .map(|h| Target::parse(h, 9400))
                .collect::<anyhow::Result<_>>()?,
        ))
    }
}

/// Polls the source round after round, remembering since when each host is in its state.
pub(crate) struct Poller {
    source: Source,
    cfg: HttpConfig,
    timeout: Duration,
    stale_after: f64,
    rt: tokio::runtime::Runtime,
    /// host -> (state, since)
    states: BTreeMap<String, (&'static str, f64)>,
    /// The last good row of each host (shown, marked, while it is down).
    last: BTreeMap<String, HostRow>,
    /// host -> (its last sample time, as bits; when this machine saw it change)
    fresh: BTreeMap<String, (Option<u64>, f64)>,
}

impl Poller {
    /// A poller of `o`'s machines, read every `interval` seconds; the options' mistakes are errors here.
    pub(crate) fn new(o: &Options, interval: f64) -> anyhow::Result<Poller> {
        let source = o.source()?;
        let cfg = HttpConfig::load(o.http_config.as_deref())?;
        Ok(Poller {
            source,
            cfg,
            timeout: Duration::from_secs_f64(o.timeout),
            // A sample older than three intervals (and 10 s) is stale.
            stale_after: (interval * 3.0).max(10.0),
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?,
            states: BTreeMap::new(),
            last: BTreeMap::new(),
            fresh: BTreeMap::new(),
        })
    }

    /// One round: every host at once, each within the timeout.
    pub(crate) fn round(&mut self) -> anyhow::Result<Round> {
        let now = now_unix();
        let (source, mut hosts) = match &self.source {
            Source::Hosts(targets) => {
                let cfg = self.cfg.clone();
                let timeout = self.timeout;
                let results: Vec<(String, anyhow::Result<HostRow>)> = self.rt.block_on(async {
                    let tasks: Vec<_> = targets
                        .iter()
                        .cloned()
                        .map(|t| {
                            let cfg = cfg.clone();
                            tokio::spawn(async move {
                                // The answer becomes its row here, and the bytes are dropped:
                                // what a member sent is held only while it is read.
                                let r = client::get(&cfg, &t, "/snapshot", timeout)
                                    .await
                                    .and_then(|b| from_snapshot_bytes(&t.label, &b));
                                (t.label.clone(), r)
                            })
                        })
                        .collect();
                    let mut out = Vec::new();
                    for t in tasks {
                        if let Ok(r) = t.await {
                            out.push(r);
                        }
                    }
                    out
                });
                let mut rows = Vec::new();
                for (host, r) in results {
                    let row = match r {
                        Ok(mut row) => {
                            // Freshness by this machine's clock: since when the member's
                            // sample time has not moved (its own clock may be off by any
                            // amount; before, a member a day behind was always "stale", and
                            // one ahead never was).
                            let seen = self.fresh.entry(host.clone()).or_insert((None, now));
                            if seen.0 != row.sampled_unix_s.map(f64::to_bits) {
                                *seen = (row.sampled_unix_s.map(f64::to_bits), now);
                            }
                            let age = now - seen.1;
                            if age > self.stale_after {
                                row.state = "stale";
                                row.error = Some(format!(
                                    "its last collection has not changed for {age:.0} s"
                                ));
                            } else {
                                row.state = "up";
                                let skew = row.sampled_unix_s.map_or(0.0, |t| t - now);
                                if skew.abs() > 300.0 {
                                    row.error = Some(format!(
                                        "its clock is {:.0} s {} this machine's",
                                        skew.abs(),
                                        if skew > 0.0 { "ahead of" } else { "behind" }
                                    ));
                                }
                            }
                            self.last.insert(host.clone(), row.clone());
                            row
                        }
                        Err(e) => {
                            let mut row = self
                                .last
                                .get(&host)
                                .cloned()
                                .unwrap_or_else(|| HostRow::empty(&host));
                            row.state = "down";
                            row.error = Some(format!("{e:#}"));
                            for d in &mut row.device_rows {
                                d.up = false;
                            }
                            row.summarize();
                            row
                        }
                    };
                    rows.push(row);
                }
                ("hosts", rows)
            }
            Source::Prometheus(t) => {
                // --timeout bounds the whole round (13 queries), not each query.
                let rows = self.rt.block_on(async {
                    tokio::time::timeout(self.timeout, prometheus_rows(&self.cfg, t, self.timeout))
                        .await
                        .map_err(|_| {
                            anyhow!(
                                "Prometheus at {} did not answer every query within --timeout \
                                 {:.1} s",
                                t.label,
                                self.timeout.as_secs_f64()
                            )
                        })?
                })?;
                ("prometheus", rows)
            }
        };
        for h in &mut hosts {
            let e = self.states.entry(h.host.clone()).or_insert((h.state, now));
            if e.0 != h.state {
                *e = (h.state, now);
            }
            if source == "hosts" {
                h.since_unix_s = Some(e.1);
            }
        }
        Ok(Round {
            time_unix_s: now,
            source,
            totals: totals(&hosts),
            hosts,
        })
    }
}

/// The instant value of every series of `query`: (labels, value).
async fn instant(
    cfg: &HttpConfig,
    t: &Target,
    query: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<(Value, f64)>> {
    let q: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = client::get(cfg, t, &format!("/api/v1/query?query={q}"), timeout).await?;
    let v: Value =
        serde_json::from_slice(&body).map_err(|e| anyhow!("not Prometheus's API: {e}"))?;
    if v["status"] != "success" {
        bail!(
            "Prometheus: {}",
            v["error"].as_str().unwrap_or("query failed")
        );
    }
    Ok(v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["metric"].clone(), r["value"][1].as_str()?.parse().ok()?)))
        .collect())
}

/// The rows from a Prometheus server: every `instance` with accel's or dcgm-exporter's series.
async fn prometheus_rows(
    cfg: &HttpConfig,
    t: &Target,
    timeout: Duration,
) -> anyhow::Result<Vec<HostRow>> {
    const QUERIES: [&str; 12] = [
        "up",
        "accel_host_cpu_percent",
        "accel_device_up",
        "accel_device_utilization_percent",
        "accel_device_memory_used_bytes",
        "accel_device_memory_total_bytes",
        "accel_device_temperature_celsius",
        "accel_device_power_watts",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
    ];
    let mut answers = Vec::new();
    for q in QUERIES.iter().chain(["DCGM_FI_DEV_POWER_USAGE"].iter()) {
        answers.push(
            instant(cfg, t, q, timeout)
                .await
                .map_err(|e| anyhow!("cannot query Prometheus at {}: {e:#}", t.label))?,
        );
    }
    let get = |i: usize| &answers[i];
    let inst = |m: &Value| m["instance"].as_str().unwrap_or("?").to_string();
    let mut hosts: BTreeMap<String, HostRow> = BTreeMap::new();
    // Machines: an instance with accel's or dcgm-exporter's series.
    for i in [1, 2, 8] {
        for (m, _) in get(i) {
            let h = inst(m);
            hosts.entry(h.clone()).or_insert_with(|| HostRow::empty(&h));
        }
    }
    for (m, v) in get(0) {
        if let Some(h) = hosts.get_mut(&inst(m)) {
            h.state = if *v == 1.0 { "up" } else { "down" };
            if *v != 1.0 {
                h.error = Some("Prometheus's last scrape of it failed (up == 0)".into());
            }
        }
    }
    for (m, v) in get(1) {
        if let Some(h) = hosts.get_mut(&inst(m)) {
            h.cpu_percent = Some(*v);
            h.hostname = m["Hostname"].as_str().map(String::from);
        }
    }
    // accel's devices, keyed by (instance, device).
    let mut devs: BTreeMap<(String, String), DeviceRow> = BTreeMap::new();
    let key = |m: &Value, label: &str| (inst(m), m[label].as_str().unwrap_or("?").to_string());
    for (m, v) in get(2) {
        devs.insert(
            key(m, "device"),
            DeviceRow {
                device: m["device"].as_str().unwrap_or("?").to_string(),
                name: m["name"].as_str().unwrap_or("").to_string(),
                up: *v == 1.0,
                status: None,
                utilization_percent: None,
                memory_used_bytes: None,
                memory_total_bytes: None,
                temperature_c: None,
                power_w: None,
            },
        );
    }
    for (i, set) in [
        (
            3usize,
            (|d: &mut DeviceRow, v: f64| d.utilization_percent = Some(v))
                as fn(&mut DeviceRow, f64),
        ),
        (4, |d, v| d.memory_used_bytes = Some(v as u64)),
        (5, |d, v| d.memory_total_bytes = Some(v as u64)),
        (6, |d, v| d.temperature_c = Some(v)),
        (7, |d, v| d.power_w = Some(v)),
    ] {
        for (m, v) in get(i) {
            if let Some(d) = devs.get_mut(&key(m, "device")) {
                set(d, *v);
            }
        }
    }
    // dcgm-exporter's GPUs, where accel has no row for the instance. Every look-up is by
    // key: a fleet of 8,000 GPUs once took 8.45 s of CPU a round in linear searches.
    let accel_instances: std::collections::HashSet<String> =
        devs.keys().map(|(i, _)| i.clone()).collect();
    let by_gpu: Vec<std::collections::HashMap<(String, String), f64>> = (9..=12)
        .map(|i| {
            let mut m = std::collections::HashMap::new();
            for (x, v) in get(i) {
                m.entry((inst(x), x["UUID"].as_str().unwrap_or("").to_string()))
                    .or_insert(*v);
            }
            m
        })
        .collect();
    const MIB: f64 = 1024.0 * 1024.0;
    for (m, v) in get(8) {
        let h = inst(m);
        if accel_instances.contains(&h) {
            continue;
        }
        let gpu = m["gpu"].as_str().unwrap_or("?");
        let uuid = m["UUID"].as_str().unwrap_or("");
        let k = (h.clone(), uuid.to_string());
        let find = |i: usize| by_gpu[i - 9].get(&k).copied();
        let used = find(9);
        let free = find(10);
        devs.insert(
            (h.clone(), format!("nvidia:{gpu}")),
            DeviceRow {
                device: format!("nvidia:{gpu}"),
                name: m["modelName"].as_str().unwrap_or("").to_string(),
                up: true,
                status: Some("dcgm-exporter".into()),
                utilization_percent: Some(*v),
                memory_used_bytes: used.map(|u| (u * MIB) as u64),
                memory_total_bytes: used.zip(free).map(|(u, f)| ((u + f) * MIB) as u64),
                temperature_c: find(11),
                power_w: find(12),
            },
        );
    }
    for ((i, _), d) in devs {
        if let Some(h) = hosts.get_mut(&i) {
            h.device_rows.push(d);
        }
    }
    let mut rows: Vec<HostRow> = hosts.into_values().collect();
    for r in &mut rows {
        r.summarize();
    }
    Ok(rows)
}
