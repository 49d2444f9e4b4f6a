//! `reagent bench queue`: Reagent's queue end to end beside redis-benchmark's raw XADD, on the
//! same server, in the same run, so that the ratio says how much the queue costs over Redis.
//!
//! ```text
//!  server: --redis-url, or a private redis-server (append-only file off)
//!  for each size, for each repeat:   reagent produce → consume → ack   then   redis-benchmark XADD
//!  report: median msgs/s, median XADD/s, ratio  (Markdown table or --json)
//! ```
//!
//! Bench streams live under the `bench` run's keys (`reagent:{bench}:…`) and are deleted after
//! each measurement, so a shared server is left as it was found.

mod breakdown;
mod cartpole;
mod efficiency;
mod env;
mod fanout;
mod generate;
mod generation;
mod learner;
mod learner_memory;
mod queue;
mod redis_benchmark;
mod report;
mod scale;
mod training;
mod trl;
mod venv;
mod weights;

use std::path::PathBuf;
use std::time::Duration;

use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::QueueSettings;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::RunId;

use crate::cli::QueueBenchArgs;
pub use cartpole::{bench as cartpole, CartpoleBenchArgs};
pub use efficiency::bench as pipeline_efficiency;
pub use env::bench as env_steps;
pub use fanout::{bench as fanout, follower as fanout_follower, FanoutBenchArgs, FanoutFollowerArgs};
pub use generate::{bench as generate, GenerateBenchArgs};
pub use learner::bench as learner_steps;
pub use learner_memory::{bench as learner_memory, LearnerMemoryArgs};
use report::{Header, Row};
pub use scale::bench as scale_pipeline;
pub use trl::{bench as trl, TrlBenchArgs};
pub use weights::{bench as weight_sync, follower as weight_sync_follower};

/// How long an unreachable server is retried before the bench gives up.
const REACH_RETRY_FOR: Duration = Duration::from_secs(3);
/// Bytes the codec and the item add around a payload (version byte, varint lengths, seq).
const FRAMING_BYTES: u64 = 32;
/// Payload bytes per run without `--messages`: long enough that a run's start is a small part
/// of it (10,000 messages of 4 KiB pass in under a tenth of a second here).
const AUTO_RUN_BYTES: u64 = 200_000_000;
/// The messages per run without `--messages`, whatever the payload's size.
const AUTO_MESSAGES: std::ops::RangeInclusive<u64> = 10_000..=50_000;

/// Runs the queue bench and prints its report on stdout.
pub async fn queue(config: &ReagentConfig, args: QueueBenchArgs) -> Result<()> {
    let Some(&first_size) = args.sizes.first() else { bail!("--sizes: give at least one payload size") };
    for &size in &args.sizes {
        if u64::from(size) + FRAMING_BYTES > config.queue.max_payload_bytes {
            bail!("--sizes: {size} bytes does not fit queue.max_payload_bytes ({})", config.queue.max_payload_bytes);
        }
    }
    let baseline = redis_benchmark::find_binary()?;
    let target = Target::open(config, args.redis_url.as_deref()).await?;
    // The job's high-water mark bounds policy lag (32 trajectories by default), below one batch
    // of this bench: producers would wait at it after every batch and the figure would measure
    // that backpressure, not the queue (it halved the 4 KiB ratio: 0.44 → 0.23). The bench
    // raises the mark to four batches per producer and counts every wait that remains.
    let mut settings = QueueSettings::from(&config.queue);
    let floor = 4 * u64::from(args.batch) * u64::from(args.producers);
    settings.high_water_mark = settings.high_water_mark.max(floor);
    let codec = protocol::codec::Codec::new(config.queue.max_payload_bytes);
    for &tokens in args.trajectory_tokens.iter().filter(|&&t| t > 0) {
        let len = queue::encoded_len(queue::Payload::Trajectory { tokens: tokens as usize }, &codec)
            .with_context(|| format!("--trajectory-tokens: a trajectory of {tokens} tokens"))?;
        if len + FRAMING_BYTES > config.queue.max_payload_bytes {
            bail!(
                "--trajectory-tokens: {tokens} tokens encode to {len} bytes, more than queue.max_payload_bytes ({})",
                config.queue.max_payload_bytes
            );
        }
    }
    let bench = QueueBench {
        codec,
        settings,
        waits: std::sync::atomic::AtomicU64::new(0),
        keys: Keys::new(&RunId::new("bench")?),
        nonce: format!("{:08x}", rand::random::<u32>()),
        baseline,
        target,
        args,
    };
    let header = bench.header(first_size);
    if !bench.args.json {
        println!("{}", report::preamble(&header));
        println!(
            "high-water mark: {} (queue.high_water_mark {}, raised to at least 4 batches per producer)\n",
            bench.settings.high_water_mark, config.queue.high_water_mark
        );
    }

    let args = &bench.args;
    let bytes = args.sizes.iter().map(|&size| queue::Payload::Bytes(size as usize));
    let trajectories = args.trajectory_tokens.iter().filter(|&&t| t > 0);
    let payloads: Vec<queue::Payload> =
        bytes.chain(trajectories.map(|&tokens| queue::Payload::Trajectory { tokens: tokens as usize })).collect();
    let mut total = 0;
    for &payload in &payloads {
        total += bench.messages_for(bench.size_of(payload)?) * u64::from(args.repeats + args.warmup) * 2;
    }
    let progress = Progress::new(
        total,
        "bench queue",
        "messages",
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} msgs  {msg}",
    )
    .context("progress bar template")?;
    let mut rows = Vec::new();
    for payload in payloads {
        rows.push(bench.payload(payload, &progress).await?);
    }
    progress.finish_and_clear();

    if args.json {
        println!("{}", report::json(&header, &rows));
    } else {
        print!("{}", report::table(&rows));
        let waits = bench.waits.load(std::sync::atomic::Ordering::Relaxed);
        println!("producer waits at the high-water mark: {waits}");
    }
    Ok(())
}

