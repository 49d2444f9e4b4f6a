//! The processes of one `reagent bench scale` point: a private redis-server, the job's
//! configuration written for it, `reagent <role>` children (killed if the bench goes away), and
//! reads of the scored stream by time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use protocol::codec::Codec;
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::queue::read_range;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{RunId, ScoredTrajectory};

use crate::scale::ScaleBenchArgs;
use cluster::launch::procs::RoleProcess;

/// The processes and streams of one point.
pub struct Pipeline {
    dir: PathBuf,
    config: PathBuf,
    /// The private server.
    pub link: RedisLink,
    scored: String,
    codec: Codec,
    roles: Vec<RoleProcess>,
    _redis: RedisServer,
}

impl Pipeline {
    /// A private redis-server and the job's configuration for it, written to `dir`.
    pub async fn new(base: &ReagentConfig, args: &ScaleBenchArgs, dir: &Path, run: &str) -> Result<Self> {
        let options = RedisServerOptions { appendonly: false, ..Default::default() };
        let redis = crate::private_redis(options)?;
        let mut cfg = base.clone();
        cfg.run.id = run.to_string();
        cfg.run.dir = dir.display().to_string();
        cfg.redis.url = redis.url();
        cfg.metrics.listen = String::new();
        // Nothing is trimmed, so that the window's entries can be read back.
        cfg.queue.trim_every = 1 << 40;
        for table in [&mut cfg.learner, &mut cfg.actor] {
            table.insert("model".into(), args.model.clone().into());
        }
        cfg.actor.insert("wait_for_weights_ms".into(), toml::Value::Integer(120_000));
        std::fs::create_dir_all(dir)?;
        let config = dir.join("config.toml");
        std::fs::write(&config, cfg.to_toml())?;
        Ok(Self {
            dir: dir.to_path_buf(),
            config,
            link: RedisLink::connect(&cfg.redis.url, (&cfg.redis).into())?,
            scored: Keys::new(&RunId::new(run)?).scored(),
            codec: Codec::new(cfg.queue.max_payload_bytes),
            roles: Vec::new(),
            _redis: redis,
        })
    }

    /// Starts `reagent <role>` with its output in `logs/<name>.log`; returns its pid.
    pub fn spawn(&mut self, name: &str, role: &str, env: &[(&str, &str)]) -> Result<u32> {
        let env: Vec<(&str, String)> = env.iter().map(|&(k, v)| (k, v.to_string())).collect();
        let p = RoleProcess::spawn(name, &[role], &self.config, &self.dir, &env)?;
        let pid = p.pid().unwrap_or(0);
        self.roles.push(p);
        Ok(pid)
    }

    /// Fails, naming the role and its log, if any role has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        for r in &mut self.roles {
            if let Some(exit) = r.exited() {
                exit?;
                bail!("{} exited during the bench; see {}", r.name, r.log.display());
            }
        }
        Ok(())
    }

    /// Scored trajectories appended from stream id `from` (exclusive when it starts with `(`)
    /// up to `to`: (milliseconds, trajectory) in order.
    pub async fn scored_between(&self, from: &str, to: &str) -> Result<Vec<(u64, String, ScoredTrajectory)>> {
        let mut out = Vec::new();
        for e in read_range(&self.link, &self.scored, from, to).await? {
            let Some(payload) = &e.payload else { continue };
            out.push((e.ms(), e.stream_id.clone(), self.codec.decode(payload)?));
        }
        Ok(out)
    }

    /// Waits until every actor in `ids` has a trajectory on the scored stream at or after
    /// `since_ms`; returns when each one's first arrived (ms).
    pub async fn first_scored(&mut self, ids: &[String], since_ms: u64, deadline: Duration) -> Result<Vec<u64>> {
        let started = Instant::now();
        let mut firsts: Vec<Option<u64>> = vec![None; ids.len()];
        let mut cursor = format!("{since_ms}-0");
        while firsts.iter().any(Option::is_none) {
            for (ms, id, st) in self.scored_between(&cursor, "+").await? {
                if let Some(i) = ids.iter().position(|a| *a == st.trajectory.actor_id.0) {
                    firsts[i].get_or_insert(ms);
                }
                cursor = format!("({id}");
            }
            self.check_alive()?;
            if started.elapsed() > deadline {
                let missing: Vec<_> = ids.iter().zip(&firsts).filter(|(_, f)| f.is_none()).map(|(a, _)| a).collect();
                bail!(
                    "no scored trajectory from {missing:?} within {} s; logs in {}",
                    deadline.as_secs(),
                    self.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(firsts.into_iter().flatten().collect())
    }

    /// SIGTERM in the pipeline's order, as `reagent run` leaves: the actors first, then the RRM
    /// worker, then the learner, so that what each publishes on its way out has a consumer (with
    /// every role stopped at once, a leaving actor or RRM worker waits at the high-water mark of
    /// a stream nobody reads any more). Up to 15 s per role to leave, then SIGKILL.
    pub async fn stop(&mut self) {
        let stage = |name: &str| match name {
            "learner" => 2,
            "rrm" => 1,
            _ => 0,
        };
        for s in 0..=2 {
            for r in self.roles.iter().filter(|r| stage(&r.name) == s) {
                r.terminate();
            }
            for r in self.roles.iter_mut().filter(|r| stage(&r.name) == s) {
                r.stop(Duration::from_secs(15)).await;
            }
        }
    }
}
