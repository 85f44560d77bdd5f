//! `accel monitor`: a full-screen live view of the machine's load (nvtop's and gpustat's
//! role): the host's CPU per core and RAM, then each accelerator's utilisation, memory,
//! temperature, power, clocks, a history sparkline and the processes using it. With --json,
//! or when stdout is not a terminal, the same samples as lines instead.
//!
//! [`accelkit::load::Sampler`] is the only source of numbers; this file only draws them.

use std::collections::VecDeque;
use std::fmt::Display;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use accelkit::load::{DeviceLoad, Sampler, Snapshot};
use accelkit::memory::human_bytes;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::{Frame, Terminal};

use crate::out;
use accelkit_core::units::utc;
use accelkit_exporter::term::{bar, catch_stop_signals, resized, Input, Key, Screen, STOPPED};

/// Below this size the view cannot be drawn legibly; a one-line message says so instead.
const MIN_WIDTH: u16 = 60;
const MIN_HEIGHT: u16 = 12;
/// Samples kept for the sparklines.
const HISTORY: usize = 60;
/// Width of one core's cell: `" 12 ██████░░  45%"`.
const CORE_CELL: u16 = 17;

pub fn run(
    interval: f64,
    count: Option<u64>,
    json: bool,
    html: bool,
    roots: accelkit_telemetry::Roots,
) -> anyhow::Result<()> {
    // Telemetry only: no compute library, PJRT plugin or Vulkan instance is loaded.
    let mut sampler = Sampler::with_roots(roots);
    let every = Duration::from_secs_f64(interval);
    if html {
        return page(&mut sampler, every, count.unwrap_or(1));
    }
    if json || !std::io::stdout().is_terminal() {
        return lines(&mut sampler, every, count, json);
    }
    tui(&mut sampler, every, count)
}

/// `count` samples, then one HTML page of the last with lines of them all
/// (`accelkit_report::render`'s `watch` document, which `accel.watch()` shows in a notebook).
fn page(s: &mut Sampler, every: Duration, count: u64) -> anyhow::Result<()> {
    let mut samples = Vec::new();
    for i in 0..count {
        let start = Instant::now();
        samples.push(serde_json::from_str::<serde_json::Value>(
            &out::json_string("monitor", &s.sample())?,
        )?);
        if i + 1 < count {
            std::thread::sleep(every.saturating_sub(start.elapsed()));
        }
    }
    out::html("watch", &serde_json::json!({ "samples": samples }))
}

/// One JSON document, or a block of plain text, per sample (`accel mem --watch`'s way).
fn lines(s: &mut Sampler, every: Duration, count: Option<u64>, json: bool) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut n = 0u64;
    loop {
        let start = Instant::now();
        let snap = s.sample();
        if json {
            out::json_line("monitor", &snap)?;
        } else {
            let t = start.duration_since(t0).as_secs_f64();
            out::line(format!("--- t = {t:.1} s, {}", utc(snap.time_unix_s)))?;
            for l in text(&snap) {
                out::line(l)?;
            }
        }
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(every.saturating_sub(start.elapsed()));
    }
}

fn text(s: &Snapshot) -> Vec<String> {
    let h = &s.host;
    let cores: Vec<String> = h
        .cpu_per_core_percent
        .iter()
        .map(|p| format!("{p:.0}"))
        .collect();
    let mut v = match crate::mem::host_failure(s) {
        Some(e) => vec![format!("host:      not read: {}", out::printable(e))],
        None => vec![
            format!(
                "host CPU:  {:.1} % ({} cores: {} %)",
                h.cpu_percent,
                cores.len(),
                cores.join(" ")
            ),
            format!("host RAM:  {}{}", ram(s), rss(s)),
        ],
    };
    for d in &s.devices {
        v.push(
            format!(
            "{} ({}){}: util {}, memory {}, accel holds {}, temperature {}, power {}, clocks {}",
            d.id(),
            out::printable(&d.name),
            state(d),
            pct(d.utilization_percent),
            memory(d),
            human_bytes(d.accel_allocated_bytes),
            opt(d.temperature_c.map(|t| format!("{t:.0}")), " C"),
            power(d),
            clocks(d)
        ) + &crate::mem::invalid_note(d)
                + &out::health_note(d),
        );
        v.extend(out::owners_line(d).map(|o| format!("  {o}")));
        v.extend(processes(d).into_iter().map(|p| format!("  {p}")));
    }
    if s.devices.is_empty() {
        v.push(format!(
            "accelerators: none found ({})",
            crate::mem::why_none(s)
        ));
    }
    v
}

