//! The finished runs of a comparison, kept on disk so that a killed `reagent experiment modes`
//! (hours on a CPU) continues where it was: the same command again skips every run it finds.
//!
//! ```text
//!  <out>/runs.jsonl   one line per finished run:
//!                     {"key": <sha256>, "weights": <weights_hash>, "result": RunResult}
//!  key = sha256(the cold start's weights, the run's settings as trained — arm, seed, budget —,
//!               the held-out evaluation's settings)
//! ```
//!
//! A run is reused only under the same key, so changed settings or another cold start run
//! afresh; a line cut short by a kill is ignored (that run is redone). The line also names the
//! cold start's [`weights_hash`] (lines written before 2026-12-07 do not), so that a comparison
//! that reuses nothing can say whether the file's runs came from other weights — a cold start
//! remade on another CPU model differs in its last bits ([`StartCounts`]).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use policy::LoadedModel;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tch::Kind;

use super::RunResult;
use crate::error::{LearnerError, Result};

/// One line of the file.
#[derive(Serialize, Deserialize)]
struct Line {
    key: String,
    /// The cold start's [`weights_hash`]; absent from lines written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weights: Option<String>,
    result: RunResult,
}

/// The file's runs by the cold start they were kept from, against the weights of this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StartCounts {
    /// Runs kept from the same weights.
    pub same: usize,
    /// Runs kept from other weights.
    pub other: usize,
    /// Runs whose line does not say (written before the weights were recorded).
    pub unrecorded: usize,
}

/// The runs already finished, by key; new ones are appended as they finish.
#[derive(Debug)]
pub struct RunCache {
    path: PathBuf,
    file: File,
    done: HashMap<String, (Option<String>, RunResult)>,
}

impl RunCache {
    /// Opens (or creates) `path` and reads the runs in it.
    pub fn open(path: &Path) -> Result<Self> {
        let mut done = HashMap::new();
        let mut complete = 0;
        match std::fs::read_to_string(path) {
            Ok(text) => {
                // Everything up to the last newline; a torn last line (its run is redone) is cut
                // off, so that the next line appended starts a line of its own.
                complete = text.rfind('\n').map_or(0, |i| i + 1);
                for line in text[..complete].lines() {
                    if let Ok(Line { key, weights, result }) = serde_json::from_str::<Line>(line) {
                        done.insert(key, (weights, result));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LearnerError::io(path, e)),
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LearnerError::io(dir, e))?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|e| LearnerError::io(path, e))?;
        file.set_len(complete as u64).map_err(|e| LearnerError::io(path, e))?;
        Ok(Self { path: path.to_path_buf(), file, done })
    }

    /// The finished run of `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<&RunResult> {
        self.done.get(key).map(|(_, result)| result)
    }

    /// The file's runs counted by whether they were kept from `weights` (a [`weights_hash`]).
    pub fn starts(&self, weights: &str) -> StartCounts {
        let mut counts = StartCounts::default();
        for (kept_from, _) in self.done.values() {
            match kept_from {
                Some(w) if w == weights => counts.same += 1,
                Some(_) => counts.other += 1,
                None => counts.unrecorded += 1,
            }
        }
        counts
    }

    /// How many finished runs the file holds.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Appends a finished run of the cold start `weights` (flushed and synced before returning).
    pub fn record(&mut self, key: &str, weights: &str, result: &RunResult) -> Result<()> {
        let weights = Some(weights.to_string());
        let line =
            serde_json::to_string(&Line { key: key.to_string(), weights: weights.clone(), result: result.clone() })
                .map_err(|e| LearnerError::io(&self.path, std::io::Error::other(e.to_string())))?;
        writeln!(self.file, "{line}")
            .and_then(|()| self.file.sync_data())
            .map_err(|e| LearnerError::io(&self.path, e))?;
        self.done.insert(key.to_string(), (weights, result.clone()));
        Ok(())
    }
}

/// The hash of the cold start's weights (every variable, by name): computed once per comparison,
/// the part of every [`run_key`] that does not change from run to run.
pub fn weights_hash(start: &LoadedModel) -> Result<String> {
    let mut hasher = Sha256::new();
    let vars = start.vs.variables();
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let var = &vars[name];
        // The kind joins the key when it is not f32 (a bf16 run on CUDA is another run); f32
        // keys stay as they were, so runs recorded before still count.
        if var.kind() != Kind::Float {
            hasher.update(format!("{:?}", var.kind()).as_bytes());
        }
        let values = Vec::<f32>::try_from(var.to_kind(Kind::Float).to_device(tch::Device::Cpu).flatten(0, -1))?;
        hasher.update(name.as_bytes());
        hasher.update((values.len() as u64).to_le_bytes());
        for v in values {
            hasher.update(v.to_le_bytes());
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The key of one run: the cold start's [`weights_hash`], then `settings` (a canonical text of
/// everything else that decides the run's result).
pub fn run_key(weights: &str, settings: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(weights.as_bytes());
    hasher.update(settings.as_bytes());
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]
    use super::*;

    fn result(seed: u64) -> RunResult {
        RunResult {
            arm: "outcome".into(),
            seed,
            greedy: vec![1.0, 0.0],
            sampled: vec![0.5, 0.25],
            greedy_rate: 0.5,
            sampled_rate: 0.375,
            channel_points: 0.0,
            generated_tokens: 100,
            groups: 2,
            curve: vec![(0, 0.5)],
            train_seconds: 1.0,
            steps_seconds: 1.0,
            generation_seconds: 0.5,
            refined_attempts: 0,
            refined_solved: 0,
            updates: 2,
        }
    }

    /// A line kept before the weights were recorded still loads (its run is reused under its
    /// key) and counts as not naming its cold start; a new line names it, and survives a reopen.
    #[test]
    fn lines_name_their_cold_start_and_older_lines_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let old = serde_json::json!({"key": "k-old", "result": result(0)});
        std::fs::write(&path, format!("{old}\n")).unwrap();
        let mut cache = RunCache::open(&path).unwrap();
        assert_eq!(cache.get("k-old").unwrap().seed, 0);
        assert_eq!(cache.starts("w1"), StartCounts { same: 0, other: 0, unrecorded: 1 });
        cache.record("k-new", "w1", &result(1)).unwrap();
        cache.record("k-other", "w2", &result(2)).unwrap();
        drop(cache);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().nth(1).unwrap().contains(r#""weights":"w1""#), "{text}");
        assert!(!text.lines().next().unwrap().contains("weights"), "the old line is left as it was: {text}");
        let cache = RunCache::open(&path).unwrap();
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.starts("w1"), StartCounts { same: 1, other: 1, unrecorded: 1 });
        assert_eq!(cache.starts("w3"), StartCounts { same: 0, other: 2, unrecorded: 1 });
    }
}
