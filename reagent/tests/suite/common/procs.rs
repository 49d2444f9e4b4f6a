//! Role processes of a test job: `reagent <role> --config <job.toml>` children, each with one
//! libtorch thread (as `reagent run` starts them) and its output in `logs/<name>.log`; stopped
//! with SIGTERM and a deadline, or killed with SIGKILL; all killed when the test ends (or when
//! its process dies).

use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often conditions are polled.
const POLL: Duration = Duration::from_millis(200);

struct RoleProcess {
    child: Child,
    log: PathBuf,
}

/// The job's role processes, by name.
pub struct Procs {
    config: PathBuf,
    logs: PathBuf,
    live: BTreeMap<String, RoleProcess>,
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on a child this process started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Procs {
    /// No processes yet; they will read `config` and log under `logs`.
    pub fn new(config: &Path, logs: &Path) -> Self {
        std::fs::create_dir_all(logs).unwrap();
        Self { config: config.to_path_buf(), logs: logs.to_path_buf(), live: BTreeMap::new() }
    }

    /// Starts `reagent <args…> --config <job>` as `name`, with `env` over a clean `REAGENT__*`.
    pub fn start(&mut self, name: &str, args: &[&str], env: &[(&str, String)]) {
        assert!(!self.live.contains_key(name), "{name} is already running");
        let log = self.logs.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
        cmd.args(args)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out));
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
            cmd.env_remove(k);
        }
        // One intra-op thread per process, as `reagent run` does: libtorch's default of a
        // thread per core in every process oversubscribes two cores many times over.
        cmd.env("OMP_NUM_THREADS", "1");
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        // Should this test process die without unwinding (a harness timeout), its role
        // processes die with it rather than run on.
        // SAFETY: prctl(2) is async-signal-safe; it runs in the child between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.live.insert(name.to_string(), RoleProcess { child, log });
    }

    /// Starts an env-worker on `addr` and waits until it listens.
    pub async fn start_env_worker(&mut self, name: &str, addr: &str) {
        let log = self.logs.join(format!("{name}.log"));
        let want = format!("env-worker listening on {addr}");
        // The log of an earlier process of the same name may hold the line already.
        let lines = || std::fs::read_to_string(&log).unwrap_or_default().matches(&want).count();
        let before = lines();
        self.start(name, &["env-worker", "--listen", addr], &[]);
        self.wait_until(&format!("{name} listening on {addr}"), Duration::from_secs(60), || {
            let ok = lines() > before;
            async move { ok }
        })
        .await;
    }

    /// SIGKILL: the process dies at once, mid-whatever-it-was-doing.
    pub fn kill(&mut self, name: &str) {
        let mut p = self.live.remove(name).unwrap_or_else(|| panic!("{name} is not running"));
        signal(&p.child, libc::SIGKILL);
        p.child.wait().unwrap();
    }

    /// SIGTERM, then waits up to `within` for the process to leave by itself; fails the test
    /// (naming its log) if it does not, or if it leaves with an error.
    pub async fn stop(&mut self, name: &str, within: Duration) {
        let mut p = self.live.remove(name).unwrap_or_else(|| panic!("{name} is not running"));
        signal(&p.child, libc::SIGTERM);
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = p.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                signal(&p.child, libc::SIGKILL);
                let _ = p.child.wait();
                panic!("{name} did not leave within {within:?} of SIGTERM:\n{}", tail(&p.log, 40));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success(), "{name} left with {status}:\n{}", tail(&p.log, 40));
    }

    /// Stops several processes at once (SIGTERM to all, then the waits).
    pub async fn stop_all(&mut self, names: &[&str], within: Duration) {
        for name in names {
            signal(&self.live[*name].child, libc::SIGTERM);
        }
        for name in names {
            self.stop(name, within).await;
        }
    }

    /// Polls `cond` until it holds; fails the test after `limit`, or as soon as a role process
    /// exits by itself, with the tails of every log.
    pub async fn wait_until<F, Fut>(&mut self, what: &str, limit: Duration, mut cond: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        // The condition wins over a process that exited since the last poll (a role may finish
        // its work and leave); a process that exited while the condition did not hold fails.
        let (mut died, held) = (None, std::cell::Cell::new(false));
        let waited = testkit::poll_until(limit, POLL, || {
            if died.is_none() {
                died = self.exited();
            }
            let (stop, check, held) = (died.is_some(), cond(), &held);
            async move {
                held.set(check.await);
                held.get() || stop
            }
        })
        .await;
        if held.get() {
            return;
        }
        if let Some((name, status)) = died {
            panic!("{name} exited ({status}) while waiting for {what}\n{}", self.diagnosis());
        }
        assert!(waited.is_ok(), "timed out after {limit:?} waiting for {what}\n{}", self.diagnosis());
    }

    fn exited(&mut self) -> Option<(String, ExitStatus)> {
        self.live.iter_mut().find_map(|(name, p)| p.child.try_wait().unwrap().map(|s| (name.clone(), s)))
    }

    /// The last lines of every log of this job, dead processes' included.
    pub fn diagnosis(&self) -> String {
        let mut out = String::new();
        let mut logs: Vec<PathBuf> =
            std::fs::read_dir(&self.logs).unwrap().filter_map(|e| e.ok().map(|e| e.path())).collect();
        logs.sort();
        for log in logs {
            out.push_str(&format!("──── {} ────\n{}\n", log.display(), tail(&log, 25)));
        }
        out
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in self.live.values_mut() {
            signal(&p.child, libc::SIGKILL);
            let _ = p.child.wait();
        }
    }
}
