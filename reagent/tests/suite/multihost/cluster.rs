//! The harness of the multi-host test: the job file, the hosts with Redis and the role
//! processes on them, polling with deadlines, graceful leaves, draining and the final count.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use protocol::keys::{Keys, LEARNER_GROUP, RRM_GROUP};
use protocol::link::{LinkSettings, RedisLink};
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::{RunId, ScoredTrajectory, Trajectory};

use super::netns::Net;
use super::observe::{self, Entry, Tail};
use super::procs::Proc;

/// The run id of the job.
pub const RUN_ID: &str = "multihost";
/// Redis's port on its host (each host has its own port space).
const REDIS_PORT: u16 = 6379;
/// actor.grace_s: how long a leaving actor may take to finish its in-flight groups.
pub const GRACE_S: u64 = 10;

fn job(dir: &Path) -> String {
    format!(
        r#"[run]
id = "{RUN_ID}"
dir = "{runs}"
feedback = "score"

[redis]
op_timeout_ms = 2000
retry_for_ms = 60000

[queue]
# Nothing is trimmed, so that the test can count every trajectory on both streams.
trim_every = 1000000000
block_ms = 200
claim_idle_ms = 15000

[metrics]
listen = ""

[learner]
model = "micro"
checkpoint_every = 1

[learner.service]
group_size = 4
groups_per_update = 4
max_wait_ms = 1500

[actor]
model = "micro"
slots = 1
group_size = 4
max_new_tokens = 16
max_turns = 3
wait_for_weights_ms = 120000
grace_s = {GRACE_S}
"#,
        runs = dir.join("runs").display()
    )
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The hosts, the processes on them and what the test reads. Processes are dropped (killed)
/// before the namespaces they run in.
pub struct Cluster {
    procs: Vec<Proc>,
    link: RedisLink,
    store: WeightStore,
    keys: Keys,
    /// The rollouts stream as read so far.
    pub rollouts: Tail<Trajectory>,
    /// The scored stream as read so far.
    pub scored: Tail<ScoredTrajectory>,
    dir: PathBuf,
    config: PathBuf,
    redis_url: String,
    /// The hosts.
    pub net: Net,
}

impl Cluster {
    /// Starts redis-server on the `redis` host and connects the observer to it.
    pub async fn start(net: Net) -> Self {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("multihost-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("redis")).unwrap();
        let config = dir.join("job.toml");
        std::fs::write(&config, job(&dir)).unwrap();
        let addr = net.host("redis").addr;
        let redis = Proc::spawn(
            &net,
            "redis",
            "redis",
            Path::new("redis-server"),
            &[
                "--port",
                &REDIS_PORT.to_string(),
                "--bind",
                &addr.to_string(),
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.join("redis").to_str().unwrap(),
            ],
            &[],
            &dir,
        );
        let redis_url = format!("redis://{addr}:{REDIS_PORT}");
        let link = RedisLink::connect(&redis_url, LinkSettings::default()).unwrap();
        link.ping().await.unwrap_or_else(|e| panic!("the observer cannot reach redis on its host: {e}"));
        let run = RunId::new(RUN_ID).unwrap();
        let keys = Keys::new(&run);
        Self {
            procs: vec![redis],
            store: WeightStore::new(&link, &run, WeightSettings::default()),
            rollouts: Tail::new(keys.rollouts()),
            scored: Tail::new(keys.scored()),
            link,
            keys,
            dir,
            config,
            redis_url,
            net,
        }
    }

    /// Starts `reagent <role>` on the host of the same name.
    pub fn role(&mut self, host: &str, role: &str, env: &[(&str, String)]) {
        let mut all = vec![("REAGENT__REDIS__URL", self.redis_url.clone())];
        all.extend(env.iter().cloned());
        let args = ["--config", self.config.to_str().unwrap(), role];
        let p = Proc::spawn(&self.net, host, host, Path::new(env!("CARGO_BIN_EXE_reagent")), &args, &all, &self.dir);
        self.procs.push(p);
    }

    pub fn actor(&mut self, name: &str) {
        self.role(name, "actor", &[("REAGENT__ACTOR__ID", name.to_string())]);
    }

    pub fn proc(&mut self, name: &str) -> &mut Proc {
        self.procs.iter_mut().find(|p| p.name == name).unwrap_or_else(|| panic!("no process {name}"))
    }

    /// The newest published policy version (0 before any).
    pub async fn version(&self) -> u64 {
        self.store.latest_version().await.unwrap().map_or(0, |v| v.0)
    }

    /// Reads what both streams gained.
    pub async fn refresh(&mut self) {
        self.rollouts.update(&self.link).await;
        self.scored.update(&self.link).await;
    }

    /// Polls `check` every 250 ms ([`testkit::poll_until`]) until it holds, failing after
    /// `deadline` or as soon as one of `alive` exits.
    pub async fn wait_until<F>(&mut self, what: &str, deadline: Duration, alive: &[&str], mut check: F)
    where
        F: FnMut(&mut Self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + '_>>,
    {
        let started = Instant::now();
        let state = &tokio::sync::Mutex::new((self, &mut check));
        let polled = testkit::poll_until(deadline, Duration::from_millis(250), || async move {
            let mut guard = state.lock().await;
            let (cluster, check) = &mut *guard;
            if check(cluster).await {
                return true;
            }
            for name in alive {
                cluster.proc(name).assert_alive(&format!("while waiting for {what}"));
            }
            false
        })
        .await;
        assert!(polled.is_ok(), "timed out after {deadline:?} waiting for {what}");
        eprintln!("multihost: {what} after {:.1} s", started.elapsed().as_secs_f64());
    }

    /// SIGTERM to `name`; asserts that it exits 0 within `within`; returns how long it took.
    pub async fn leave(&mut self, name: &str, within: Duration) -> Duration {
        let p = self.proc(name);
        let (status, took) = p.stop(within + Duration::from_secs(30)).await;
        let status = status.unwrap_or_else(|| panic!("{name} did not leave within {took:?} of SIGTERM"));
        assert!(status.success(), "{name} left with {status}:\n{}", p.tail(30));
        assert!(took <= within, "{name} took {took:?} to leave, more than {within:?}");
        eprintln!("multihost: {name} left cleanly in {:.1} s", took.as_secs_f64());
        took
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for p in &self.procs {
                eprintln!("----- {} ({}) -----\n{}", p.name, p.log.display(), p.tail(25));
            }
            eprintln!("multihost: the run's files are kept in {}", self.dir.display());
        } else if std::env::var_os("REAGENT_TEST_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The entries of `entries` that `actor` produced.
pub fn from_actor<'a>(
    entries: &'a [Entry<ScoredTrajectory>],
    actor: &'a str,
) -> impl Iterator<Item = &'a Entry<ScoredTrajectory>> {
    entries.iter().filter(move |e| e.item.trajectory.actor_id.0 == actor)
}

impl Cluster {
    /// Waits until the RRM group has nothing pending or undelivered and the learner group
    /// nothing undelivered, with its pending count 0 or unchanged for 4 s (stale drops are
    /// acknowledged with the next checkpoint, which the learner takes when it stops).
    pub async fn drain(&mut self) {
        let (rollouts, scored) = (self.keys.rollouts(), self.keys.scored());
        let started = Instant::now();
        let mut last = (u64::MAX, Instant::now());
        loop {
            let rrm = observe::group_state(&self.link, &rollouts, RRM_GROUP).await;
            let (pending, lag) = observe::group_state(&self.link, &scored, LEARNER_GROUP).await;
            if pending != last.0 {
                last = (pending, Instant::now());
            }
            if rrm == (0, 0) && lag == 0 && (pending == 0 || last.1.elapsed() > Duration::from_secs(4)) {
                eprintln!("multihost: queues drained after {:.1} s", started.elapsed().as_secs_f64());
                return;
            }
            for name in ["learner", "rrm"] {
                self.proc(name).assert_alive("while the queues drained");
            }
            let state = format!("rrm (pending, lag) {rrm:?}, learner {:?}", (pending, lag));
            assert!(started.elapsed() < Duration::from_secs(90), "the queues did not drain: {state}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// After every role has stopped: counts by trajectory id over both streams and the learner's
    /// newest checkpoint ledger, asserts that nothing was lost or applied twice and that the
    /// learner trained on each of `actors`; returns the checkpoint's policy version.
    pub async fn account(&mut self, actors: &[&str]) -> u64 {
        let (rollouts, scored) = (self.keys.rollouts(), self.keys.scored());
        self.refresh().await;
        let ids = |it: &mut dyn Iterator<Item = &str>| {
            let mut counts: HashMap<String, usize> = HashMap::new();
            for id in it {
                *counts.entry(id.to_string()).or_default() += 1;
            }
            counts
        };
        let on_rollouts = ids(&mut self.rollouts.entries.iter().map(|e| e.id.as_str()));
        let on_scored = ids(&mut self.scored.entries.iter().map(|e| e.id.as_str()));
        let ledger = observe::newest_ledger(&self.dir.join("runs").join(RUN_ID).join("checkpoints"));
        let consumed = ids(&mut ledger.consumed.iter().map(|(id, _)| id.as_str()));
        let trained = ledger.consumed.iter().filter(|(_, t)| *t).count();
        let dup = |m: &HashMap<String, usize>| m.values().filter(|&&n| n > 1).count();
        eprintln!(
            "multihost: {} trajectories on rollouts ({} ids delivered twice), {} on scored ({} twice); learner \
             consumed {} ({trained} trained, {} dropped as stale) up to step {} version {}",
            on_rollouts.len(),
            dup(&on_rollouts),
            on_scored.len(),
            dup(&on_scored),
            consumed.len(),
            ledger.consumed.len() - trained,
            ledger.step,
            ledger.version
        );
        let keys_of = |m: &HashMap<String, usize>| m.keys().cloned().collect::<HashSet<_>>();
        let (r, s, l) = (keys_of(&on_rollouts), keys_of(&on_scored), keys_of(&consumed));
        for (a, b, what) in [
            (&r, &s, "lost between rollouts and scored"),
            (&s, &r, "scored ids never on rollouts"),
            (&s, &l, "scored but never consumed by the learner"),
            (&l, &s, "consumed ids never scored"),
        ] {
            let missing: Vec<_> = a.difference(b).collect();
            assert!(missing.is_empty(), "{what}: {missing:?}");
        }
        let twice: Vec<_> = consumed.iter().filter(|(_, &n)| n > 1).collect();
        assert!(twice.is_empty(), "consumed more than once by the learner: {twice:?}");
        assert!(trained > 0, "the learner trained on nothing");
        for stream in [&rollouts, &scored] {
            let dead = Keys::dead_letter(stream);
            assert_eq!(observe::stream_len(&self.link, &dead).await, 0, "{dead} holds dead letters");
        }
        assert_eq!(observe::group_state(&self.link, &rollouts, RRM_GROUP).await, (0, 0), "rrm group not drained");
        assert_eq!(observe::group_state(&self.link, &scored, LEARNER_GROUP).await, (0, 0), "learner group not drained");

        // Every actor's work reached the learner, the joiner's and the cut host's included.
        let actor_of: HashMap<&str, &str> =
            self.scored.entries.iter().map(|e| (e.id.as_str(), e.item.trajectory.actor_id.0.as_str())).collect();
        for &actor in actors {
            let n = ledger.consumed.iter().filter(|(id, t)| *t && actor_of.get(id.as_str()) == Some(&actor)).count();
            assert!(n > 0, "the learner trained on nothing from {actor}");
        }
        ledger.version
    }
}
