//! A checkpoint's manifest: every other file's name, length and sha256. It is written last,
//! so a checkpoint directory without a valid manifest is incomplete and never loaded.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::fsio::write_synced;
use crate::error::{LearnerError, Result};

/// The manifest's file name inside a checkpoint directory.
pub const MANIFEST: &str = "manifest.json";
/// The checkpoint layout's version; a loader refuses others.
pub const FORMAT_VERSION: u32 = 1;

/// One file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Its name inside the checkpoint directory.
    pub name: String,
    /// Its length in bytes.
    pub bytes: u64,
    /// Its sha256, as 64 lowercase hex digits.
    pub sha256: String,
}

/// The list of a checkpoint's files with their checksums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// The learner update the checkpoint was taken after.
    pub step: u64,
    /// Every other file of the checkpoint.
    pub files: Vec<FileEntry>,
}

/// The sha256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| LearnerError::io(path, e))
}

impl Manifest {
    /// A manifest of `names` (files already written and synced in `dir`), hashed as they are on
    /// disk now, written to `dir/manifest.json` and synced.
    pub fn write(dir: &Path, step: u64, names: &[&str]) -> Result<Manifest> {
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            let bytes = read(&dir.join(name))?;
            files.push(FileEntry { name: name.to_string(), bytes: bytes.len() as u64, sha256: sha256_hex(&bytes) });
        }
        let manifest = Manifest { format_version: FORMAT_VERSION, step, files };
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
        write_synced(&dir.join(MANIFEST), &json)?;
        Ok(manifest)
    }

    /// Reads `dir`'s manifest and checks every file it lists (length, then sha256) and that
    /// each of `required` is listed. Any failure is [`LearnerError::CorruptCheckpoint`].
    pub fn verify(dir: &Path, required: &[&str]) -> Result<Manifest> {
        let corrupt = |detail: String| LearnerError::corrupt(dir, detail);
        let text = fs::read(dir.join(MANIFEST)).map_err(|e| corrupt(format!("{MANIFEST}: {e}")))?;
        let manifest: Manifest =
            serde_json::from_slice(&text).map_err(|e| corrupt(format!("{MANIFEST} is unreadable: {e}")))?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {} (this build reads {FORMAT_VERSION})",
                manifest.format_version
            )));
        }
        for name in required {
            if !manifest.files.iter().any(|f| f.name == *name) {
                return Err(corrupt(format!("{MANIFEST} does not list {name}")));
            }
        }
        for f in &manifest.files {
            let bytes = fs::read(dir.join(&f.name)).map_err(|e| corrupt(format!("{}: {e}", f.name)))?;
            if bytes.len() as u64 != f.bytes {
                return Err(corrupt(format!("{} has {} bytes, the manifest says {}", f.name, bytes.len(), f.bytes)));
            }
            let sha = sha256_hex(&bytes);
            if sha != f.sha256 {
                return Err(corrupt(format!("{} has sha256 {sha}, the manifest says {}", f.name, f.sha256)));
            }
        }
        Ok(manifest)
    }
}