fn opt<T: Display>(v: Option<T>, unit: &str) -> String {
    v.map_or("-".into(), |v| format!("{v}{unit}"))
}

fn pct(v: Option<f64>) -> String {
    opt(v.map(|u| format!("{u:.0}")), " %")
}

/// ` [down: reason]` for a device that is gone, ` [reason]` for one that does not report.
fn state(d: &DeviceLoad) -> String {
    match (&d.status, d.up) {
        (Some(s), false) => format!(" [down: {}]", out::printable(s)),
        (None, false) => " [down]".to_string(),
        (Some(s), true) => format!(" [{}]", out::printable(s)),
        (None, true) => String::new(),
    }
}

fn ram(s: &Snapshot) -> String {
    let m = &s.host.memory;
    let mut r = format!(
        "{} used / {} total, {} available",
        human_bytes(m.used_bytes),
        human_bytes(m.total_bytes),
        human_bytes(m.available_bytes)
    );
    if m.swap_total_bytes > 0 {
        r += &format!(
            "; swap {} / {}",
            human_bytes(m.swap_used_bytes),
            human_bytes(m.swap_total_bytes)
        );
    }
    r
}

fn rss(s: &Snapshot) -> String {
    s.host.process_rss_bytes.map_or(String::new(), |b| {
        format!("; accel itself {} resident", human_bytes(b))
    })
}

fn memory(d: &DeviceLoad) -> String {
    let b = |v: Option<u64>| v.map_or("-".into(), human_bytes);
    format!("{} / {}", b(d.memory_used_bytes), b(d.memory_total_bytes))
}

fn power(d: &DeviceLoad) -> String {
    match (d.power_w, d.power_limit_w) {
        (Some(p), Some(l)) => format!("{p:.0} / {l:.0} W"),
        (p, _) => opt(p.map(|p| format!("{p:.0}")), " W"),
    }
}

fn clocks(d: &DeviceLoad) -> String {
    format!(
        "core {} / memory {}",
        opt(d.clock_core_mhz, " MHz"),
        opt(d.clock_memory_mhz, " MHz")
    )
}

fn processes(d: &DeviceLoad) -> Vec<String> {
    d.processes
        .iter()
        .map(|p| {
            let name = p
                .command
                .as_ref()
                .map_or(String::new(), |c| format!(" {}", out::printable(c)));
            let user = p
                .user
                .as_ref()
                .map_or(String::new(), |u| format!(" ({})", out::printable(u)));
            let held = p.memory_bytes.map_or("-".into(), human_bytes);
            let busy = p
                .busy_percent
                .map_or(String::new(), |b| format!(", {b:.0} % busy"));
            format!(
                "pid {}{name}{user}{} holds {held}{busy}",
                p.pid,
                out::workload_note(p)
            )
        })
        .collect()
}

/// What the screen shows: the latest samples (newest last).
struct View {
    host: String,
    every: Duration,
    samples: u64,
    history: VecDeque<Snapshot>,
}

fn tui(s: &mut Sampler, every: Duration, count: Option<u64>) -> anyhow::Result<()> {
    catch_stop_signals();
    let _screen = Screen::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let mut view = View {
        host: sysinfo::System::host_name().unwrap_or_else(|_| "host".into()),
        every,
        samples: 0,
        history: VecDeque::with_capacity(HISTORY),
    };
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            // --count N: the Nth sample stays on screen for one interval, then we leave.
            if count.is_some_and(|c| view.samples >= c) {
                return Ok(());
            }
            let start = Instant::now();
            if view.history.len() == HISTORY {
                view.history.pop_front();
            }
            view.history.push_back(s.sample());
            view.samples += 1;
            next = start + every;
            term.draw(|f| draw(f, &view))?;
        }
        if STOPPED.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        // Short waits, so a stop signal or a resize is seen within a tenth of a second.
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        match accelkit_exporter::term::wait(wait)? {
            Input::Key(Key::Quit | Key::Esc) | Input::Gone => return Ok(()),
            _ => {}
        }
        if resized(&mut term)? {
            term.draw(|f| draw(f, &view))?;
        }
    }
}

