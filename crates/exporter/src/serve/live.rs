//! The live page of `accel serve`: `/` is one self-contained page (HTML, CSS and a small
//! script, all in the binary: fleets often have no internet) showing the machine's host and
//! devices as `accel monitor --html` draws them, and `/events` a server-sent events stream that
//! sends the page's new body after every collection, so it updates in place.
//!
//! The collector keeps the last [`KEEP`] samples, reduced to what the lines need
//! ([`History`]), and renders the page only while someone watches ([`Watchers`]): with no
//! page open a collection costs what it did before.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

/// Samples kept for the lines: 5 minutes at the default 1 s interval.
pub const KEEP: usize = 300;

/// How many `/events` streams are open (the collector renders the page only while one is).
#[derive(Debug, Default, Clone)]
pub struct Watchers(Arc<AtomicUsize>);

impl Watchers {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one stream while the guard lives.
    pub fn join(&self) -> Watching {
        self.0.fetch_add(1, Ordering::Relaxed);
        Watching(self.0.clone())
    }
}

/// One open stream, counted until dropped.
pub struct Watching(Arc<AtomicUsize>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The last samples, each reduced to the numbers the page's lines draw.
#[derive(Default)]
pub struct History {
    ring: VecDeque<Value>,
}

/// A snapshot document with only what a line needs: the host's CPU and memory, and each
/// device's identity, utilisation and memory.
fn reduce(doc: &Value) -> Value {
    let h = &doc["host"];
    let devices: Vec<Value> = doc["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            serde_json::json!({
                "vendor": d["vendor"], "index": d["index"], "mig_index": d["mig_index"],
                "utilization_percent": d["utilization_percent"],
                "memory_used_bytes": d["memory_used_bytes"],
                "memory_total_bytes": d["memory_total_bytes"],
            })
        })
        .collect();
    serde_json::json!({
        "host": {"cpu_percent": h["cpu_percent"], "memory": {
            "used_bytes": h["memory"]["used_bytes"], "total_bytes": h["memory"]["total_bytes"]}},
        "devices": devices,
    })
}

impl History {
    /// Keeps `doc` (a snapshot document's text) for the lines.
    pub fn push(&mut self, doc: &Value) {
        self.ring.push_back(reduce(doc));
        while self.ring.len() > KEEP {
            self.ring.pop_front();
        }
    }

    /// The page's body for `last` (the newest snapshot, whole) with the lines of the kept
    /// samples.
    pub fn page(&self, last: &Value) -> String {
        let mut samples: Vec<Value> = self.ring.iter().cloned().collect();
        samples.pop();
        samples.push(last.clone());
        accelkit_report::page(
            serde_json::json!({"kind": "watch", "samples": samples}),
            "watch",
        )
    }
}

/// One server-sent event carrying `html` (each line a `data:` line, RFC-less but as the HTML
/// Living Standard's "server-sent events" parses them).
pub fn event(html: &str) -> Bytes {
    let mut out = String::with_capacity(html.len() + 64);
    for line in html.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// The page `/` serves, titled `accel: {title}`: `body` (the current view, so it shows without
/// the script too) and a script that replaces it with each event of `/events`, and says so when
/// the stream breaks (the browser reconnects by itself, except after an answer that is not a
/// stream, such as a 503 when every stream slot is taken: then the script tries again every
/// 5 s); `also` names the server's other paths.
pub fn page(title: &str, body: &str, also: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>accel: {host}</title>\
<style>body{{font-family:system-ui,sans-serif;margin:1em}}#state{{color:#6e7781;font-size:0.85em}}</style>\
</head><body><div id=\"live\">{body}</div>\
<p id=\"state\">live from /events; also {also}</p>\
<script>\
(function(){{var s=document.getElementById('state'),l=document.getElementById('live');\
if(!window.EventSource){{s.textContent='this browser has no EventSource: reload to update';return;}}\
function connect(){{var e=new EventSource('events');\
e.onmessage=function(m){{l.innerHTML=m.data;s.textContent='live from /events, updated '+new Date().toLocaleTimeString();}};\
e.onerror=function(){{if(e.readyState===2){{s.textContent='connection lost (the server refused the stream); trying again in 5 s';setTimeout(connect,5000);}}else{{s.textContent='connection lost; reconnecting';}}}};}}\
connect();}})();\
</script></body></html>",
        host = accelkit_report::escape(title),
        also = accelkit_report::escape(also),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_carries_every_line_of_the_html() {
        assert_eq!(&event("<p>a</p>")[..], b"data: <p>a</p>\n\n");
        assert_eq!(&event("a\nb\r\nc")[..], b"data: a\ndata: b\ndata: c\n\n");
    }

    #[test]
    fn history_keeps_the_last_samples_reduced() {
        let mut h = History::default();
        for i in 0..(KEEP + 5) {
            h.push(&serde_json::json!({
                "host": {"cpu_percent": i as f64 % 100.0, "memory": {"used_bytes": 1, "total_bytes": 4}, "load_average": [1]},
                "devices": [{"vendor": "amd", "index": 0, "name": "big", "utilization_percent": 50.0,
                             "processes": [{"pid": 1}]}]
            }));
        }
        assert_eq!(h.ring.len(), KEEP);
        assert_eq!(h.ring[0]["host"]["cpu_percent"], 5.0);
        assert!(h.ring[0]["devices"][0].get("processes").is_none());
        let last = serde_json::json!({"hostname": "n1", "host": {"cpu_percent": 7.0, "memory": {}},
                                      "devices": [{"vendor": "amd", "index": 0, "name": "MI300X", "up": true}]});
        let page = h.page(&last);
        assert!(page.contains("MI300X") && page.contains("<svg"), "{page}");
    }

    #[test]
    fn the_page_embeds_its_script_and_escapes_the_host() {
        let p = page("n<1>", "<p>x</p>", "/metrics");
        assert!(p.contains("<title>accel: n&lt;1&gt;</title>"));
        assert!(p.contains("<div id=\"live\"><p>x</p></div>"));
        assert!(p.contains("new EventSource('events')"));
        assert!(p.contains("live from /events; also /metrics</p>"));
        assert!(
            !p.contains("http://") && !p.contains("https://"),
            "nothing from the network"
        );
    }

    #[test]
    fn watchers_count_while_their_guards_live() {
        let w = Watchers::default();
        let a = w.join();
        let b = w.join();
        assert_eq!(w.count(), 2);
        drop(a);
        assert_eq!(w.count(), 1);
        drop(b);
        assert_eq!(w.count(), 0);
    }
}
