//! Drawing the fleet: plain lines (piped) and the full-screen table with a drill-down into one
//! machine (arrows or j/k move, Enter opens, Esc goes back, q quits).

use std::time::{Duration, Instant};

use accelkit_core::units::human_bytes;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::{Frame, Terminal};

use super::rows::{HostRow, Round, MAX_DEVICES_PER_HOST};
use super::{Options, Poller};
use crate::term::{bar, catch_stop_signals, resized, Input, Key, Screen, STOPPED};
use accelkit_core::units::utc;

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0} %"))
}

fn mem(used: Option<u64>, total: Option<u64>) -> String {
    match (used, total) {
        (Some(u), Some(t)) => format!("{} / {}", human_bytes(u), human_bytes(t)),
        (None, Some(t)) => format!("- / {}", human_bytes(t)),
        _ => "-".into(),
    }
}

fn ago(since: Option<f64>, now: f64) -> String {
    since.map_or(String::new(), |s| {
        let d = (now - s).max(0.0);
        if d < 120.0 {
            format!(" {d:.0}s")
        } else if d < 7200.0 {
            format!(" {:.0}m", d / 60.0)
        } else {
            format!(" {:.1}h", d / 3600.0)
        }
    })
}

/// One line per machine, then the totals.
fn host_line(h: &HostRow, now: f64) -> String {
    format!(
        "{:<24} {:<10} {:>3}/{:<3} {:>6} {:>25} {:>6} {:>7} {:>6}",
        h.host,
        format!("{}{}", h.state, ago(h.since_unix_s, now)),
        h.devices_up,
        h.devices,
        pct(h.utilization_percent),
        mem(h.memory_used_bytes, h.memory_total_bytes),
        h.temperature_max_c
            .map_or("-".into(), |t| format!("{t:.0} C")),
        h.power_w
            .map_or("-".into(), |p| format!("{:.0} W", p.max(0.0) + 0.0)),
        h.cpu_percent.map_or("-".into(), |c| format!("{c:.0} %")),
    )
}

fn header() -> String {
    format!(
        "{:<24} {:<10} {:>7} {:>6} {:>25} {:>6} {:>7} {:>6}",
        "host", "state", "devices", "util", "device memory", "temp", "power", "cpu"
    )
}

fn totals_line(r: &Round) -> String {
    let t = &r.totals;
    format!(
        "fleet: {}/{} hosts up, {}/{} devices up, util {}, memory {} / {}, power {:.0} W",
        t.hosts_up,
        t.hosts,
        t.devices_up,
        t.devices,
        pct(t.utilization_percent),
        human_bytes(t.memory_used_bytes),
        human_bytes(t.memory_total_bytes),
        t.power_w.max(0.0) + 0.0
    )
}

/// What a host listed and the fleet does not show, in words.
fn not_shown(h: &HostRow) -> Option<String> {
    (h.devices_not_shown > 0).then(|| {
        format!(
            "{} more devices in its answer not shown (a row keeps at most {})",
            h.devices_not_shown, MAX_DEVICES_PER_HOST
        )
    })
}

/// Plain text of one round (piped output).
fn text(r: &Round) -> Vec<String> {
    let mut v = vec![
        format!("--- {} ({})", utc(r.time_unix_s), r.source),
        header(),
    ];
    for h in &r.hosts {
        v.push(host_line(h, r.time_unix_s));
        if let Some(e) = &h.error {
            v.push(format!("  {e}"));
        }
        if let Some(n) = not_shown(h) {
            v.push(format!("  {n}"));
        }
    }
    v.push(totals_line(r));
    v
}

struct State {
    round: Option<Round>,
    selected: usize,
    open: bool,
    every: Duration,
    rounds: u64,
}

/// The full-screen view; `next_round` polls every host once (it runs on its own thread).
fn tui(
    mut next_round: impl FnMut() -> anyhow::Result<Round> + Send,
    every: Duration,
    count: Option<u64>,
) -> anyhow::Result<()> {
    catch_stop_signals();
    let _screen = Screen::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let mut st = State {
        round: None,
        selected: 0,
        open: false,
        every,
        rounds: 0,
    };
    // Rounds run on their own thread, so keys and redraws never wait on a slow host.
    let (tx, rx) = std::sync::mpsc::channel::<anyhow::Result<Round>>();
    let (ask_tx, ask_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        scope.spawn(move || {
            while ask_rx.recv().is_ok() {
                if tx.send(next_round()).is_err() {
                    return;
                }
            }
        });
        let _ = ask_tx.send(());
        let mut next = Instant::now() + every;
        let mut waiting = true;
        let result = loop {
            if let Ok(r) = rx.try_recv() {
                waiting = false;
                match r {
                    Ok(r) => {
                        st.round = Some(r);
                        st.rounds += 1;
                    }
                    Err(e) => break Err(e),
                }
                term.draw(|f| draw(f, &st))?;
            }
            if !waiting && Instant::now() >= next {
                if count.is_some_and(|c| st.rounds >= c) {
                    break Ok(());
                }
                next = Instant::now() + every;
                waiting = ask_tx.send(()).is_ok();
            }
            if STOPPED.load(std::sync::atomic::Ordering::Relaxed) {
                break Ok(());
            }
            let n = st.round.as_ref().map_or(0, |r| r.hosts.len());
            let key = match crate::term::wait(Duration::from_millis(50))? {
                Input::Gone => break Ok(()),
                Input::Key(k) => Some(k),
                Input::Nothing => None,
            };
            match key {
                Some(Key::Esc) if st.open => st.open = false,
                Some(Key::Quit | Key::Esc) => break Ok(()),
                Some(Key::Down) if n > 0 => st.selected = (st.selected + 1).min(n - 1),
                Some(Key::Up) => st.selected = st.selected.saturating_sub(1),
                Some(Key::Enter) if n > 0 => st.open = true,
                _ => {}
            }
            if key.is_some() || resized(&mut term)? {
                term.draw(|f| draw(f, &st))?;
            }
        };
        drop(ask_tx);
        result
    })
}