fn draw(f: &mut Frame, v: &View) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: need at least {MIN_WIDTH}x{MIN_HEIGHT}, have {}x{}",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let Some(s) = v.history.back() else { return };
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let header = Line::from(vec![
        Span::styled("accel monitor", bold),
        Span::raw(format!(
            "  {}  {}  every {} s  sample {}  (q quits)",
            v.host,
            utc(s.time_unix_s),
            v.every.as_secs_f64(),
            v.samples
        )),
    ]);
    f.render_widget(Paragraph::new(header), row(area, area.y, 1));

    // The devices' panels take what they need; the cores get the rest (one row at least).
    let heights: Vec<u16> = s.devices.iter().map(panel_height).collect();
    let devices_need = heights.iter().sum::<u16>().max(1);
    let body = area.height - 1;
    let core_room = body.saturating_sub(3 + devices_need).max(1);
    let inner = area.width;
    let mut host = vec![
        Line::from(vec![
            Span::raw("CPU "),
            bar(Some(f64::from(s.host.cpu_percent) / 100.0), 20),
            Span::raw(format!(
                " {:5.1} % of {} cores{}",
                s.host.cpu_percent,
                s.host.cpu_per_core_percent.len(),
                rss(s)
            )),
        ]),
        Line::from(vec![
            Span::raw("RAM "),
            bar(
                ratio(s.host.memory.used_bytes, s.host.memory.total_bytes),
                20,
            ),
            Span::raw(format!(" {}", ram(s))),
        ]),
    ];
    host.extend(cores(&s.host.cpu_per_core_percent, inner, core_room));
    let host_height = (host.len() as u16 + 1).min(body);
    let block = Block::new()
        .borders(Borders::TOP)
        .title(Span::styled(" host ", bold));
    f.render_widget(
        Paragraph::new(host).block(block),
        row(area, area.y + 1, host_height),
    );

    let mut y = area.y + 1 + host_height;
    if s.devices.is_empty() {
        let msg = "no accelerator found by any monitoring interface (NVML, amdgpu/i915/xe sysfs, TPU PCI ids)";
        f.render_widget(Paragraph::new(msg), row(area, y, 1));
    }
    for (i, d) in s.devices.iter().enumerate() {
        let room = area.bottom().saturating_sub(y);
        let rest: u16 = heights[i..].iter().sum();
        if rest > room && heights[i] + 1 > room {
            let more = format!(
                "+{} more devices: enlarge the terminal, or see `accel monitor --json`",
                s.devices.len() - i
            );
            f.render_widget(Paragraph::new(more), row(area, y, room.min(1)));
            break;
        }
        f.render_widget(panel(d, i, v, inner), row(area, y, heights[i]));
        y += heights[i];
    }
}

/// The full-width band of `area` from `y`, `h` rows high, clipped to `area`.
fn row(area: Rect, y: u16, h: u16) -> Rect {
    let y = y.min(area.bottom());
    Rect::new(area.x, y, area.width, h.min(area.bottom() - y))
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// One cell per core in as many rows as fit `max_rows`; past that, one character per core.
fn cores(per_core: &[f32], width: u16, max_rows: u16) -> Vec<Line<'static>> {
    let n = per_core.len();
    let cols = usize::from((width / CORE_CELL).max(1));
    if n.div_ceil(cols) <= usize::from(max_rows) {
        return per_core
            .chunks(cols)
            .enumerate()
            .map(|(r, chunk)| {
                let mut spans = Vec::new();
                for (c, p) in chunk.iter().enumerate() {
                    spans.push(Span::raw(format!("{:>3} ", r * cols + c)));
                    spans.push(bar(Some(f64::from(*p) / 100.0), 8));
                    spans.push(Span::raw(format!(" {p:>3.0}% ")));
                }
                Line::from(spans)
            })
            .collect();
    }
    let per_row = usize::from(width.max(1));
    per_core
        .chunks(per_row)
        .take(usize::from(max_rows))
        .map(|chunk| {
            let spark: String = chunk.iter().map(|p| level(f64::from(*p) / 100.0)).collect();
            Line::raw(spark)
        })
        .collect()
}

