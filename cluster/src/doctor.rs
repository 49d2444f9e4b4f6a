//! `reagent doctor`: can this machine run Reagent? One line per check, printed as soon as it is
//! known, and a non-zero exit when a required check fails.
//!
//! ```text
//!  ✔ config    valid: run id "default" (embedded defaults + job.toml)
//!  ✔ rollout   actor.max_new_tokens 48 and context 2048 hold the reference episodes of math
//!  ✔ model     launch.sft_model "micro": built in, trained from scratch by the cold start
//!  ✔ redis     127.0.0.1:6379 answered PING in 0.3ms; redis 7.0.15
//!  ✔ libtorch  loaded: sum(arange(5)) = 10 computed on the CPU
//!  ✔ cuda      not available, CPU only: libtorch_cuda is not loaded: cannot load …/libtorch_cuda.so: libcusparse.so.12: …
//! ```
//!
//! Every wait has a deadline: Redis through the link's own deadlines (its retry budget capped
//! so that a dead server is reported in seconds), `redis-server --version` and the libtorch
//! probe through explicit timeouts. The probe runs on a thread of its own (CODE_STYLE.md rule 5).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use policy::probe::TorchReport;
use protocol::config::{ConfigError, ReagentConfig};
use protocol::link::RedisLink;

/// How long a configured Redis is retried before it is reported unreachable.
const REDIS_RETRY_FOR: Duration = Duration::from_secs(3);
/// How long `redis-server --version` may take.
const VERSION_DEADLINE: Duration = Duration::from_secs(10);
/// How long loading libtorch and initialising CUDA may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(120);

/// Whether a check passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    /// Not run because a check it depends on failed.
    Skipped,
    /// Runs, but not as the user likely meant: said, not counted as a failure.
    Warn,
}

/// Prints each check's line and counts the failures.
#[derive(Debug, Default)]
struct Report {
    failures: usize,
}

impl Report {
    fn line(&mut self, name: &str, outcome: Outcome, detail: impl std::fmt::Display) {
        let mark = match outcome {
            Outcome::Pass => "✔",
            Outcome::Fail => "✘",
            Outcome::Skipped => "–",
            Outcome::Warn => "!",
        };
        if outcome == Outcome::Fail {
            self.failures += 1;
        }
        println!("{mark} {name:<9} {detail}");
        let _ = std::io::stdout().flush();
    }
}

/// Runs every check; returns whether all required ones passed.
pub async fn run(config: &Result<ReagentConfig, ConfigError>, source: &str) -> Result<bool> {
    let mut report = Report::default();
    let config = match config {
        Ok(cfg) => {
            match crate::settings::check_role_sections(cfg) {
                Ok(()) => report.line("config", Outcome::Pass, format!("valid: run id {:?} ({source})", cfg.run.id)),
                Err(e) => report.line("config", Outcome::Fail, format!("{} ({source})", crate::errors::describe(&e))),
            }
            Some(cfg)
        }
        Err(e) => {
            report.line("config", Outcome::Fail, format!("{e} ({source})"));
            None
        }
    };

    match config.map(rollout_limits) {
        Some(Ok((true, detail))) => report.line("rollout", Outcome::Pass, detail),
        Some(Ok((false, detail))) => report.line("rollout", Outcome::Warn, detail),
        Some(Err(e)) => report.line("rollout", Outcome::Fail, crate::errors::describe(&e)),
        None => report.line("rollout", Outcome::Skipped, "skipped: the configuration did not load"),
    }

    match config.map(starting_model) {
        Some(Ok(detail)) => report.line("model", Outcome::Pass, detail),
        Some(Err(e)) => report.line("model", Outcome::Fail, crate::errors::describe(&e)),
        None => report.line("model", Outcome::Skipped, "skipped: the configuration did not load"),
    }

    match config {
        Some(cfg) => match cfg.redis.url() {
            Some(_) => match ping_redis(cfg).await {
                Ok(detail) => report.line("redis", Outcome::Pass, detail),
                Err(e) => report.line("redis", Outcome::Fail, crate::errors::describe(&e)),
            },
            None => match private_server_binary().await {
                Ok(detail) => report.line("redis", Outcome::Pass, detail),
                Err(e) => report.line(
                    "redis",
                    Outcome::Fail,
                    format!(
                        "redis.url is empty, so `reagent run` starts a private server, but {}",
                        crate::errors::describe(&e)
                    ),
                ),
            },
        },
        None => report.line("redis", Outcome::Skipped, "skipped: the configuration did not load"),
    }

    match probe_torch().await {
        Ok(t) => {
            report.line(
                "libtorch",
                Outcome::Pass,
                format!("loaded: sum(arange(5)) = {} computed on the CPU", t.cpu_check),
            );
            let (outcome, detail) = cuda_line(&t, config.and_then(wants_cuda));
            report.line("cuda", outcome, detail);
        }
        Err(e) => {
            report.line("libtorch", Outcome::Fail, crate::errors::describe(&e));
            report.line("cuda", Outcome::Skipped, "skipped: libtorch did not load");
        }
    }

    if report.failures == 0 {
        println!("all checks passed");
    } else {
        println!("{} check(s) failed", report.failures);
    }
    Ok(report.failures == 0)
}

