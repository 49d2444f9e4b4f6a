//! Progress of long commands: an indicatif bar on a terminal, and plain log lines on stderr
//! when stderr is a file or a pipe (CI logs, `nohup`, `kubectl logs`), where a bar draws
//! nothing: a line at the first update, then at most one every [`LINE_EVERY`], and one at the end.
//!
//! ```text
//!  terminal:   cold start (SFT) ██████░░░░ 120/300 updates loss 0.812 [00:42]
//!  otherwise:  cold start (SFT): 120/300 updates, loss 0.812 [42 s]
//! ```

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

/// How often a progress line is printed when stderr is not a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(15);

/// A progress bar, or progress lines; clones share one.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    lines: Option<Arc<Lines>>,
}

/// The state of progress lines.
struct Lines {
    label: String,
    unit: String,
    len: u64,
    started: Instant,
    every: Duration,
    state: Mutex<LineState>,
}

#[derive(Default)]
struct LineState {
    pos: u64,
    msg: String,
    printed: Option<Instant>,
}

impl Progress {
    /// Progress out of `len` `unit`s (`updates`, `s`), labelled `label`; on a terminal a bar
    /// drawn with `template` (indicatif's syntax, `{bar}`, `{pos}`, `{len}`, `{msg}`…).
    pub fn new(len: u64, label: &str, unit: &str, template: &str) -> Result<Self> {
        Self::with(len, label, unit, template, std::io::stderr().is_terminal(), LINE_EVERY)
    }

    /// Progress in seconds of a phase of `seconds`.
    pub fn seconds(seconds: f64, label: &str) -> Result<Self> {
        let template = format!("{label} {{bar:30}} {{pos}}/{{len}} s {{msg}} [{{elapsed}}]");
        Self::new(seconds.ceil().max(1.0) as u64, label, "s", &template)
    }

    fn with(len: u64, label: &str, unit: &str, template: &str, terminal: bool, every: Duration) -> Result<Self> {
        if terminal {
            let bar = ProgressBar::new(len);
            bar.set_style(ProgressStyle::with_template(template)?);
            return Ok(Self { bar, lines: None });
        }
        let lines = Lines {
            label: label.to_string(),
            unit: unit.to_string(),
            len,
            started: Instant::now(),
            every,
            state: Mutex::default(),
        };
        Ok(Self { bar: ProgressBar::hidden(), lines: Some(Arc::new(lines)) })
    }

    /// Moves to `pos`.
    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        self.update(|s| s.pos = pos);
    }

    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        self.update(|s| s.pos += n);
    }

    /// Replaces the message.
    pub fn set_message(&self, msg: impl Into<String>) {
        let msg = msg.into();
        self.bar.set_message(msg.clone());
        self.update(|s| s.msg = msg);
    }

    /// Moves to `pos` and replaces the message at once: a progress line printed for the move
    /// carries the new message.
    pub fn set(&self, pos: u64, msg: impl Into<String>) {
        let msg = msg.into();
        self.bar.set_message(msg.clone());
        self.bar.set_position(pos);
        self.update(|s| (s.pos, s.msg) = (pos, msg));
    }

    /// Prints a line above the bar (or among the lines).
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.lines {
            Some(_) => eprintln!("{}", line.as_ref()),
            None => self.bar.println(line),
        }
    }

    /// Redraws the bar every `interval` even without updates (its clock moves); lines need none.
    pub fn enable_steady_tick(&self, interval: Duration) {
        if self.lines.is_none() {
            self.bar.enable_steady_tick(interval);
        }
    }

    /// Ends the bar (a last line when printing lines).
    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
        if let Some(lines) = &self.lines {
            let state = lines.state.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("{} (done)", lines.line(&state));
        }
    }

    fn update(&self, change: impl FnOnce(&mut LineState)) {
        let Some(lines) = &self.lines else { return };
        let mut state = lines.state.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut state);
        if state.printed.is_none_or(|t| t.elapsed() >= lines.every) {
            state.printed = Some(Instant::now());
            eprintln!("{}", lines.line(&state));
        }
    }

    /// The line that would be printed now, when printing lines.
    #[cfg(test)]
    fn current_line(&self) -> Option<String> {
        let lines = self.lines.as_ref()?;
        let state = lines.state.lock().unwrap_or_else(|e| e.into_inner());
        Some(lines.line(&state))
    }
}

impl Lines {
    fn line(&self, s: &LineState) -> String {
        let msg = if s.msg.is_empty() { String::new() } else { format!(", {}", s.msg) };
        format!(
            "{}: {}/{} {}{msg} [{:.0} s]",
            self.label,
            s.pos,
            self.len,
            self.unit,
            self.started.elapsed().as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_terminal_progress_is_a_line_that_says_where_it_is() {
        let p = Progress::with(300, "cold start (SFT)", "updates", "{bar}", false, Duration::from_secs(3600)).unwrap();
        p.set_position(120);
        p.set_message("loss 0.812");
        let line = p.current_line().unwrap();
        assert!(line.starts_with("cold start (SFT): 120/300 updates, loss 0.812 ["), "{line}");
        p.inc(5);
        assert!(p.current_line().unwrap().contains("125/300"));
        p.set(130, "loss 0.700");
        assert!(p.current_line().unwrap().starts_with("cold start (SFT): 130/300 updates, loss 0.700 ["));
        // Only the first update printed (the interval is an hour); the state still follows.
        assert!(p.lines.as_ref().unwrap().state.lock().unwrap().printed.is_some());
        let bar = Progress::with(10, "x", "s", "{bar}", true, LINE_EVERY).unwrap();
        assert!(bar.current_line().is_none(), "a terminal gets the bar");
    }
}
