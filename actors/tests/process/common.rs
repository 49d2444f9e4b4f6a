//! Shared helpers of the actor-process tests: a real redis-server, a small job config, the
//! role run in a task, the rollouts stream read back, and condition waits with deadlines.

#![allow(dead_code, reason = "each test crate uses a different part of the shared helpers")]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use actors::ActorError;
use protocol::codec::Codec;
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::role::RoleReport;
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::{GroupId, PolicyVersion, RunId, Trajectory};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long any single condition in these tests may take on a loaded CPU.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A redis-server of its own, and the run's names.
pub struct Harness {
    pub redis: RedisServer,
    pub run: RunId,
    pub keys: Keys,
    pub link: RedisLink,
}

impl Harness {
    pub fn new() -> Self {
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        let redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
        let run = RunId::new("t").unwrap();
        let settings = LinkSettings { retry_for: Duration::from_secs(20), ..LinkSettings::default() };
        let link = RedisLink::connect(&redis.url(), settings).unwrap();
        Self { keys: Keys::new(&run), run, redis, link }
    }

    /// The job: fast settings, `feedback`, and `actor` lines over the small [actor] below.
    pub fn config(&self, feedback: &str, actor: &str) -> ReagentConfig {
        let mut section: toml::Table = toml::from_str(
            "slots = 2\ngroup_size = 3\nmax_batch = 8\nmax_wait_ms = 5\nmax_new_tokens = 8\nmax_turns = 2\n\
             max_context_tokens = 1024\nsystem_prompt = \"omit\"\ndevice = \"cpu\"\nrestart_backoff_min_ms = 10\n",
        )
        .unwrap();
        section.extend(toml::from_str::<toml::Table>(actor).expect("actor lines are TOML"));
        // The learner's view of the group agrees with the actors' (checked when the job loads).
        let group = section["group_size"].clone();
        let text = format!(
            "[run]\nid = \"{run}\"\nfeedback = \"{feedback}\"\n\
             [redis]\nurl = \"{url}\"\nretry_for_ms = 10000\n\
             [metrics]\nlisten = \"127.0.0.1:0\"\n\
             [weights]\npoll_interval_ms = 100\n\
             [learner.service]\ngroup_size = {group}\n\
             [actor]\n{section}",
            run = self.run,
            url = self.redis.url(),
        );
        ReagentConfig::from_toml_str(&text).expect("the test job is valid")
    }

    pub fn store(&self) -> WeightStore {
        WeightStore::new(&self.link, &self.run, WeightSettings::default())
    }

    /// Every trajectory in the rollouts stream, decoded and validated, in stream order.
    pub async fn rollouts(&self) -> Vec<Trajectory> {
        let entries = protocol::queue::read_all(&self.link, &self.keys.rollouts()).await.unwrap();
        let codec = Codec::default();
        entries
            .iter()
            .map(|e| {
                codec.decode_valid::<Trajectory>(e.payload.as_deref().unwrap_or_default()).expect("a valid trajectory")
            })
            .collect()
    }

    /// Clients connected to the server now (CLIENT LIST), this harness's own connection included.
    pub async fn clients(&self) -> usize {
        let list: String = self
            .link
            .call("client list", Duration::ZERO, |mut c| async move {
                redis::cmd("CLIENT").arg("LIST").query_async(&mut c).await
            })
            .await
            .unwrap();
        list.lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// RPUSHes a Codec-encoded value to `key`, as the RRM worker does.
    pub async fn rpush<T: serde::Serialize>(&self, key: &str, value: &T) {
        let bytes = Codec::default().encode(value).unwrap();
        let key = key.to_string();
        self.link
            .call("rpush", Duration::ZERO, |mut c| {
                let (key, bytes) = (key.clone(), bytes.clone());
                async move { redis::cmd("RPUSH").arg(&key).arg(bytes).query_async::<u64>(&mut c).await }
            })
            .await
            .unwrap();
    }
}

/// An actor process (the role) running in a task.
pub struct Process {
    pub cancel: CancellationToken,
    pub task: JoinHandle<Result<RoleReport, ActorError>>,
}

impl Process {
    pub fn start(cfg: ReagentConfig) -> Self {
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let task = tokio::spawn(async move { actors::run_role(&cfg, token).await });
        Self { cancel, task }
    }

    /// Cancels (SIGTERM) and waits for the leave; returns the report and how long it took.
    pub async fn leave(self) -> (RoleReport, Duration) {
        let started = Instant::now();
        self.cancel.cancel();
        let report = tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the leave ends in bounded time")
            .expect("the role task does not panic")
            .expect("the role leaves without error");
        (report, started.elapsed())
    }
}

/// The actor report's counter `name`; fails the test when the role did not report one.
pub fn count(report: &RoleReport, name: &str) -> u64 {
    report.counter(name).unwrap_or_else(|| panic!("the actor reported no counter {name:?}: {report}"))
}

/// [`testkit::wait_until`] with this harness's [`PATIENCE`].
pub async fn wait_until<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    testkit::wait_until(what, PATIENCE, cond).await;
}

/// Trajectories by group.
pub fn groups(ts: &[Trajectory]) -> BTreeMap<GroupId, Vec<&Trajectory>> {
    let mut out: BTreeMap<GroupId, Vec<&Trajectory>> = BTreeMap::new();
    for t in ts {
        out.entry(t.group_id).or_default().push(t);
    }
    out
}

/// Publishes fresh tiny-model weights as `version` (tch work off the runtime).
pub async fn publish_weights(store: &WeightStore, version: PolicyVersion) {
    let tensors = tokio::task::spawn_blocking(|| {
        let m = policy::LoadedModel::fresh(&policy::ModelConfig::tiny(), tch::Device::Cpu, false).unwrap();
        policy::weights::export(&m.vs).unwrap()
    })
    .await
    .unwrap();
    let named: Vec<_> = tensors.iter().map(|t| t.as_named()).collect();
    store.publish(version, &named).await.unwrap();
}