fn draw(f: &mut Frame, st: &State) {
    let area = f.area();
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let Some(r) = &st.round else {
        f.render_widget(Paragraph::new("polling the hosts..."), area);
        return;
    };
    let mut lines = vec![Line::from(vec![
        Span::styled("accel monitor (fleet)", bold),
        Span::raw(format!(
            "  {}  from {}  every {} s  round {}  (arrows, Enter, Esc; q quits)",
            utc(r.time_unix_s),
            r.source,
            st.every.as_secs_f64(),
            st.rounds
        )),
    ])];
    lines.push(Line::raw(totals_line(r)));
    let sel = st.selected.min(r.hosts.len().saturating_sub(1));
    if st.open {
        if let Some(h) = r.hosts.get(sel) {
            lines.push(Line::styled(
                format!(
                    " {}  {}{}{}",
                    h.host,
                    h.state,
                    ago(h.since_unix_s, r.time_unix_s),
                    h.hostname
                        .as_ref()
                        .map_or(String::new(), |n| format!("  ({n})"))
                ),
                bold,
            ));
            if let Some(e) = &h.error {
                lines.push(Line::raw(format!(" {e}")));
            }
            lines.push(Line::raw(format!(
                " host CPU {}",
                h.cpu_percent.map_or("-".into(), |c| format!("{c:.0} %"))
            )));
            for d in &h.device_rows {
                let frac = d
                    .memory_used_bytes
                    .zip(d.memory_total_bytes)
                    .filter(|(_, t)| *t > 0)
                    .map(|(u, t)| u as f64 / t as f64);
                lines.push(Line::from(vec![
                    Span::raw(format!(" {:<14} {:<22} ", d.device, d.name)),
                    Span::raw(if d.up { "up   " } else { "DOWN " }),
                    bar(d.utilization_percent.map(|u| u / 100.0), 10),
                    Span::raw(format!(" {:>5}  mem ", pct(d.utilization_percent))),
                    bar(frac, 10),
                    Span::raw(format!(
                        " {}  {}  {}{}",
                        mem(d.memory_used_bytes, d.memory_total_bytes),
                        d.temperature_c.map_or("-".into(), |t| format!("{t:.0} C")),
                        d.power_w
                            .map_or("-".into(), |p| format!("{:.0} W", p.max(0.0) + 0.0)),
                        d.status
                            .as_ref()
                            .map_or(String::new(), |s| format!("  [{s}]"))
                    )),
                ]));
            }
            if let Some(n) = not_shown(h) {
                lines.push(Line::raw(format!(" {n}")));
            }
        }
    } else {
        lines.push(Line::styled(header(), bold));
        for (i, h) in r.hosts.iter().enumerate() {
            let color = match h.state {
                "up" => Color::Reset,
                "stale" => Color::Yellow,
                _ => Color::Red,
            };
            let mut style = Style::new().fg(color);
            if i == sel {
                style = style.add_modifier(Modifier::REVERSED);
            }
            lines.push(Line::styled(host_line(h, r.time_unix_s), style));
            if let Some(e) = &h.error {
                lines.push(Line::styled(
                    format!("  {e}"),
                    Style::new().fg(Color::DarkGray),
                ));
            }
        }
    }
    let h = (lines.len() as u16).min(area.height);
    f.render_widget(
        Paragraph::new(lines),
        Rect::new(area.x, area.y, area.width, h),
    );
}

/// `accel monitor` over a fleet.
pub fn run(o: &Options, interval: f64, count: Option<u64>, json: bool) -> anyhow::Result<()> {
    let mut p = Poller::new(o, interval)?;
    let every = Duration::from_secs_f64(interval);
    use std::io::IsTerminal;
    if json || !std::io::stdout().is_terminal() {
        let mut n = 0u64;
        loop {
            let start = Instant::now();
            let r = p.round()?;
            if json {
                crate::out::json_line("fleet", &r)?;
            } else {
                for l in text(&r) {
                    crate::out::line(l)?;
                }
            }
            n += 1;
            if count.is_some_and(|c| n >= c) {
                return Ok(());
            }
            std::thread::sleep(every.saturating_sub(start.elapsed()));
        }
    }
    tui(move || p.round(), every, count)
}
