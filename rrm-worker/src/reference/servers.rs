//! The reference judge for `http` tasks, whose environments live in environment servers
//! (`docs/env-http.md`): the findings come from the server's `verify`, the outcome from a replay
//! of the agent's messages through `open`/`step`/`close`, and the judgement is built from them
//! as for the built-in families ([`env_workers::judge::judgement`]). Built-in tasks go to the
//! in-process [`ReferenceJudge`].
//!
//! ```text
//!  http task ─► server (by trajectory id; the next one if it fails)
//!               ├─ POST /v1/verify {task, messages} ─► findings
//!               └─ open ─► step each message until the end ─► close ─► outcome
//!             ─► judgement(findings, outcome): trace, critique, score
//! ```
//!
//! Which feedback mode needs what of a server: `outcome` judges nothing (any server);
//! `critique`, `score` and `unified` with `rrm.judge = "reference"` need `verify` (checked at
//! start: [`connect_checked`] refuses a server whose `/v1/info` does not offer it, naming the
//! keys to change); with `rrm.judge = "openai"` the model judges the trajectory's text and the
//! server needs no `verify`.

use std::time::{Duration, Instant};

use env_workers::http_env::{is_http, HttpEnv};
use env_workers::judge::{agent_messages, judgement};
use env_workers::service::{EnvWorkerConfig, Token};
use env_workers::{EnvError, Limits};
use protocol::config::{ConfigError, ReagentConfig};
use protocol::wire::{FeedbackMode, Judgement, TaskFamily, TaskSpec, Trajectory};

use super::ReferenceJudge;
use crate::error::{JudgeError, RrmError};
use crate::judge::{Judge, JudgeFuture};

/// Where the job's environment servers are and how they are called: `actor.env_workers` (its
/// http(s):// entries), `actor.env_timeout_ms`, `actor.max_turns` and the shared token of
/// `env_worker.token_env` — the settings the actors play with.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// The servers' URLs.
    pub endpoints: Vec<String>,
    /// Deadline of each call.
    pub timeout: Duration,
    /// The episode limits of play.
    pub limits: Limits,
    /// The shared token.
    pub token: Option<Token>,
}

/// The strings of `actor.<key>`, a string or a list of them.
fn actor_strings<'a>(cfg: &'a ReagentConfig, key: &str) -> Vec<&'a str> {
    match cfg.actor.get(key) {
        Some(v) if v.is_str() => v.as_str().into_iter().collect(),
        Some(v) => v.as_array().map(|list| list.iter().filter_map(|e| e.as_str()).collect()).unwrap_or_default(),
        None => Vec::new(),
    }
}

impl ServerSettings {
    /// The job's environment servers; `None` when `actor.env_workers` names none.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Option<Self>, RrmError> {
        let endpoints: Vec<String> =
            actor_strings(cfg, "env_workers").into_iter().filter(|e| is_http(e)).map(String::from).collect();
        if endpoints.is_empty() {
            return Ok(None);
        }
        let number = |key: &str, default: i64| {
            cfg.actor.get(key).and_then(|v| v.as_integer()).unwrap_or(default).max(1).unsigned_abs()
        };
        let limits = Limits { max_turns: number("max_turns", 10) as usize, ..Limits::default() };
        let token = EnvWorkerConfig::from_table(&cfg.env_worker)?.token();
        Ok(Some(Self { endpoints, timeout: Duration::from_millis(number("env_timeout_ms", 10_000)), limits, token }))
    }
}

/// Whether the job's actors play `http` tasks (`actor.family` names `http`).
fn plays_http(cfg: &ReagentConfig) -> bool {
    actor_strings(cfg, "family").contains(&TaskFamily::Http.name())
}

/// The reference judge for a job: the in-process one, plus the job's environment servers when
/// it plays `http` tasks and its feedback mode judges. Connects to each server and refuses one
/// that cannot serve the judge (no `verify`), naming the keys that would make the job work.
pub async fn connect_checked(cfg: &ReagentConfig, builtin: ReferenceJudge) -> Result<ServerJudge, RrmError> {
    let judges = cfg.run.feedback != FeedbackMode::Outcome;
    let settings = ServerSettings::from_config(cfg)?;
    let mut servers = Vec::new();
    match settings {
        Some(s) if judges => {
            for endpoint in &s.endpoints {
                let env = HttpEnv::connect(endpoint, s.timeout, s.token.as_ref(), s.limits).await.map_err(|e| {
                    ConfigError::invalid("actor.env_workers", "environment servers that answer /v1/info", e)
                })?;
                if !env.info().verify {
                    return Err(ConfigError::invalid(
                        "rrm.judge",
                        format!(
                            "\"openai\" (with rrm.openai.endpoints), or run.feedback = \"outcome\": run.feedback = \"{}\" \
                             with the reference judge needs the environment server's verify, and {} does not \
                             serve it (its /v1/info says verify: false)",
                            cfg.run.feedback,
                            env.peer()
                        ),
                        "\"reference\"",
                    )
                    .into());
                }
                servers.push(env);
            }
        }
        None if judges && plays_http(cfg) => {
            return Err(ConfigError::invalid(
                "actor.env_workers",
                "the http(s):// URLs of the environment servers serving actor.family = \"http\" (the reference \
                 judge asks their verify)",
                "no http(s):// URL",
            )
            .into());
        }
        _ => {}
    }
    Ok(ServerJudge { builtin, servers })
}

