//! Logging set-up shared by every role: readable text or JSON lines on stderr, filtered by
//! `[logging] filter`, and the spans that let one trajectory be followed across processes.
//!
//! ```text
//!  role span { role, run_id }                       entered around a role's top-level future
//!    └─ trajectory span { run_id, trajectory_id }   entered wherever a trajectory is handled
//!         └─ event  ──►  text: "role{role=actor run_id=r}:trajectory{…trajectory_id=ab12…}: msg"
//!                        json: {"fields":{…},"span":{…"trajectory_id":"ab12…"},"spans":[…]}
//! ```
//!
//! Grepping every role's logs for a trajectory id shows its path from actor to learner. Spans are
//! created at the ERROR level so that a strict filter (`warn`) never drops them: a filtered-out
//! span would take its fields off every event logged inside it.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::config::{ConfigError, LogFormat};
use crate::error::Result;
use crate::wire::{RunId, TrajectoryId};

/// Set once the process's subscriber is installed; later [`init`] calls return at once.
static INSTALLED: OnceLock<()> = OnceLock::new();

/// Installs the process-wide subscriber: text (ANSI colours only on a terminal) or JSON lines,
/// to stderr, filtered by `filter` (`info`, `info,protocol=debug`, …).
///
/// Idempotent: a second call, or a call after something else installed a subscriber, is a
/// no-op. A malformed filter is an error naming `logging.filter`. `role` and `run_id` go on the
/// first (debug) line; wrap a role's work in [`role_span`] so that every line carries them.
pub fn init(format: LogFormat, filter: &str, role: &str, run_id: &RunId) -> Result<()> {
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    let filter = parse_filter(filter)?;
    let installed = match format {
        LogFormat::Text => tracing::subscriber::set_global_default(text_subscriber(
            filter,
            std::io::stderr,
            std::io::stderr().is_terminal(),
        )),
        LogFormat::Json => tracing::subscriber::set_global_default(json_subscriber(filter, std::io::stderr)),
    };
    if installed.is_ok() {
        let _ = INSTALLED.set(());
        tracing::debug!(role, run_id = %run_id, ?format, "logging started");
    }
    Ok(())
}

/// Parses a tracing filter, naming the config key when it is malformed.
pub fn parse_filter(filter: &str) -> Result<EnvFilter> {
    EnvFilter::try_new(filter).map_err(|e| {
        ConfigError::Invalid {
            key: "logging.filter".into(),
            expected: "a tracing filter such as `info` or `info,protocol=debug`".into(),
            found: format!("{filter:?} ({e})"),
        }
        .into()
    })
}

/// The readable subscriber `init` installs for [`LogFormat::Text`], writing to `writer`.
pub fn text_subscriber<W>(filter: EnvFilter, writer: W, ansi: bool) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer).finish()
}

/// The JSON-lines subscriber `init` installs for [`LogFormat::Json`], writing to `writer`: each
/// line carries the current span's fields and the list of enclosing spans.
pub fn json_subscriber<W>(filter: EnvFilter, writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// The span a role runs in (`actor`, `rrm-worker`, `learner`, `doctor`, …): every line logged
/// inside it carries `role` and `run_id`. Spawned tasks leave it unless they are instrumented
/// with `.in_current_span()`.
pub fn role_span(role: &str, run_id: &RunId) -> tracing::Span {
    tracing::error_span!("role", role, run_id = %run_id)
}

/// The span in which one trajectory is handled, in whichever role: grep any role's logs for the
/// id to follow the trajectory from actor to learner.
pub fn trajectory_span(run_id: &RunId, trajectory_id: &TrajectoryId) -> tracing::Span {
    tracing::error_span!("trajectory", run_id = %run_id, trajectory_id = %trajectory_id)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A `MakeWriter` that appends to a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn json_event_inside_a_trajectory_span_carries_its_id() {
        let buffer = Buffer::default();
        let run = RunId::new("exp-1").unwrap();
        let id = TrajectoryId(0xfeed);
        let subscriber = json_subscriber(parse_filter("info").unwrap(), buffer.clone());
        tracing::subscriber::with_default(subscriber, || {
            let _role = role_span("actor", &run).entered();
            let _t = trajectory_span(&run, &id).entered();
            tracing::info!(reward = 1.0, "trajectory published");
        });
        let out = buffer.text();
        let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(line["span"]["trajectory_id"], id.to_string(), "{out}");
        assert_eq!(line["span"]["run_id"], "exp-1", "{out}");
        assert_eq!(line["spans"][0]["role"], "actor", "{out}");
        assert_eq!(line["fields"]["message"], "trajectory published", "{out}");
    }

    #[test]
    fn spans_survive_a_strict_filter() {
        let buffer = Buffer::default();
        let run = RunId::new("r").unwrap();
        let subscriber = text_subscriber(parse_filter("warn").unwrap(), buffer.clone(), false);
        tracing::subscriber::with_default(subscriber, || {
            let _t = trajectory_span(&run, &TrajectoryId(7)).entered();
            tracing::info!("dropped by the filter");
            tracing::warn!("kept");
        });
        let out = buffer.text();
        assert!(!out.contains("dropped"), "{out}");
        assert!(out.contains("kept") && out.contains(&TrajectoryId(7).to_string()), "{out}");
    }

    #[test]
    fn a_malformed_filter_names_the_key() {
        let err = parse_filter("info,protocol=loudest").unwrap_err().to_string();
        assert!(err.contains("logging.filter") && err.contains("loudest"), "{err}");
    }
}
