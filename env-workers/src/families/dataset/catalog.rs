//! `[dataset]` and the tasks it loads: every line of every file parsed and checked before any
//! task is served, ids unique across files, tasks pooled by split and difficulty.
//!
//! ```text
//!  [dataset] files = [{ path, match }, …], eval_percent
//!     └─ each file, each line ─ task::parse_line ─► Task ─ Split::of_id ─► pools[(split, difficulty)]
//!  task(seed, difficulty) ─► pools[(Split::of_seed(seed), difficulty)][split::position(seed, len)]
//! ```

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::error::DatasetError;
use super::matching::MatchMode;
use super::split::{position, Split};
use super::task::{parse_line, At, Task};

/// The most tasks one process loads (a larger file is refused rather than exhausting memory).
pub const MAX_TASKS: usize = 5_000_000;

/// `[dataset]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// The files; empty: no dataset (family `dataset` is then refused).
    pub files: Vec<FileConfig>,
    /// Percent of tasks held out for evaluation, by a hash of their id (0..=90).
    pub eval_percent: u32,
}

/// One entry of `dataset.files`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The JSON-lines file, relative to the working directory.
    pub path: String,
    /// How its answers are compared.
    #[serde(rename = "match")]
    pub mode: MatchMode,
}

impl DatasetConfig {
    /// `[dataset]` from the configuration's table; errors name the key.
    pub fn from_table(table: &toml::Table) -> Result<Self, DatasetError> {
        let cfg: Self = protocol::config::section("dataset", table).map_err(|e| match e {
            protocol::config::ConfigError::Key { key, detail } => {
                DatasetError::Config { key: key.trim_start_matches("dataset.").to_string(), detail }
            }
            other => DatasetError::Config { key: "(section)".into(), detail: other.to_string() },
        })?;
        if cfg.eval_percent > 90 {
            return Err(DatasetError::Config {
                key: "eval_percent".into(),
                detail: format!("expected 0..=90, found {}", cfg.eval_percent),
            });
        }
        Ok(cfg)
    }
}

/// Every task of a dataset, pooled by split and difficulty.
#[derive(Debug)]
pub struct Catalog {
    tasks: Vec<Task>,
    pools: HashMap<(Split, u32), Vec<usize>>,
    digest: [u8; 32],
}

impl PartialEq for Catalog {
    /// Two catalogs are equal when built from the same files, contents and settings.
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Catalog {
    /// Reads and checks every file of `cfg`.
    pub fn load(cfg: &DatasetConfig) -> Result<Self, DatasetError> {
        let mut texts = Vec::with_capacity(cfg.files.len());
        for f in &cfg.files {
            let text = std::fs::read_to_string(&f.path)
                .map_err(|e| DatasetError::File { file: f.path.clone(), detail: e.to_string() })?;
            texts.push((f.path.clone(), text, f.mode));
        }
        Self::from_texts(&texts, cfg.eval_percent)
    }

    /// A catalog from (file name, contents, match mode) triples.
    pub fn from_texts(files: &[(String, String, MatchMode)], eval_percent: u32) -> Result<Self, DatasetError> {
        let mut hasher = Sha256::new();
        hasher.update(eval_percent.to_le_bytes());
        let mut tasks = Vec::new();
        let mut seen: HashMap<String, (String, usize)> = HashMap::new();
        for (file, text, mode) in files {
            for part in [file.as_bytes(), mode.name().as_bytes(), text.as_bytes()] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part);
            }
            let before = tasks.len();
            for (i, line) in text.lines().enumerate() {
                let at = At { file, line: i + 1 };
                let task = parse_line(at, line, *mode)?;
                if let Some((f, l)) = seen.insert(task.id.clone(), (file.clone(), i + 1)) {
                    return Err(DatasetError::line(
                        file,
                        i + 1,
                        "id",
                        format!("{:?} is also the id of line {l} of {f}", task.id),
                    ));
                }
                if tasks.len() == MAX_TASKS {
                    return Err(DatasetError::Unusable(format!("more than {MAX_TASKS} tasks")));
                }
                tasks.push(task);
            }
            if tasks.len() == before {
                return Err(DatasetError::File { file: file.clone(), detail: "has no tasks".into() });
            }
        }
        let mut pools: HashMap<(Split, u32), Vec<usize>> = HashMap::new();
        for (i, t) in tasks.iter().enumerate() {
            pools.entry((Split::of_id(&t.id, eval_percent), t.difficulty)).or_default().push(i);
        }
        if !pools.keys().any(|(split, _)| *split == Split::Train) {
            return Err(DatasetError::Unusable(format!(
                "every one of its {} tasks is held out at eval_percent = {eval_percent}; none is left to train on",
                tasks.len()
            )));
        }
        Ok(Self { tasks, pools, digest: hasher.finalize().into() })
    }

    /// Every task, in file order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Tasks per (split, difficulty).
    pub fn counts(&self) -> BTreeMap<(Split, u32), usize> {
        self.pools.iter().map(|(k, v)| (*k, v.len())).collect()
    }

    /// The difficulties that have tasks in `split`, ascending.
    pub fn difficulties(&self, split: Split) -> Vec<u32> {
        let mut out: Vec<u32> = self.pools.keys().filter(|(s, _)| *s == split).map(|(_, d)| *d).collect();
        out.sort_unstable();
        out
    }

    /// The task `seed` plays at `difficulty`: from the held-out pool for seeds from
    /// [`super::split::HELD_OUT_FROM`] up, else from the training pool.
    pub fn task(&self, seed: u64, difficulty: u32) -> Result<&Task, DatasetError> {
        let split = Split::of_seed(seed);
        let pool = self
            .pools
            .get(&(split, difficulty))
            .filter(|p| !p.is_empty())
            .ok_or(DatasetError::NoTasks { split: split.name(), difficulty })?;
        Ok(&self.tasks[pool[position(seed, pool.len())]])
    }
}
