//! The fleet as HTML: `accel monitor --hosts ... --html` prints one page of the last round with
//! lines of them all, and `--serve ADDR` serves it live, as `accel serve` serves one machine
//! (`/` the page, `/events` its new body after every round, `/snapshot` the round as JSON,
//! `/healthz`), through the same server: the same limits, TLS and basic auth.
//!
//! The lines are kept compact (`Lines`: two numbers per row and round, for the rows the
//! page draws), so a fleet of thousands of machines polled for hours stays small.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Options, Poller};
use crate::serve::{http, live, webconfig};

/// Rows with a line at most (machines and devices together); rows beyond get none.
const MAX_ROWS: usize = 2500;

/// Percent of `used` in `total`, where both are known and the total is not zero.
fn share(used: &Value, total: &Value) -> Option<f32> {
    let (u, t) = (used.as_f64()?, total.as_f64()?);
    (t > 0.0).then(|| (u / t * 100.0).clamp(0.0, 100.0) as f32)
}

/// The last rounds' utilisation and memory (percent) per machine and per device that was up,
/// keyed as `accelkit_report` reads a fleet's `history`: a machine by its `host`, a device by its
/// machine's `host`, a space and its `device`.
pub(crate) struct Lines {
    keep: usize,
    /// Rounds pushed, up to `keep`.
    len: usize,
    rows: BTreeMap<String, VecDeque<[Option<f32>; 2]>>,
}

impl Lines {
    /// Lines that keep the last `keep` rounds (at least one).
    pub fn new(keep: usize) -> Lines {
        Lines {
            keep: keep.max(1),
            len: 0,
            rows: BTreeMap::new(),
        }
    }

    /// Adds one round (a fleet document): a point per row, `None` where a row has none now.
    pub fn push(&mut self, round: &Value) {
        let mut now: BTreeMap<String, [Option<f32>; 2]> = BTreeMap::new();
        for h in round["hosts"].as_array().into_iter().flatten() {
            if h["state"] != "up" {
                continue;
            }
            let host = h["host"].as_str().unwrap_or("");
            now.insert(
                host.to_string(),
                [
                    h["utilization_percent"].as_f64().map(|u| u as f32),
                    share(&h["memory_used_bytes"], &h["memory_total_bytes"]),
                ],
            );
            for d in h["device_rows"].as_array().into_iter().flatten() {
                if d["up"] == true {
                    now.insert(
                        format!("{host} {}", d["device"].as_str().unwrap_or("")),
                        [
                            d["utilization_percent"].as_f64().map(|u| u as f32),
                            share(&d["memory_used_bytes"], &d["memory_total_bytes"]),
                        ],
                    );
                }
            }
        }
        self.len = (self.len + 1).min(self.keep);
        for (k, ring) in self.rows.iter_mut() {
            ring.push_back(now.remove(k).unwrap_or([None, None]));
        }
        for (k, v) in now {
            if self.rows.len() >= MAX_ROWS {
                break;
            }
            let mut ring: VecDeque<[Option<f32>; 2]> = VecDeque::new();
            ring.resize(self.len - 1, [None, None]);
            ring.push_back(v);
            self.rows.insert(k, ring);
        }
        for ring in self.rows.values_mut() {
            while ring.len() > self.keep {
                ring.pop_front();
            }
        }
        // A row with nothing left to draw (a machine gone for `keep` rounds) is forgotten.
        self.rows
            .retain(|_, ring| ring.iter().any(|p| p[0].is_some() || p[1].is_some()));
    }

    /// The `history` a fleet document is drawn with.
    pub fn history(&self) -> Value {
        let point = |v: Option<f32>| v.map_or(Value::Null, |x| Value::from(f64::from(x)));
        let rows = self
            .rows
            .iter()
            .map(|(k, ring)| {
                let util: Vec<Value> = ring.iter().map(|p| point(p[0])).collect();
                let mem: Vec<Value> = ring.iter().map(|p| point(p[1])).collect();
                (k.clone(), serde_json::json!({"util": util, "mem": mem}))
            })
            .collect();
        Value::Object(rows)
    }

    /// The HTML of `round` with these lines.
    pub fn page(&self, round: &Value) -> String {
        let mut doc = round.clone();
        doc["history"] = self.history();
        accelkit_report::page(doc, "fleet")
    }
}

/// `accel monitor --hosts ... --html`: `count` rounds, then one page of the last with lines of
/// them all.
pub fn print(o: &Options, interval: f64, count: u64) -> anyhow::Result<()> {
    let mut p = Poller::new(o, interval)?;
    let every = Duration::from_secs_f64(interval);
    let mut lines = Lines::new(count as usize);
    let mut last = Value::Null;
    for i in 0..count {
        let start = Instant::now();
        last = crate::out::json_value("fleet", &p.round()?)?;
        lines.push(&last);
        if i + 1 < count {
            std::thread::sleep(every.saturating_sub(start.elapsed()));
        }
    }
    crate::out::line(lines.page(&last))
}