/// `▁` to `█` for 0 to 1.
fn level(frac: f64) -> char {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    // NaN stays NaN through clamp, and NaN as usize is 0.
    LEVELS[(frac.clamp(0.0, 1.0) * 7.0).round() as usize]
}

fn panel_height(d: &DeviceLoad) -> u16 {
    1 + 3 + u16::from(!d.processes.is_empty())
}

/// One device: its figures, its history and its processes, under a titled rule.
fn panel<'a>(d: &DeviceLoad, i: usize, v: &View, inner: u16) -> Paragraph<'a> {
    let mine = d
        .accel_device
        .map_or(String::new(), |a| format!("  (this process: {a})"));
    let title = format!(" {}  {}{}{mine} ", d.id(), d.name, state(d));
    let util = d.utilization_percent.map(|u| u / 100.0);
    let mem_frac = d
        .memory_used_bytes
        .zip(d.memory_total_bytes)
        .and_then(|(u, t)| ratio(u, t));
    let mem_pct = mem_frac.map_or(String::new(), |f| format!(" ({:.0} %)", f * 100.0));
    let mut lines = vec![
        Line::from(vec![
            Span::raw("util "),
            bar(util, 12),
            Span::raw(format!(" {:>5}   mem ", pct(d.utilization_percent))),
            bar(mem_frac, 12),
            Span::raw(format!(" {}{mem_pct}", memory(d))),
        ]),
        Line::raw(format!(
            "temp {}   power {}   clocks {}   accel holds {}",
            opt(d.temperature_c.map(|t| format!("{t:.0}")), " C"),
            power(d),
            clocks(d),
            human_bytes(d.accel_allocated_bytes)
        )),
        history(d, i, v, inner),
    ];
    if let Some(o) = out::owners_line(d) {
        lines.push(Line::raw(o));
    }
    if !d.processes.is_empty() {
        lines.push(Line::raw(format!("procs {}", processes(d).join(", "))));
    }
    let block = Block::new().borders(Borders::TOP).title(Span::styled(
        title,
        Style::new().add_modifier(Modifier::BOLD),
    ));
    Paragraph::new(lines).block(block)
}

/// The sparkline of device `i`'s utilisation, or of its memory in use where utilisation is
/// not reported, or of what accel holds on it where neither is.
fn history(d: &DeviceLoad, i: usize, v: &View, inner: u16) -> Line<'static> {
    type Pick = fn(&DeviceLoad) -> Option<u64>;
    let (label, pick, max): (&str, Pick, Option<u64>) = if d.utilization_percent.is_some() {
        (
            "util %",
            |d| d.utilization_percent.map(|u| u.round() as u64),
            Some(100),
        )
    } else if d.memory_used_bytes.is_some() {
        ("mem used", |d| d.memory_used_bytes, d.memory_total_bytes)
    } else {
        ("accel holds", |d| Some(d.accel_allocated_bytes), None)
    };
    let width = usize::from(inner.saturating_sub(21)).min(HISTORY);
    let values: Vec<Option<u64>> = v
        .history
        .iter()
        .map(|s| s.devices.get(i).and_then(pick))
        .collect();
    let values = &values[values.len().saturating_sub(width)..];
    let top = max
        .filter(|m| *m > 0)
        .or_else(|| values.iter().flatten().max().copied())
        .unwrap_or(1)
        .max(1);
    let spark: String = values
        .iter()
        .map(|x| x.map_or(' ', |x| level(x as f64 / top as f64)))
        .collect();
    Line::from(vec![
        Span::raw(format!("{label:<11} last {:>2} ", values.len())),
        Span::styled(spark, Style::new().fg(Color::Cyan)),
    ])
}
