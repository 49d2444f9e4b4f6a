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

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cluster::progress::Progress;
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::QueueSettings;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::RunId;

use crate::report::{self, Header, Row};
use crate::{command_line, cpu_model, private_redis, redis_benchmark};

mod measure;
use clap::Args;

/// Options of `reagent bench queue`.
#[derive(Debug, Clone, Args)]
pub struct QueueBenchArgs {
    /// Messages per measurement (for each payload size and each repeat). Default: about
    /// 200 MB of payload per run, at least 10,000 and at most 50,000 messages (50,000 at 4 KiB,
    /// 10,000 at 64 KiB), so that a run is long beside its start (connections, the first
    /// batch's round trip): 10,000 messages of 4 KiB pass in under a tenth of a second.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub messages: Option<u64>,

    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536", value_name = "BYTES,…", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub sizes: Vec<u32>,

    /// Also send realistic trajectories of these many tokens (token ids, behaviour log-probs,
    /// loss mask and text, encoded as on a job's rollouts stream), comma-separated; the
    /// baseline XADDs their encoded size. 0: none.
    #[arg(long, value_delimiter = ',', default_value = "512", value_name = "TOKENS,…", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub trajectory_tokens: Vec<u32>,

    /// The Redis server to measure against (`redis://[:password@]host:port[/db]`); the bench
    /// writes streams under `reagent:{bench}:` and deletes them. Default: a private
    /// redis-server started for the bench, append-only file off (`redis.url` is not used, so a
    /// job's server is never benchmarked by accident).
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Concurrent producers, each on its own connection.
    #[arg(long, default_value_t = 2, value_name = "P", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub producers: u16,

    /// Concurrent consumers in one consumer group, each on its own connection.
    #[arg(long, default_value_t = 2, value_name = "C", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub consumers: u16,

    /// Messages per producer batch (one pipelined round trip) and per consumer read
    /// (XREADGROUP COUNT).
    #[arg(long, default_value_t = 128, value_name = "B", value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub batch: u16,

    /// How many times each measurement is repeated; the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Unmeasured runs of each side (Reagent's queue, then redis-benchmark) before the measured
    /// ones, for each payload: the server's first allocations of that size are not measured.
    #[arg(long, default_value_t = 1, value_name = "W", value_parser = clap::value_parser!(u16).range(0..=100))]
    pub warmup: u16,

    /// Threads of the runtime that drives the producers and consumers. The default, 1, is
    /// redis-benchmark's own shape (one thread, every connection on one event loop); on a
    /// machine of few cores, a second client thread takes CPU from redis-server itself.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub client_threads: u16,

    /// Print the results as one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

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
pub async fn bench(config: &ReagentConfig, args: QueueBenchArgs) -> Result<()> {
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
        let len = measure::encoded_len(measure::Payload::Trajectory { tokens: tokens as usize }, &codec)
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
    let bytes = args.sizes.iter().map(|&size| measure::Payload::Bytes(size as usize));
    let trajectories = args.trajectory_tokens.iter().filter(|&&t| t > 0);
    let payloads: Vec<measure::Payload> =
        bytes.chain(trajectories.map(|&tokens| measure::Payload::Trajectory { tokens: tokens as usize })).collect();
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
        let version = cluster::doctor::info_field(&info, "redis_version").unwrap_or("(unknown version)");
        let description = match private {
            Some(_) => format!("private redis-server {version} on {}, started for the bench", link.endpoint()),
            None => format!("redis {version} at {} (--redis-url)", link.endpoint()),
        };
        let aof = cluster::doctor::info_field(&info, "aof_enabled") == Some("1");
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
    fn size_of(&self, payload: measure::Payload) -> Result<u32> {
        match payload {
            measure::Payload::Bytes(n) => u32::try_from(n).context("a payload over 4 GiB"),
            measure::Payload::Trajectory { .. } => {
                u32::try_from(measure::encoded_len(payload, &self.codec)?).context("a trajectory's encoding over 4 GiB")
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
    async fn payload(&self, payload: measure::Payload, progress: &Progress) -> Result<Row> {
        let a = &self.args;
        let size = self.size_of(payload)?;
        let (name, tokens) = match payload {
            measure::Payload::Bytes(n) => (n.to_string(), None),
            measure::Payload::Trajectory { tokens } => (format!("t{tokens}"), Some(tokens)),
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
            let plan = measure::Plan {
                messages,
                payload,
                producers: a.producers,
                consumers: a.consumers,
                batch: a.batch,
                settings: self.settings,
            };
            let stream = self.keys.stream(&format!("queue-{name}-{rep}-{}", self.nonce));
            let rate = measure::measure_on(a.client_threads, &self.target.link, plan, &stream, progress).await?;
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
pub(crate) async fn flushall(link: &RedisLink) -> Result<()> {
    link.call("flushall", Duration::ZERO, |mut c| async move { redis::cmd("FLUSHALL").query_async::<()>(&mut c).await })
        .await
        .context("emptying the bench's redis-server")
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
