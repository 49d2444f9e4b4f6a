//! Durable file operations for checkpoints: write-and-fsync, directory fsync, and the atomic
//! swap of a finished temporary directory into its final name.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{LearnerError, Result};

/// Writes `bytes` to `path` and fsyncs the file.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(|e| LearnerError::io(path, e))?;
    f.write_all(bytes).map_err(|e| LearnerError::io(path, e))?;
    f.sync_all().map_err(|e| LearnerError::io(path, e))
}

/// Fsyncs an existing file (one written by another library, e.g. safetensors).
pub fn sync_file(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).map_err(|e| LearnerError::io(path, e))
}

/// Fsyncs a directory, making the creation, renaming or removal of its entries durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(|e| LearnerError::io(dir, e))
}

/// Removes a directory tree if it exists.
pub fn remove_dir_if_exists(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LearnerError::io(dir, e)),
        _ => Ok(()),
    }
}

/// Moves the finished directory `tmp` to `target` (both in `parent`) atomically: a reader sees
/// either no `target` or the complete one. An existing `target` (say, a corrupt checkpoint of
/// the same step being redone) is first moved aside to `trash` and removed afterwards.
pub fn publish_dir(parent: &Path, tmp: &Path, target: &Path, trash: &Path) -> Result<()> {
    sync_dir(tmp)?;
    let replaced = target.exists();
    if replaced {
        remove_dir_if_exists(trash)?;
        fs::rename(target, trash).map_err(|e| LearnerError::io(target, e))?;
    }
    fs::rename(tmp, target).map_err(|e| LearnerError::io(tmp, e))?;
    sync_dir(parent)?;
    if replaced {
        remove_dir_if_exists(trash)?;
    }
    Ok(())
}
