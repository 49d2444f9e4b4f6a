//! TensorBoard event files of scalars, so `tensorboard --logdir runs/` shows a run's learning
//! curves: the learner writes every number of its update records (`metrics.jsonl`) into
//! `<run.dir>/<run.id>/tb/`, one TensorBoard run per Reagent run.
//!
//! ```text
//!  UpdateRecord ─► scalars_of (every number, by field name) ─► event::scalars (protobuf)
//!        ─► record::frame (TFRecord, masked CRC-32C) ─► tb/events.out.tfevents.<secs>.<host>.<pid>.<n>
//! ```
//!
//! Written here rather than by a crate: the Rust crates for this are unmaintained
//! (tensorboard-rs, last released 2022, pulls protobuf 2 and image) or tied to another project
//! (syntaxdot-summary); the format for scalars is a few dozen lines.
//! Each process writes its own file (a restarted learner starts a new one beside the old);
//! TensorBoard reads all files of a directory as one run.

pub mod event;
pub mod record;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The folder, inside a run's directory, that holds its event files.
pub const DIR: &str = "tb";

/// One open event file.
#[derive(Debug)]
pub struct ScalarWriter {
    file: File,
    path: PathBuf,
}

impl ScalarWriter {
    /// Creates `dir` if needed and a new event file in it, headed by the format version.
    pub fn create(dir: &Path) -> std::io::Result<ScalarWriter> {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(dir)?;
        let now = now_seconds();
        let name = format!(
            "events.out.tfevents.{:010}.{}.{}.{}",
            now as u64,
            host(),
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        let mut writer = ScalarWriter { file, path };
        writer.append(&event::file_version(now))?;
        Ok(writer)
    }

    /// The event file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event with `scalars` at `step` (values are stored as f32, as TensorBoard's
    /// `simple_value` is) and flushes it, so a reader sees every update as it lands.
    pub fn write(&mut self, step: u64, wall_time: f64, scalars: &[(String, f64)]) -> std::io::Result<()> {
        let values: Vec<(String, f32)> = scalars.iter().map(|(t, v)| (t.clone(), *v as f32)).collect();
        self.append(&event::scalars(wall_time, step as i64, &values))
    }

    fn append(&mut self, event: &[u8]) -> std::io::Result<()> {
        self.file.write_all(&record::frame(event))?;
        self.file.flush()
    }
}

/// An event file opened on the first write, so a learner that never updates leaves none.
#[derive(Debug)]
pub struct Board {
    dir: PathBuf,
    writer: Option<ScalarWriter>,
}

impl Board {
    /// A board writing into `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Board {
        Board { dir: dir.into(), writer: None }
    }

    /// Writes `scalars` at `step`; `wall_ms` is milliseconds since the Unix epoch.
    pub fn write(&mut self, step: u64, wall_ms: u64, scalars: &[(String, f64)]) -> std::io::Result<()> {
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(ScalarWriter::create(&self.dir)?),
        };
        writer.write(step, wall_ms as f64 / 1000.0, scalars)
    }

    /// The folder the event files go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Every number in a JSON object as (tag, value): a field by its name, a number inside an
/// array field as `name/index`. Strings, booleans, nulls (absent figures) and the fields
/// named in `skip` are left out.
pub fn scalars_of(object: &serde_json::Value, skip: &[&str]) -> Vec<(String, f64)> {
    let Some(fields) = object.as_object() else { return Vec::new() };
    let mut out = Vec::new();
    for (name, value) in fields.iter().filter(|(name, _)| !skip.contains(&name.as_str())) {
        match value {
            serde_json::Value::Number(n) => out.extend(n.as_f64().map(|v| (name.clone(), v))),
            serde_json::Value::Array(items) => {
                let numbers = items.iter().enumerate().filter_map(|(k, v)| v.as_f64().map(|v| (k, v)));
                out.extend(numbers.map(|(k, v)| (format!("{name}/{k}"), v)));
            }
            _ => {}
        }
    }
    out
}

fn now_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The machine's name for the file name (as TensorFlow's writers put it there), letters,
/// digits, `-` and `.` only; `localhost` when it cannot be read.
fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = name.trim().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').collect();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_become_scalars_by_field_name() {
        let v = serde_json::json!({
            "step": 3, "loss": 0.5, "score_mean": null, "counts": [4, 0, 1], "name": "x", "ok": true
        });
        let got = scalars_of(&v, &["step"]);
        let want = [("counts/0", 4.0), ("counts/1", 0.0), ("counts/2", 1.0), ("loss", 0.5)];
        assert_eq!(got, want.map(|(t, v)| (t.to_string(), v)));
        assert!(scalars_of(&serde_json::json!([1, 2]), &[]).is_empty());
    }

    #[test]
    fn a_board_opens_its_file_on_the_first_write_and_frames_every_event() {
        let dir = tempfile::tempdir().unwrap();
        let mut board = Board::new(dir.path().join("tb"));
        assert!(!board.dir().exists(), "nothing before the first write");
        board.write(1, 1_700_000_000_000, &[("loss".into(), 0.5)]).unwrap();
        board.write(2, 1_700_000_001_000, &[("loss".into(), 0.25)]).unwrap();
        let files: Vec<_> = std::fs::read_dir(board.dir()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1);
        assert!(files[0].file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."));
        let bytes = std::fs::read(&files[0]).unwrap();
        let events = record::unframe(&bytes).unwrap();
        assert_eq!(events.len(), 3, "the version, then one event per write");
        assert_eq!(events[0], event::file_version(f64::from_le_bytes(events[0][1..9].try_into().unwrap())));
        assert_eq!(events[2], event::scalars(1_700_000_001.0, 2, &[("loss".into(), 0.25)]));
        // A second writer in the same folder gets a file of its own.
        let other = ScalarWriter::create(board.dir()).unwrap();
        assert_ne!(other.path(), files[0]);
    }
}