/// The reference judge over built-in families and environment servers.
#[derive(Debug, Clone)]
pub struct ServerJudge {
    builtin: ReferenceJudge,
    servers: Vec<HttpEnv>,
}

fn env_error(spec: TaskSpec, e: &EnvError) -> JudgeError {
    JudgeError::Environment { family: spec.family, seed: spec.seed, difficulty: spec.difficulty, detail: e.to_string() }
}

impl ServerJudge {
    /// Judges an `http` episode on `server`.
    async fn judge_on(&self, server: &HttpEnv, spec: TaskSpec, messages: &[String]) -> Result<Judgement, EnvError> {
        let started = Instant::now();
        let findings = server.verify(spec, messages).await?;
        let opened = server.open(spec).await?;
        let mut end = None;
        for message in messages {
            let obs = server.step(opened.session, message).await;
            if let Err(e) = &obs {
                let _ = server.close(opened.session).await;
                return Err(e.clone());
            }
            end = obs?.end;
            if end.is_some() {
                break;
            }
        }
        server.close(opened.session).await?;
        Ok(judgement(spec, messages, &findings, end.as_ref(), self.builtin.reveal_outcome, started))
    }
}

impl Judge for ServerJudge {
    fn id(&self) -> &str {
        ReferenceJudge::ID
    }

    fn judge<'a>(&'a self, trajectory: &'a Trajectory) -> JudgeFuture<'a> {
        if trajectory.task.family != TaskFamily::Http {
            return self.builtin.judge(trajectory);
        }
        Box::pin(async move {
            let spec = trajectory.task;
            let messages = agent_messages(trajectory)
                .ok_or_else(|| JudgeError::Unsupported("an http task with a control episode".into()))?;
            if self.servers.is_empty() {
                let detail = "no environment server to ask (actor.env_workers names none)";
                return Err(JudgeError::Unsupported(detail.into()));
            }
            let first = (trajectory.id.0 % self.servers.len() as u128) as usize;
            let mut last = None;
            for i in 0..self.servers.len() {
                match self.judge_on(&self.servers[(first + i) % self.servers.len()], spec, &messages).await {
                    Ok(j) => return Ok(j),
                    Err(e) => last = Some(env_error(spec, &e)),
                }
            }
            Err(last.unwrap_or_else(|| JudgeError::Internal("no server tried".into())))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(text: &str) -> ReagentConfig {
        ReagentConfig::from_toml_str(text).unwrap()
    }

    #[test]
    fn the_settings_are_the_actors_http_entries_timeout_and_turn_limit() {
        assert!(ServerSettings::from_config(&job("")).unwrap().is_none());
        let cfg = job(
            "[actor]\nfamily = \"http\"\nenv_workers = [\"http://127.0.0.1:1\"]\nenv_timeout_ms = 1234\nmax_turns = 3\n",
        );
        let s = ServerSettings::from_config(&cfg).unwrap().unwrap();
        assert_eq!(s.endpoints, vec!["http://127.0.0.1:1".to_string()]);
        assert_eq!((s.timeout, s.limits.max_turns), (Duration::from_millis(1234), 3));
        assert!(plays_http(&cfg) && !plays_http(&job("")));
    }

    #[tokio::test]
    async fn http_tasks_without_a_server_are_refused_only_where_the_judge_would_need_one() {
        let judging = job("[run]\nfeedback = \"score\"\n[actor]\nfamily = \"http\"\n");
        let err = connect_checked(&judging, ReferenceJudge::new()).await.unwrap_err().to_string();
        assert!(err.contains("actor.env_workers"), "{err}");
        let outcome = job("[run]\nfeedback = \"outcome\"\n[actor]\nfamily = \"http\"\n");
        assert!(connect_checked(&outcome, ReferenceJudge::new()).await.is_ok(), "outcome mode judges nothing");
        assert!(connect_checked(&job(""), ReferenceJudge::new()).await.is_ok(), "built-in tasks need no server");
    }
}
