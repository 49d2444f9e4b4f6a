//! Role processes of a local run: `reagent <role>` children of this process, each with the run's
//! config file, its output in `<run dir>/logs/<name>.log`, stopped with SIGTERM and a deadline
//! (then SIGKILL). If the launcher itself goes away — dropped, or killed by a signal, even
//! SIGKILL, which runs no destructor — each role gets SIGTERM from the kernel
//! (`PR_SET_PDEATHSIG`) and leaves as it does on any SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::process::{Child, Command};

/// libtorch intra-op threads per role process: `OMP_NUM_THREADS` when set, else 1.
pub fn threads_per_process() -> usize {
    std::env::var("OMP_NUM_THREADS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(1)
}

/// A running role process.
#[derive(Debug)]
pub struct RoleProcess {
    /// `learner`, `actor-1`, …
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    child: Child,
}

impl RoleProcess {
    /// Starts `reagent <args…> --config <config>` with its output in `logs/<name>.log`.
    pub fn spawn(name: &str, args: &[&str], config: &Path, run_dir: &Path, env: &[(&str, String)]) -> Result<Self> {
        let exe = std::env::current_exe().context("finding the reagent binary to start role processes")?;
        let logs = run_dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log = logs.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        // The config file is the resolved configuration; REAGENT__ variables of this process
        // would override it again, so only those in `env` reach the child.
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
            cmd.env_remove(k);
        }
        // One intra-op thread per process: the roles share the machine's cores, and libtorch's
        // default (a thread per core in every process) oversubscribes them many times over.
        cmd.env("OMP_NUM_THREADS", threads_per_process().to_string());
        for (k, v) in env {
            cmd.env(k, v);
        }
        protocol::child::stop_with_parent(cmd.as_std_mut());
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        Ok(Self { name: name.to_string(), log, child })
    }

    /// The OS process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether it has exited, and how: `Some(Err)` names a failure.
    pub fn exited(&mut self) -> Option<Result<()>> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) if status.success() => Some(Ok(())),
            Ok(Some(status)) => {
                Some(Err(anyhow::anyhow!("{} exited with {status}; see {}", self.name, self.log.display())))
            }
            Err(e) => Some(Err(anyhow::anyhow!("{}: {e}", self.name))),
        }
    }

    /// Sends SIGTERM (the role leaves gracefully) without waiting.
    pub fn terminate(&self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) with a pid this process started and has not reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }

    /// SIGTERM, then up to `grace` for it to leave, then SIGKILL. Returns whether it left by itself.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        self.terminate();
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => status.success(),
            _ => {
                tracing::warn!(name = %self.name, grace_s = grace.as_secs(), "did not leave in time; killing it");
                let _ = self.child.kill().await;
                false
            }
        }
    }
}
