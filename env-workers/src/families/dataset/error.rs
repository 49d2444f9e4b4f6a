//! Why a dataset could not be loaded or a dataset task could not be made. Every error about a
//! file names the file, and every error about a line names its number and the field.

/// What went wrong with `[dataset]` or one of its files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatasetError {
    /// A `[dataset]` key is missing, unknown or of the wrong form.
    #[error("config key `dataset.{key}`: {detail}")]
    Config {
        /// The key under `[dataset]`, e.g. `files[0].match`.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A file could not be read.
    #[error("dataset file {file}: {detail}")]
    File {
        /// The file as configured.
        file: String,
        /// The I/O error.
        detail: String,
    },
    /// One line of a file is malformed.
    #[error("dataset file {file}, line {line}, field `{field}`: {detail}")]
    Line {
        /// The file as configured.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The field at fault (`(line)` when the line is not a JSON object at all).
        field: String,
        /// What is wrong.
        detail: String,
    },
    /// The dataset as a whole cannot serve tasks (no training task, say).
    #[error("dataset: {0}")]
    Unusable(String),
    /// A different dataset is already loaded in this process.
    #[error("a different dataset is already loaded in this process (one dataset per process)")]
    AlreadyLoaded,
    /// A `dataset` task was asked for in a process with no dataset loaded.
    #[error("no dataset is loaded: family `dataset` needs `[dataset] files` in the configuration")]
    NotLoaded,
    /// No task of the requested split and difficulty exists.
    #[error("dataset has no {split} tasks at difficulty {difficulty}")]
    NoTasks {
        /// `training` or `held-out`.
        split: &'static str,
        /// The difficulty asked for.
        difficulty: u32,
    },
}

impl DatasetError {
    /// A [`DatasetError::Line`] error.
    pub fn line(file: &str, line: usize, field: &str, detail: impl Into<String>) -> Self {
        Self::Line { file: file.to_string(), line, field: field.to_string(), detail: detail.into() }
    }
}
