//! Role processes on namespace hosts: `ip netns exec <ns> reagent <role> --config job.toml`,
//! one libtorch thread each, output in `<dir>/logs/<name>.log`, stopped with SIGTERM and a
//! deadline, killed if the test ends first.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::netns::Net;

/// A running role process (or redis-server).
pub struct Proc {
    /// `learner`, `actor-1`, …
    pub name: String,
    /// Its output.
    pub log: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
}

impl Proc {
    /// Starts `program args…` on `host` with `env` and none of the caller's `REAGENT__*`.
    pub fn spawn(
        net: &Net,
        host: &str,
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
        dir: &Path,
    ) -> Self {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = net.command(host, program);
        cmd.args(args).stdin(Stdio::null()).stdout(out.try_clone().unwrap()).stderr(out);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
            cmd.env_remove(k);
        }
        // One intra-op thread per process, as `reagent run` does: the roles share two cores.
        cmd.env("OMP_NUM_THREADS", "1");
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self { name: name.to_string(), log, child, exit: None }
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().unwrap();
        }
        self.exit.is_none()
    }

    /// Panics, naming it and showing its log's end, if it has exited.
    pub fn assert_alive(&mut self, when: &str) {
        assert!(self.alive(), "{} exited ({:?}) {when}:\n{}", self.name, self.exit, self.tail(30));
    }

    /// SIGTERM, then waits up to `deadline`; the exit status and how long leaving took
    /// (`None`: still running at the deadline — it is then killed).
    pub async fn stop(&mut self, deadline: Duration) -> (Option<ExitStatus>, Duration) {
        let started = Instant::now();
        if self.alive() {
            // SAFETY: kill(2) on a child this process started and has not reaped.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        while self.alive() && started.elapsed() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let took = started.elapsed();
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return (None, took);
        }
        (self.exit, took)
    }

    /// The last `n` lines of its log.
    pub fn tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
