//! What `reagent bench weights` measures and prints: models sized to the asked megabytes,
//! the followers' swap reports, the commit → all-swapped latency, and the tables.

use super::*;

/// Bytes of a model's f32 weights (no value head).
pub fn weight_bytes(config: &ModelConfig) -> u64 {
    config.num_parameters() as u64 * 4
}

/// The model whose f32 weights come closest to `mb` MB (10⁶ bytes): the built-in shapes
/// (micro, tiny, small) with their layer count and MLP width varied.
pub fn model_for(mb: f64) -> ModelConfig {
    let target = mb * MB;
    let mut best: Option<(f64, ModelConfig)> = None;
    for base in [ModelConfig::micro(), ModelConfig::tiny(), ModelConfig::small()] {
        let step = 64;
        for layers in 1..=64 {
            for inter in (base.intermediate_size / 2..=base.intermediate_size * 2).step_by(step) {
                let c = ModelConfig { num_hidden_layers: layers, intermediate_size: inter, ..base.clone() };
                let err = (weight_bytes(&c) as f64 - target).abs();
                if best.as_ref().is_none_or(|(e, _)| err < *e) {
                    best = Some((err, c));
                }
            }
        }
    }
    best.map(|(_, c)| c).unwrap_or_else(ModelConfig::micro)
}

/// One follower's report for a version: when it first served it (µs since the epoch), and
/// its weight-sync actor's own notice → serving time (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swap {
    /// Wall clock when the follower saw its policy serve the version.
    pub at_us: u64,
    /// The weight-sync actor's time from noticing the version to serving it.
    pub sync_us: u64,
}

impl Swap {
    pub(super) fn encode(&self) -> String {
        format!("{} {}", self.at_us, self.sync_us)
    }

    pub(super) fn decode(s: &str) -> Option<Self> {
        let (a, b) = s.split_once(' ')?;
        Some(Self { at_us: a.parse().ok()?, sync_us: b.parse().ok()? })
    }
}

/// Commit → all followers swapped: the last follower's swap time minus the commit time.
pub fn sync_latency(commit_us: u64, swaps: &[Swap]) -> Option<Duration> {
    let last = swaps.iter().map(|s| s.at_us).max()?;
    Some(Duration::from_micros(last.saturating_sub(commit_us)))
}

/// One repeat of one size.
#[derive(Debug, Clone)]
pub(super) struct Repeat {
    pub(super) publish: Duration,
    pub(super) latency: Duration,
    /// Median over followers of their notice → serving time.
    pub(super) notice_to_serving: Duration,
    /// `fetch` alone, after the followers are done (one reader, hash checks included).
    pub(super) fetch_alone: Duration,
    /// Import into a model alone.
    pub(super) import_alone: Duration,
}