/// The server under test: given, or private to this bench (stopped when dropped).
struct Target {
    url: String,
    link: RedisLink,
    /// Which server, in words, for the report.
    description: String,
    /// Whether its append-only file is on.
    aof: bool,
    _private: Option<RedisServer>,
}

impl Target {
    /// Connects to `url`, or starts a private redis-server (append-only file off) without one.
    async fn open(config: &ReagentConfig, url: Option<&str>) -> Result<Self> {
        let (url, private) = match url {
            Some(url) => (url.to_string(), None),
            None => {
                let options = RedisServerOptions { appendonly: false, ..Default::default() };
                let server = private_redis(options).context("starting redis-server")?;
                (server.url(), Some(server))
            }
        };
        let settings = LinkSettings::from(&config.redis);
        // Fail fast on a wrong URL; measurements then ride out blips with the full retry budget.
        let probe = LinkSettings { retry_for: settings.retry_for.min(REACH_RETRY_FOR), ..settings };
        RedisLink::connect(&url, probe)?.ping().await?;
        let link = RedisLink::connect(&url, settings)?;
        let info: String = link
            .call("info", Duration::ZERO, |mut c| async move { redis::cmd("INFO").query_async(&mut c).await })
            .await?;
        let version = crate::doctor::info_field(&info, "redis_version").unwrap_or("(unknown version)");
        let description = match private {
            Some(_) => format!("private redis-server {version} on {}, started for the bench", link.endpoint()),
            None => format!("redis {version} at {} (--redis-url)", link.endpoint()),
        };
        let aof = crate::doctor::info_field(&info, "aof_enabled") == Some("1");
        Ok(Self { url, link, description, aof, _private: private })
    }
}

/// One `reagent bench queue` invocation: its options and what every measurement shares.
struct QueueBench {
    args: QueueBenchArgs,
    /// The job's codec: what a trajectory's entry carries, and so what its baseline XADDs.
    codec: protocol::codec::Codec,
    target: Target,
    settings: QueueSettings,
    /// Times a producer waited at the high-water mark, over every run.
    waits: std::sync::atomic::AtomicU64,
    keys: Keys,
    /// Keeps this run's streams apart from any other bench's on a shared server.
    nonce: String,
    baseline: PathBuf,
}

impl QueueBench {
    fn header(&self, first_size: u32) -> Header {
        let a = &self.args;
        Header {
            command: command_line(),
            nproc: std::thread::available_parallelism().map_or(1, usize::from),
            cpu: cpu_model(),
            server: self.target.description.clone(),
            aof: self.target.aof,
            messages: a.messages,
            warmup: a.warmup,
            producers: a.producers,
            consumers: a.consumers,
            batch: a.batch,
            client_threads: a.client_threads,
            repeats: a.repeats,
            baseline: format!("{}, on a fresh stream per size and repeat", self.xadd(first_size, 0).display()),
        }
    }

    /// Messages per run of a payload of `size` bytes: `--messages`, or about [`AUTO_RUN_BYTES`]
    /// of payload, within [`AUTO_MESSAGES`].
    fn messages_for(&self, size: u32) -> u64 {
        self.args.messages.unwrap_or_else(|| auto_messages(size))
    }

    /// The bytes one message of `payload` puts in its entry (a trajectory: its encoding).
    fn size_of(&self, payload: queue::Payload) -> Result<u32> {
        match payload {
            queue::Payload::Bytes(n) => u32::try_from(n).context("a payload over 4 GiB"),
            queue::Payload::Trajectory { .. } => {
                u32::try_from(queue::encoded_len(payload, &self.codec)?).context("a trajectory's encoding over 4 GiB")
            }
        }
    }

    /// The redis-benchmark run for one size and repeat (`rep` past the repeats: a warm-up).
    fn xadd(&self, size: u32, rep: u16) -> redis_benchmark::XaddRun {
        redis_benchmark::XaddRun {
            binary: self.baseline.clone(),
            url: self.target.url.clone(),
            stream: self.keys.stream(&format!("xadd-{size}-{rep}-{}", self.nonce)),
            messages: self.messages_for(size),
            size: size as usize,
        }
    }

