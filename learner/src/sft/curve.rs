//! Learning-curve files: one JSON object per line, appended and flushed as the run goes, so
//! that a run's progress can be followed (`tail -f`) and plotted while it is still going.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{LearnerError, Result};

/// Appends JSON lines to a file.
#[derive(Debug)]
pub struct CurveWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl CurveWriter {
    /// Creates (or truncates) `path`, creating its directory.
    pub fn create(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LearnerError::io(dir, e))?;
        }
        let file = File::create(path).map_err(|e| LearnerError::io(path, e))?;
        Ok(Self { path: path.to_path_buf(), out: BufWriter::new(file) })
    }

    /// Writes one record as a line and flushes it.
    pub fn append(&mut self, record: &impl Serialize) -> Result<()> {
        let line = serde_json::to_string(record)
            .map_err(|e| LearnerError::io(&self.path, std::io::Error::other(e.to_string())))?;
        writeln!(self.out, "{line}").and_then(|()| self.out.flush()).map_err(|e| LearnerError::io(&self.path, e))
    }
}

/// Writes `value` as pretty JSON to `path` (a run's final report).
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| LearnerError::io(path, std::io::Error::other(e.to_string())))?;
    std::fs::write(path, text + "\n").map_err(|e| LearnerError::io(path, e))
}