/// One size with one number of followers.
#[derive(Debug, Clone)]
pub(super) struct SizeRow {
    pub(super) mb: u32,
    pub(super) followers: u16,
    pub(super) bytes: u64,
    pub(super) tensors: usize,
    pub(super) repeats: Vec<Repeat>,
    pub(super) gets: Vec<Duration>,
    /// CPU time per GET: the server's, and this process's (the client's); `None` off Linux.
    pub(super) get_cpu: Option<(Duration, Duration)>,
}

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`, 100 on every Linux this runs on).
const USER_HZ: u64 = 100;

/// User + system CPU ticks of `pid` and of this process, from `/proc`; `None` where either
/// cannot be read.
pub(super) fn cpu_ticks(pid: Option<u32>) -> Option<(u64, u64)> {
    let read = |path: String| -> Option<u64> {
        let stat = std::fs::read_to_string(path).ok()?;
        // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
        Some(fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?)
    };
    Some((read(format!("/proc/{}/stat", pid?))?, read("/proc/self/stat".into())?))
}

/// `n` clock ticks as a duration.
pub(super) fn ticks(n: u64) -> Duration {
    Duration::from_millis(n * 1000 / USER_HZ)
}

/// The goal for `followers` fetching at once, in GETs: one follower ≤ 2 GETs; each further
/// follower needs its own copy of the bytes sent and received, which costs a GET's CPU time
/// (`get_cpu`, server and client together), and `cores` cores can at best share that work
/// evenly: 2 + (followers − 1) × get_cpu / cores / get.
pub fn bound_in_gets(followers: u16, get: Duration, get_cpu: Duration, cores: usize) -> f64 {
    let extra = f64::from(followers.saturating_sub(1)) * get_cpu.as_secs_f64() / cores.max(1) as f64;
    2.0 + extra / get.as_secs_f64().max(1e-9)
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl SizeRow {
    pub(super) fn med(&self, f: fn(&Repeat) -> Duration) -> f64 {
        median(&self.repeats.iter().map(|r| ms(f(r))).collect::<Vec<_>>())
    }

    pub(super) fn latencies(&self) -> Vec<f64> {
        self.repeats.iter().map(|r| ms(r.latency)).collect()
    }

    pub(super) fn get_ms(&self) -> f64 {
        median(&self.gets.iter().map(|d| ms(*d)).collect::<Vec<_>>())
    }

    pub(super) fn ratio(&self) -> f64 {
        self.med(|r| r.latency) / self.get_ms()
    }

    /// The goal in GETs on `cores` cores ([`bound_in_gets`]); with no CPU figure, each further
    /// follower is charged a whole GET per core (as if a GET kept one core busy).
    pub(super) fn bound(&self, cores: usize) -> f64 {
        let get = Duration::from_secs_f64(self.get_ms() / 1e3);
        let cpu = self.get_cpu.map_or(get, |(server, client)| server + client);
        bound_in_gets(self.followers, get, cpu, cores)
    }
}

pub(super) fn table(rows: &[SizeRow], cores: usize) -> String {
    let mut out = String::from(
        "| size | followers | bytes | tensors | publish ms | sync latency ms (median) | min | max | GET ms | GET CPU ms (server + client) \
         | ratio sync/GET | goal (GETs) | met |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n",
    );
    for r in rows {
        let l = r.latencies();
        let (min, max) = (l.iter().copied().fold(f64::INFINITY, f64::min), l.iter().copied().fold(0.0, f64::max));
        let cpu = r.get_cpu.map_or("–".to_string(), |(s, c)| format!("{:.0} + {:.0}", ms(s), ms(c)));
        out += &format!(
            "| {} MB | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {cpu} | {:.2} | {:.2} | {} |\n",
            r.mb,
            r.followers,
            r.bytes,
            r.tensors,
            r.med(|x| x.publish),
            r.med(|x| x.latency),
            min,
            max,
            r.get_ms(),
            r.ratio(),
            r.bound(cores),
            if r.ratio() <= r.bound(cores) { "yes" } else { "no" }
        );
    }
    out += "\nwhere the time goes (medians, ms): publish = the leader's publish call; notice→serving = a \
            follower's weight-sync actor from noticing the version to serving it (median over the followers, \
            all fetching at once); fetch alone / import alone = the same version fetched (every chunk's hash \
            checked) and imported by one process afterwards, nothing else running\n\n\
            | size | followers | publish | notice→serving | fetch alone | import alone |\n|---:|---:|---:|---:|---:|---:|\n";
    for r in rows {
        out += &format!(
            "| {} MB | {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            r.mb,
            r.followers,
            r.med(|x| x.publish),
            r.med(|x| x.notice_to_serving),
            r.med(|x| x.fetch_alone),
            r.med(|x| x.import_alone)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn models_are_sized_within_ten_percent() {
        for mb in [1.0, 10.0, 100.0] {
            let c = model_for(mb);
            c.validate().unwrap();
            let got = weight_bytes(&c) as f64 / MB;
            assert!((got - mb).abs() / mb < 0.10, "{mb} MB asked, {got} MB built: {c:?}");
        }
    }

    #[test]
    pub(super) fn the_goal_is_two_gets_plus_a_fair_share_per_further_follower() {
        let get = Duration::from_millis(100);
        assert_eq!(bound_in_gets(1, get, Duration::from_millis(150), 2), 2.0);
        // 3 more copies × 150 ms of CPU each over 2 cores = 225 ms = 2.25 GETs more.
        assert!((bound_in_gets(4, get, Duration::from_millis(150), 2) - 4.25).abs() < 1e-9);
        assert!(bound_in_gets(4, get, Duration::from_millis(150), 1) > bound_in_gets(4, get, get, 2));
        assert!(cpu_ticks(Some(std::process::id())).is_some(), "this process's /proc/PID/stat parses");
        assert_eq!(cpu_ticks(None), None);
        assert_eq!(ticks(150), Duration::from_millis(1500));
    }

    #[test]
    pub(super) fn latency_is_the_last_swap_after_the_commit() {
        let swaps = [Swap { at_us: 1_500, sync_us: 10 }, Swap { at_us: 3_000, sync_us: 10 }];
        assert_eq!(sync_latency(1_000, &swaps), Some(Duration::from_micros(2_000)));
        assert_eq!(sync_latency(1_000, &[]), None);
        let s = Swap { at_us: 42, sync_us: 7 };
        assert_eq!(Swap::decode(&s.encode()), Some(s));
        assert_eq!(Swap::decode("x"), None);
    }
}