    /// Every repeat of one payload, Reagent and redis-benchmark interleaved; the baseline
    /// XADDs as many bytes as the payload's entry carries (a trajectory: its encoding).
    async fn payload(&self, payload: queue::Payload, progress: &Progress) -> Result<Row> {
        let a = &self.args;
        let size = self.size_of(payload)?;
        let (name, tokens) = match payload {
            queue::Payload::Bytes(n) => (n.to_string(), None),
            queue::Payload::Trajectory { tokens } => (format!("t{tokens}"), Some(tokens)),
        };
        let messages = self.messages_for(size);
        let (mut reagent_runs, mut xadd_runs, mut row_waits) = (Vec::new(), Vec::new(), 0);
        for rep in 0..a.warmup + a.repeats {
            let warm = rep < a.warmup;
            let which = if warm {
                format!("warm-up {}/{}", rep + 1, a.warmup)
            } else {
                format!("run {}/{}", rep - a.warmup + 1, a.repeats)
            };
            let label = format!("{} {which}", report::payload_label(size as usize, tokens));
            progress.set_message(format!("{label}: reagent"));
            let plan = queue::Plan {
                messages,
                payload,
                producers: a.producers,
                consumers: a.consumers,
                batch: a.batch,
                settings: self.settings,
            };
            let stream = self.keys.stream(&format!("queue-{name}-{rep}-{}", self.nonce));
            let rate = queue::measure_on(a.client_threads, &self.target.link, plan, &stream, progress).await?;
            let waits = protocol::metrics::QUEUE_BACKPRESSURE_WAITS
                .with_label_values(&[protocol::metrics::stream_label(&stream)])
                .get();
            if !warm {
                reagent_runs.push(rate);
                self.waits.fetch_add(waits, std::sync::atomic::Ordering::Relaxed);
                row_waits += waits;
            }

            progress.set_message(format!("{label}: redis-benchmark"));
            let run = self.xadd(size, rep);
            let deadline = Duration::from_secs(60) + Duration::from_secs(messages * u64::from(size) / 10_000_000);
            let rate = run.run(deadline).await;
            unlink(&self.target.link, &run.stream).await?;
            let rate = rate?;
            if !warm {
                xadd_runs.push(rate);
            }
            progress.inc(messages);
        }
        Ok(Row {
            trajectory_tokens: tokens,
            producer_waits: row_waits,
            messages,
            ..Row::new(size as usize, reagent_runs, xadd_runs)
        })
    }
}

/// Messages per run of `size`-byte payloads without `--messages`: about [`AUTO_RUN_BYTES`],
/// within [`AUTO_MESSAGES`].
fn auto_messages(size: u32) -> u64 {
    (AUTO_RUN_BYTES / u64::from(size.max(1))).clamp(*AUTO_MESSAGES.start(), *AUTO_MESSAGES.end())
}

async fn unlink(link: &RedisLink, key: &str) -> Result<()> {
    link.call("unlink", Duration::ZERO, |mut c| async move {
        redis::cmd("UNLINK").arg(key).query_async::<u64>(&mut c).await
    })
    .await
    .with_context(|| format!("deleting the bench stream {key}"))?;
    Ok(())
}

/// Empties the bench's private server between measurements.
async fn flushall(link: &RedisLink) -> Result<()> {
    link.call("flushall", Duration::ZERO, |mut c| async move { redis::cmd("FLUSHALL").query_async::<()>(&mut c).await })
        .await
        .context("emptying the bench's redis-server")
}

/// The command line as typed, quoted where a shell would need it.
fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::env::args().map(quote).collect::<Vec<_>>().join(" ")
}

/// The CPU model from /proc/cpuinfo (Linux), if it names one.
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
}

/// A bench's private redis-server, started on the calling thread. On the process's main thread
/// (where the CLI's future runs) the server is also told to stop when that thread ends, so a
/// bench killed with SIGKILL leaves no server behind ([`protocol::child`]); on any other thread,
/// which might retire before the bench ends, it is not, and the server's destructor alone stops
/// it. Blocks until the server answers PING.
pub(crate) fn private_redis(options: RedisServerOptions) -> protocol::Result<RedisServer> {
    RedisServer::start(RedisServerOptions { stop_with_parent: protocol::child::on_main_thread(), ..options })
}

#[cfg(test)]
mod tests {
    use super::auto_messages;

    #[test]
    fn runs_carry_about_200_mb_within_the_bounds() {
        assert_eq!(auto_messages(4096), 48_828, "200,000,000 / 4,096, rounded down");
        assert_eq!(auto_messages(65_536), 10_000, "3,051 would be too short a run: the floor");
        assert_eq!(auto_messages(64), 50_000, "3,125,000 would take minutes: the ceiling");
        assert_eq!(auto_messages(6_683), 29_926, "a 512-token trajectory's encoding");
    }
}
