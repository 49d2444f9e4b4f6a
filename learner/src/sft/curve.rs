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

    /// Starts `path` over holding `kept` (a resumed run's records), then appends after them.
    /// The kept lines go to a temporary file renamed over `path`, so a kill during the rewrite
    /// leaves the old curve or the new one, never a cut one (the next resume needs every kept
    /// line).
    pub fn start_with(path: &Path, kept: &[impl Serialize]) -> Result<Self> {
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = path.with_file_name(tmp_name);
        let mut writer = Self::create(&tmp)?;
        for record in kept {
            writer.append(record)?;
        }
        writer.out.get_ref().sync_all().map_err(|e| LearnerError::io(&tmp, e))?;
        // The open file is renamed under the writer, which goes on appending to it.
        std::fs::rename(&tmp, path).map_err(|e| LearnerError::io(path, e))?;
        writer.path = path.to_path_buf();
        Ok(writer)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed curve holds exactly the kept records, then what is appended; the old file's
    /// later lines and a temporary file left by an earlier kill are gone.
    #[test]
    fn a_restarted_curve_keeps_the_kept_lines_and_appends_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("curve.jsonl");
        std::fs::write(&path, "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"ste").unwrap();
        std::fs::write(dir.path().join("curve.jsonl.tmp"), "stale").unwrap();
        let kept = [serde_json::json!({"step": 1}), serde_json::json!({"step": 2})];
        let mut writer = CurveWriter::start_with(&path, &kept).unwrap();
        writer.append(&serde_json::json!(["new"])).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"step\":1}\n{\"step\":2}\n[\"new\"]\n");
        assert!(!dir.path().join("curve.jsonl.tmp").exists());
    }
}