/// Whether `[actor]`'s message cap and context hold the reference episodes of its task
/// families (rendered with its model's tokenizer), and the line that says so or names what to
/// set.
fn rollout_limits(cfg: &ReagentConfig) -> Result<(bool, String)> {
    let actor = actors::config::ActorConfig::from_config(cfg)?;
    let tokenizer = actor.tokenizer()?;
    let rollout = actor.rollout_config();
    let short = episode::shortfalls(&actor.task_mix(), tokenizer.as_ref(), &rollout, usize::MAX)?;
    if short.is_empty() {
        let families: Vec<String> = actor.family.to_vec().iter().map(ToString::to_string).collect();
        return Ok((
            true,
            format!(
                "actor.max_new_tokens {} and context {} hold the reference episodes of {}",
                rollout.max_new_tokens,
                rollout.max_context_tokens,
                families.join(", ")
            ),
        ));
    }
    Ok((false, short.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
}

/// The model `reagent run` starts from (`launch.sft_model`): a built-in size, or a model
/// directory and the files it holds; an error names the key and how set-up makes SmolLM2's.
fn starting_model(cfg: &ReagentConfig) -> Result<String> {
    let launch = crate::launch::config::LaunchConfig::from_config(cfg).map_err(|e| {
        anyhow!(
            "{e} (a model directory holds config.json and *.safetensors; `make setup` converts SmolLM2-135M-Instruct \
             into target/smollm2)"
        )
    })?;
    let Some(dir) = launch.sft_init() else {
        return Ok(format!(
            "launch.sft_model {:?}: built in, trained from scratch by the cold start",
            launch.sft_model
        ));
    };
    let weights = policy::pretrained::safetensors_files(&dir)?.len();
    let has = |name: &str| dir.join(name).is_file();
    let tokenizer = match (has("tokenizer.json"), has("chat_template.jinja") || has("tokenizer_config.json")) {
        (true, true) => "tokenizer.json and a chat template",
        (true, false) => "tokenizer.json, no chat template (ChatML is used)",
        (false, _) => "no tokenizer.json (the byte-level tokenizer is used)",
    };
    Ok(format!("launch.sft_model {}: a model directory, {weights} weight file(s), {tokenizer}", dir.display()))
}

/// PING with the configured deadlines (retrying for at most [`REDIS_RETRY_FOR`]), then the
/// server's version from INFO server.
async fn ping_redis(cfg: &ReagentConfig) -> Result<String> {
    let mut redis = cfg.redis.clone();
    redis.retry_for_ms = redis.retry_for_ms.min(REDIS_RETRY_FOR.as_millis() as u64);
    let link = RedisLink::from_config(&redis)?;
    let started = Instant::now();
    link.ping().await?;
    let rtt = started.elapsed();
    let info: String = link
        .call("info server", Duration::ZERO, |mut c| async move {
            redis::cmd("INFO").arg("server").query_async(&mut c).await
        })
        .await?;
    let version = info_field(&info, "redis_version").unwrap_or("(unknown version)");
    Ok(format!("{} answered PING in {rtt:.1?}; redis {version}", link.endpoint()))
}

/// One `key:value` line of an INFO reply.
pub fn info_field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).map(str::trim)
}

/// The redis-server binary `reagent run` would start, and its version.
async fn private_server_binary() -> Result<String> {
    let path = protocol::redis_server::find_binary(None)?;
    let version = server_version(&path).await?;
    Ok(format!("redis.url is empty: `reagent run` will start a private server; found {} ({version})", path.display()))
}

