//! The Python baselines of the benches (TRL, transformers) run as child processes in a venv
//! that a set-up script makes: find the interpreter, check that it imports what the script
//! needs (the error names the script that makes the venv), run the script with a deadline and
//! read back its one JSON result line.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::process::Command;

/// How long starting a venv's Python and importing its packages may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(120);

/// A venv a bench's baseline runs in.
#[derive(Debug, Clone, Copy)]
pub struct Venv {
    /// The environment variable that names the venv's directory.
    pub env_var: &'static str,
    /// The directory when the variable is unset.
    pub default_dir: &'static str,
    /// The set-up script that makes it.
    pub made_by: &'static str,
    /// What the probe imports (`import torch, trl`), and what is printed on success.
    pub probe: &'static str,
}

impl Venv {
    /// The interpreter: `given`, else `$env_var/bin/python`, else the default directory's.
    /// Fails, saying how to make the venv, when it is missing or cannot import what it must.
    pub async fn python(&self, given: Option<&Path>) -> Result<PathBuf> {
        let python = match given {
            Some(p) => p.to_path_buf(),
            None => std::env::var_os(self.env_var)
                .map_or_else(|| PathBuf::from(self.default_dir), PathBuf::from)
                .join("bin/python"),
        };
        if !python.exists() {
            bail!("no venv at {}: run {} (or point {} at one)", python.display(), self.made_by, self.env_var);
        }
        let out = tokio::time::timeout(
            PROBE_DEADLINE,
            Command::new(&python).args(["-c", self.probe]).kill_on_drop(true).output(),
        )
        .await
        .with_context(|| format!("{} took longer than {PROBE_DEADLINE:?} to import its packages", python.display()))?
        .with_context(|| format!("starting {}", python.display()))?;
        if !out.status.success() {
            bail!(
                "{} cannot import what it needs (`{}` failed: {}); {} makes a venv that can",
                python.display(),
                self.probe,
                last_lines(&out.stderr, 1),
                self.made_by
            );
        }
        Ok(python)
    }
}

/// Runs `script` (its source) with `args` under `python` and `threads` OpenMP threads, within
/// `deadline`; returns the last stdout line that starts with `prefix`. `Err` names the failure
/// with the end of the script's stderr.
pub async fn run_script(
    python: &Path,
    script: &str,
    args: &[&str],
    threads: usize,
    deadline: Duration,
    prefix: &str,
) -> Result<String> {
    let child = Command::new(python)
        .args(["-W", "ignore", "-c", script])
        .args(args)
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("TOKENIZERS_PARALLELISM", "false")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", python.display()))?;
    let out = tokio::time::timeout(deadline, child.wait_with_output())
        .await
        .with_context(|| format!("the Python baseline took longer than {deadline:?}"))??;
    if !out.status.success() {
        bail!("the Python baseline failed ({}): {}", out.status, last_lines(&out.stderr, 5));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with(prefix)).context("the Python baseline printed no result")?;
    Ok(line.to_string())
}

/// The last `n` non-empty lines of `bytes`, last first, joined with " / ".
fn last_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().rev().filter(|l| !l.trim().is_empty()).take(n).collect();
    if lines.is_empty() {
        "no error output".into()
    } else {
        lines.join(" / ")
    }
}