/// What one round publishes: the round as JSON, the health line and, while a page is open,
/// the page's body.
fn publish(
    round: &super::rows::Round,
    lines: &mut Lines,
    watchers: &live::Watchers,
    seq: u64,
) -> http::Published {
    let (doc, snapshot) = match crate::out::json_value("fleet", round) {
        Ok(doc) => {
            let text = doc.to_string();
            (doc, text)
        }
        Err(e) => (Value::Null, format!("{{\"error\":\"{e}\"}}")),
    };
    lines.push(&doc);
    let page = if watchers.count() > 0 {
        lines.page(&doc).into()
    } else {
        bytes::Bytes::new()
    };
    http::Published {
        openmetrics: bytes::Bytes::new(),
        text: bytes::Bytes::new(),
        snapshot: snapshot.into(),
        health: format!(
            "ok: {} of {} machines up\n",
            round.totals.hosts_up, round.totals.hosts
        ),
        at: Instant::now(),
        page,
        seq,
        host: format!("fleet of {}", round.totals.hosts),
    }
}

/// `accel monitor --hosts ... --serve ADDR`: the fleet's live page, until SIGTERM or SIGINT.
pub fn serve(
    o: &Options,
    interval: f64,
    listen: &str,
    web_config: Option<PathBuf>,
) -> anyhow::Result<()> {
    let addrs = crate::serve::parse_listen(listen).map_err(|e| anyhow::anyhow!(e))?;
    // The web config and the host list first: a mistake in either is an error before
    // anything listens.
    let web = match &web_config {
        Some(p) => webconfig::WebConfig::load(p)?,
        None => webconfig::WebConfig::none(),
    };
    let mut poller = Poller::new(o, interval)?;
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let listener = crate::serve::bind(&addrs)?;
    let bound = listener
        .local_addr()
        .map_or_else(|_| listen.to_string(), |a| a.to_string());
    let live = webconfig::Live::new(web_config, web);
    live.watch()?;
    let watchers = live::Watchers::default();
    let mut lines = Lines::new(live::KEEP);
    let every = Duration::from_secs_f64(interval);
    let first = poller.round()?;
    let latest = Arc::new(RwLock::new(publish(&first, &mut lines, &watchers, 1)));
    {
        let (latest, watchers) = (latest.clone(), watchers.clone());
        std::thread::Builder::new()
            .name("accel-fleet-poll".into())
            .spawn(move || {
                let mut seq = 1;
                loop {
                    std::thread::sleep(every);
                    // A round that fails as a whole (Prometheus down) keeps the last page,
                    // which `/healthz` calls stale after three intervals.
                    match poller.round() {
                        Ok(r) => {
                            seq += 1;
                            let p = publish(&r, &mut lines, &watchers, seq);
                            *latest.write().unwrap_or_else(|e| e.into_inner()) = p;
                        }
                        Err(e) => eprintln!("accel monitor: {e:#}"),
                    }
                }
            })?;
    }
    // Rounds take up to the poll timeout on top of the interval.
    let stale = every.mul_f64(3.0) + Duration::from_secs_f64(o.timeout) + Duration::from_secs(5);
    let limits = http::Limits::for_this_process(stale);
    let banner = format!(
        "serving the fleet's live page at {scheme}://{bound}/ (and /events, /snapshot, /healthz; polling every {} s); Ctrl-C stops",
        every.as_secs_f64()
    );
    if let Err(e) = crate::out::line(&banner) {
        eprintln!("accel monitor: {banner} (stdout: {e})");
    }
    http::serve(listener, latest, live, limits, watchers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(util: Option<f64>, up: bool) -> Value {
        serde_json::json!({"hosts": [
            {"host": "a:1", "state": if up { "up" } else { "down" }, "utilization_percent": util,
             "memory_used_bytes": 1, "memory_total_bytes": 4,
             "device_rows": [{"device": "amd:0", "up": true, "utilization_percent": util,
                              "memory_used_bytes": null, "memory_total_bytes": 8}]}
        ]})
    }

    #[test]
    fn lines_keep_the_last_rounds_per_row_with_gaps_where_a_row_was_missing() {
        let mut l = Lines::new(3);
        l.push(&round(Some(10.0), true));
        l.push(&round(None, false));
        l.push(&round(Some(30.0), true));
        l.push(&round(Some(40.0), true));
        let h = l.history();
        // Three rounds kept; while a:1 was down it has no point, and its device neither.
        assert_eq!(h["a:1"]["util"], serde_json::json!([null, 30.0, 40.0]));
        assert_eq!(h["a:1"]["mem"], serde_json::json!([null, 25.0, 25.0]));
        assert_eq!(
            h["a:1 amd:0"]["util"],
            serde_json::json!([null, 30.0, 40.0])
        );
        assert_eq!(h["a:1 amd:0"]["mem"], serde_json::json!([null, null, null]));
        // A row that appears late is padded to the others' length.
        let mut both = round(Some(50.0), true);
        both["hosts"][0]["device_rows"][0]["device"] = "amd:1".into();
        l.push(&both);
        assert_eq!(
            l.history()["a:1 amd:1"]["util"],
            serde_json::json!([null, null, 50.0])
        );
        // Gone for `keep` rounds: forgotten.
        for _ in 0..3 {
            l.push(&round(None, false));
        }
        assert_eq!(l.history(), serde_json::json!({}));
    }

    #[test]
    fn lines_are_bounded_however_large_the_fleet() {
        let hosts: Vec<Value> = (0..3000)
            .map(|i| {
                serde_json::json!({"host": format!("h{i}"), "state": "up",
                                        "utilization_percent": 1.0, "device_rows": []})
            })
            .collect();
        let mut l = Lines::new(5);
        for _ in 0..10 {
            l.push(&serde_json::json!({ "hosts": hosts }));
        }
        assert_eq!(l.rows.len(), MAX_ROWS);
        assert!(l.rows.values().all(|r| r.len() == 5));
    }
}