/// `redis-server --version` as `redis-server 7.0.15`, under a deadline.
async fn server_version(path: &Path) -> Result<String> {
    let run = tokio::process::Command::new(path).arg("--version").kill_on_drop(true).output();
    let out = tokio::time::timeout(VERSION_DEADLINE, run)
        .await
        .map_err(|_| anyhow!("`{} --version` did not finish within {VERSION_DEADLINE:?}", path.display()))?
        .with_context(|| format!("could not run {}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default().trim();
    Ok(first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .map_or_else(|| first.to_string(), |v| format!("redis-server {v}")))
}

/// The `device` setting that asks for CUDA (`learner.device`, `actor.device`), if one does, as
/// the roles read it.
fn wants_cuda(cfg: &ReagentConfig) -> Option<&'static str> {
    use policy::device::DeviceChoice::Cuda;
    if learner::role::LearnerRole::from_config(cfg).is_ok_and(|r| r.keys.device == Cuda) {
        Some("learner.device")
    } else if actors::config::ActorConfig::from_config(cfg).is_ok_and(|a| a.device == Cuda) {
        Some("actor.device")
    } else {
        None
    }
}

/// The `cuda` line: a kernel's result where a device is seen; otherwise why none is (libtorch_cuda
/// could not be loaded, and why; or no driver), a failure when the configuration asks for CUDA (`wanted`, its key).
fn cuda_line(t: &TorchReport, wanted: Option<&str>) -> (Outcome, String) {
    match &t.cuda_check {
        Some(Ok(sum)) if *sum == 262_144.0 => (
            Outcome::Pass,
            format!(
                "available: {} device(s); a 64×64 matrix product ran on cuda:0 and came back right",
                t.cuda_devices
            ),
        ),
        Some(Ok(sum)) => (Outcome::Fail, format!("a 64×64 matrix product of ones on cuda:0 gave {sum}, not 262144")),
        Some(Err(e)) => (Outcome::Fail, format!("CUDA is seen but a kernel on cuda:0 failed: {e}")),
        None => {
            let why = match &t.cuda_library {
                Ok(path) => format!(
                    "{} loaded, but no device is visible (no driver mounted, or CUDA_VISIBLE_DEVICES empty?)",
                    path.display()
                ),
                Err(e) => format!("libtorch_cuda is not loaded: {e}"),
            };
            match wanted {
                Some(key) => (Outcome::Fail, format!("not available, but {key} = \"cuda\": {why}")),
                None => (Outcome::Pass, format!("not available, CPU only: {why}")),
            }
        }
    }
}

/// Runs the libtorch probe on a thread of its own, under [`PROBE_DEADLINE`]. A plain thread
/// rather than `spawn_blocking`: a hung probe must not keep the runtime from shutting down.
async fn probe_torch() -> Result<TorchReport> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("libtorch-probe".into())
        .spawn(move || {
            let _ = tx.send(policy::probe::probe());
        })
        .context("could not start the libtorch probe thread")?;
    tokio::time::timeout(PROBE_DEADLINE, rx)
        .await
        .map_err(|_| anyhow!("the libtorch probe did not finish within {PROBE_DEADLINE:?}"))?
        .map_err(|_| anyhow!("the libtorch probe panicked (see the message above)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn torch(cuda_loaded: bool, cuda_check: Option<Result<f64, String>>) -> TorchReport {
        let cuda_available = cuda_check.is_some();
        let cuda_library = if cuda_loaded {
            Ok("/opt/t/lib/libtorch_cuda.so".into())
        } else {
            Err("cannot load /opt/t/lib/libtorch_cuda.so: libcudnn.so.9: cannot open shared object file".into())
        };
        TorchReport {
            cpu_check: 10.0,
            cuda_available,
            cuda_devices: usize::from(cuda_available),
            cuda_library,
            cuda_check,
        }
    }

    /// The cuda line says why there is no GPU, fails when the job asks for one, and passes only
    /// a kernel that ran and came back right.
    #[test]
    fn the_cuda_line_runs_a_kernel_and_fails_a_job_that_wants_a_missing_gpu() {
        let (o, d) = cuda_line(&torch(false, None), None);
        assert!(o == Outcome::Pass && d.contains("libtorch_cuda is not loaded") && d.contains("libcudnn.so.9"), "{d}");
        let (o, d) = cuda_line(&torch(true, None), Some("learner.device"));
        assert!(o == Outcome::Fail && d.contains("learner.device = \"cuda\"") && d.contains("no driver"), "{d}");
        assert!(cuda_line(&torch(true, Some(Ok(262_144.0))), Some("learner.device")).0 == Outcome::Pass);
        assert!(cuda_line(&torch(true, Some(Ok(0.0))), None).0 == Outcome::Fail);
        let (o, d) = cuda_line(&torch(true, Some(Err("out of memory".into()))), None);
        assert!(o == Outcome::Fail && d.contains("out of memory"), "{d}");
        assert_eq!(wants_cuda(&config("[actor]\ndevice = \"cuda\"\n")), Some("actor.device"));
        assert_eq!(wants_cuda(&config("[learner]\ndevice = \"cuda\"\n")), Some("learner.device"));
        assert_eq!(wants_cuda(&config("")), None);
    }

    fn config(toml: &str) -> ReagentConfig {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(&path, toml).unwrap();
        ReagentConfig::load(Some(&path)).unwrap()
    }

    #[test]
    fn the_starting_model_is_described_and_a_missing_directory_is_named() {
        let built_in = starting_model(&config("")).unwrap();
        assert!(built_in.contains("\"micro\": built in"), "{built_in}");

        let missing = starting_model(&config("[launch]\nsft_model = \"/nonexistent/smollm2\"\n")).unwrap_err();
        let text = format!("{missing:#}");
        assert!(text.contains("launch.sft_model") && text.contains("/nonexistent/smollm2"), "{text}");
        assert!(text.contains("make setup"), "says how to get one: {text}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        std::fs::write(dir.path().join("model.safetensors"), "").unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        let toml = format!("[launch]\nsft_model = {:?}\n", dir.path().display().to_string());
        let found = starting_model(&config(&toml)).unwrap();
        assert!(found.contains("1 weight file(s)") && found.contains("no chat template"), "{found}");
        std::fs::write(dir.path().join("chat_template.jinja"), "{{ x }}").unwrap();
        let found = starting_model(&config(&toml)).unwrap();
        assert!(found.contains("tokenizer.json and a chat template"), "{found}");
    }

    #[test]
    fn info_fields_are_found_by_key() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_mode"), None);
    }
}
