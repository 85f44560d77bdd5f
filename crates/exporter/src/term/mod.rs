//! The terminal side of the full-screen views (`accel monitor`, on one machine and over a
//! fleet): the raw-mode alternate screen and its restoring, the stop signals, the keys
//! (read from the terminal directly: [`wait`]) and the load bar both views draw.

mod keys;

use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::style::{Color, Style};
use ratatui::text::Span;
use ratatui::Terminal;

pub use keys::{wait, Input, Key};

/// Whether the terminal is in raw mode on the alternate screen, for [`restore`].
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Raw mode, the alternate screen and a hidden cursor while it lives; all undone when it is
/// dropped (quit, error) and, through the panic hook, on a panic (whose hook exits without
/// unwinding, so no Drop would run).
pub struct Screen;

impl Screen {
    /// Raw mode, the alternate screen and a hidden cursor, until the value is dropped.
    pub fn enter() -> anyhow::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info)
        }));
        ACTIVE.store(true, Ordering::SeqCst);
        // Made before the first change, so that a failure half-way undoes the other half.
        let screen = Screen;
        terminal::enable_raw_mode()?;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves the alternate screen, turns raw mode off and shows the cursor; once.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        // Cleared first: a terminal resized meanwhile may copy alternate-screen lines back
        // (tmux does).
        let _ = execute!(
            std::io::stdout(),
            terminal::Clear(terminal::ClearType::All),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    }
}

/// Set by SIGTERM, SIGHUP, SIGINT or SIGQUIT (a `kill`, a closed terminal): the view stops at its next poll
/// and the terminal is restored, as on `q`.
pub static STOPPED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOPPED.store(true, Ordering::Relaxed);
}

/// Routes SIGTERM, SIGHUP, SIGINT and SIGQUIT to [`STOPPED`] for as long as the view is up.
pub fn catch_stop_signals() {
    #[cfg(unix)]
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only stores to an atomic,
        // which is async-signal-safe; replacing the default disposition of these signals
        // affects only this process, which then quits through its normal path.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Follows the terminal's size; true when it changed (the view must be drawn again).
pub fn resized(term: &mut Terminal<CrosstermBackend<std::io::Stdout>>) -> anyhow::Result<bool> {
    let before = term.get_frame().area();
    term.autoresize()?;
    Ok(term.get_frame().area() != before)
}

/// A `width`-cell bar, coloured by how full it is; dots where the value is unknown.
pub fn bar(frac: Option<f64>, width: u16) -> Span<'static> {
    let w = usize::from(width);
    let Some(frac) = frac.filter(|f| f.is_finite()) else {
        return Span::styled("·".repeat(w), Style::new().fg(Color::DarkGray));
    };
    let frac = frac.clamp(0.0, 1.0);
    let full = (frac * w as f64).round() as usize;
    let color = if frac < 0.6 {
        Color::Green
    } else if frac < 0.85 {
        Color::Yellow
    } else {
        Color::Red
    };
    Span::styled(
        format!("{}{}", "█".repeat(full), "░".repeat(w - full)),
        Style::new().fg(color),
    )
}
