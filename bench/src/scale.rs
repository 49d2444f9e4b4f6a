//! `reagent bench scale`: how the whole pipeline's throughput grows with the number of actor
//! processes. For each point, a private redis-server, the learner, one RRM worker and N actors
//! run as separate `reagent` processes (one libtorch thread each, as `reagent run` starts them)
//! on the job's configuration with a built-in model; after a warm-up, a fixed window is timed.
//!
//! ```text
//!  per point (N actors), per repeat:
//!    redis-server ─► learner ── first weights ──► rrm + actor-1 … actor-N
//!    every actor has a scored trajectory ─► --warmup s ─► window of --seconds:
//!        scored stream entries in the window → trajectories/s and agent tokens/s
//!        learner metrics.jsonl updates in the window → trained trajectories/s
//!        /proc/stat (machine) and /proc/<pid>/stat (the roles) → CPU
//!    then one more actor starts: seconds until its first trajectory is on the scored stream
//! ```
//!
//! Times come from Redis's stream ids (milliseconds), on this machine's clock.

mod pipeline;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use protocol::config::ReagentConfig;
use protocol::weights::WeightStore;
use protocol::wire::RunId;

use super::breakdown::{stream_times, StreamTimes};
use super::report::median;
use clap::Args;
use pipeline::Pipeline;

/// Options of `reagent bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleBenchArgs {
    /// Actor process counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", value_name = "N,…", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub actors: Vec<u16>,

    /// Seconds of the timed window of each point.
    #[arg(long, default_value_t = 30.0, value_name = "S")]
    pub seconds: f64,

    /// Seconds between every actor having a trajectory scored and the window's start.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub warmup: f64,

    /// How many times each point is measured; the median is reported.
    #[arg(long, default_value_t = 1, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// The model of learner and actors: a built-in size (micro, tiny, small) or a model directory.
    #[arg(long, default_value = "micro", value_name = "MODEL")]
    pub model: String,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One measurement: N actors, one repeat.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Point {
    /// Actor processes.
    pub actors: u16,
    /// Trajectories that reached the scored stream (the learner's input) per second.
    pub scored_per_s: f64,
    /// Trajectories the learner trained on per second (metrics.jsonl); stale ones are dropped.
    pub trained_per_s: f64,
    /// Agent (generated) tokens per second in the scored trajectories.
    pub agent_tokens_per_s: f64,
    /// Busy share of every core of the machine over the window, in percent.
    pub machine_cpu_pct: f64,
    /// CPU time of the role processes over the window, in cores.
    pub roles_cpu_cores: f64,
    /// Seconds from a new actor's start to its first trajectory on the scored stream.
    pub join_s: f64,
    /// What the window's scored trajectories say of their own time (`bench pipeline` prints
    /// it; of the first repeat in a median point).
    #[serde(skip)]
    pub stream: StreamTimes,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// (busy, total) jiffies of all cores, from the first line of /proc/stat.
fn machine_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum(); // user nice system idle iowait irq softirq steal
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// utime + stime of one process, in clock ticks (0 once it is gone).
pub(super) fn process_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    // After the command name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime stime … (proc(5)).
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// Trajectories the learner trained on between `t0` and `t1` (ms), from its metrics.jsonl.
fn trained_between(metrics: &Path, t0: u64, t1: u64) -> usize {
    let text = std::fs::read_to_string(metrics).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["at_ms"].as_u64().is_some_and(|t| t >= t0 && t < t1))
        .map(|r| r["trajectories"].as_u64().unwrap_or(0) as usize)
        .sum()
}

/// One point: N actors, measured once.
pub(super) async fn measure(
    base: &ReagentConfig,
    args: &ScaleBenchArgs,
    n: u16,
    dir: &Path,
    run: &str,
) -> Result<Point> {
    let mut p = Pipeline::new(base, args, dir, run).await?;
    let learner = p.spawn("learner", "learner", &[])?;
    let store = WeightStore::new(&p.link, &RunId::new(run)?, (&base.weights).into());
    let started = Instant::now();
    while store.latest_version().await?.is_none() {
        p.check_alive()?;
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the learner published no weights within 120 s; see {}", dir.join("logs").display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut pids = vec![learner, p.spawn("rrm", "rrm", &[("REAGENT__RRM__CONSUMER", "rrm-1")])?];
    let ids: Vec<String> = (1..=n).map(|i| format!("actor-{i}")).collect();
    for id in &ids {
        pids.push(p.spawn(id, "actor", &[("REAGENT__ACTOR__ID", id)])?);
    }
    p.first_scored(&ids, 0, Duration::from_secs(300)).await?;
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;

    let (t0, cpu0, roles0) = (now_ms(), machine_jiffies(), pids.iter().map(|&q| process_ticks(q)).sum::<u64>());
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    let (t1, cpu1, roles1) = (now_ms(), machine_jiffies(), pids.iter().map(|&q| process_ticks(q)).sum::<u64>());
    p.check_alive()?;
    let window = (t1 - t0) as f64 / 1000.0;
    let scored = p.scored_between(&format!("{t0}-0"), &format!("{}-{}", t1 - 1, u64::MAX)).await?;
    let tokens: usize = scored.iter().map(|(_, _, st)| st.trajectory.trained_tokens()).sum();
    let trained = trained_between(&dir.join(run).join("metrics.jsonl"), t0, t1);
    // SAFETY: sysconf(3) has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;

    // A newcomer: from its start to its first trajectory on the learner's stream.
    let join_at = now_ms();
    p.spawn("join", "actor", &[("REAGENT__ACTOR__ID", "actor-join")])?;
    let first = p.first_scored(&["actor-join".to_string()], join_at, Duration::from_secs(300)).await?[0];
    p.stop().await;
    Ok(Point {
        actors: n,
        scored_per_s: scored.len() as f64 / window,
        trained_per_s: trained as f64 / window,
        agent_tokens_per_s: tokens as f64 / window,
        machine_cpu_pct: 100.0 * (cpu1.0 - cpu0.0) as f64 / (cpu1.1 - cpu0.1).max(1) as f64,
        roles_cpu_cores: roles1.saturating_sub(roles0) as f64 / hz / window,
        join_s: first.saturating_sub(join_at) as f64 / 1000.0,
        stream: stream_times(&scored),
    })
}

/// The per-metric median of a point's repeats.
fn median_point(runs: &[Point]) -> Point {
    let m = |f: fn(&Point) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Point {
        actors: runs[0].actors,
        scored_per_s: m(|p| p.scored_per_s),
        trained_per_s: m(|p| p.trained_per_s),
        agent_tokens_per_s: m(|p| p.agent_tokens_per_s),
        machine_cpu_pct: m(|p| p.machine_cpu_pct),
        roles_cpu_cores: m(|p| p.roles_cpu_cores),
        join_s: m(|p| p.join_s),
        stream: runs[0].stream.clone(),
    }
}

/// Runs `reagent bench scale` and prints the table (or JSON) on stdout.
pub async fn bench(config: &ReagentConfig, args: ScaleBenchArgs) -> Result<()> {
    let root = std::env::temp_dir().join(format!("reagent-bench-scale-{}", std::process::id()));
    let mut points = Vec::new();
    for &n in &args.actors {
        let mut runs = Vec::new();
        for rep in 0..args.repeats {
            eprintln!("bench scale: {n} actor(s), run {}/{} …", rep + 1, args.repeats);
            let run = format!("scale-{n}-{rep}");
            let point = measure(config, &args, n, &root.join(&run), &run).await?;
            eprintln!("bench scale:   {:.1} scored trajectories/s, join {:.1} s", point.scored_per_s, point.join_s);
            runs.push(point);
        }
        points.push(median_point(&runs));
    }
    let _ = std::fs::remove_dir_all(&root);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&points)?);
        return Ok(());
    }
    println!("command: {}", super::command_line());
    let cpu = super::cpu_model().map(|c| format!(" ({c})")).unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!("machine: {cores} cores{cpu}; machine CPU includes every other process on it");
    println!(
        "job: the configuration's roles (feedback {}) with model {:?}; learner + 1 rrm + N actors, one libtorch \
         thread each; {} s warm-up, {} s window, median of {}",
        config.run.feedback, args.model, args.warmup, args.seconds, args.repeats
    );
    println!();
    let base = points.first().cloned();
    let vs = base.as_ref().map_or(String::new(), |b| format!("× vs {}", b.actors));
    println!(
        "| actors | scored traj/s | {vs} | trained traj/s | agent tokens/s | {vs} | machine CPU % | roles CPU (cores) | join → first scored (s) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &points {
        let ratio = |x: f64, b: f64| if b > 0.0 { format!("{:.2}", x / b) } else { "-".into() };
        let (rs, rt) = base.as_ref().map_or(("-".into(), "-".into()), |b| {
            (ratio(p.scored_per_s, b.scored_per_s), ratio(p.agent_tokens_per_s, b.agent_tokens_per_s))
        });
        println!(
            "| {} | {:.1} | {rs} | {:.1} | {:.0} | {rt} | {:.0} | {:.2} | {:.1} |",
            p.actors,
            p.scored_per_s,
            p.trained_per_s,
            p.agent_tokens_per_s,
            p.machine_cpu_pct,
            p.roles_cpu_cores,
            p.join_s
        );
    }
    println!();
    println!(
        "scored: trajectories appended to the learner's input stream in the window; trained: trajectories in \
         the learner updates that finished in it (those more than learner.max_staleness versions behind are \
         dropped, not trained); join: a new actor process's start to its first trajectory on that stream."
    );
    let empty: Vec<String> = points.iter().filter(|p| p.scored_per_s == 0.0).map(|p| p.actors.to_string()).collect();
    if !empty.is_empty() {
        println!(
            "note: no trajectory reached the learner within the window with {} actor(s). Actors publish whole \
             groups, so a group's cycle (group_size attempts of up to max_turns × max_new_tokens, plus the \
             critique wait in critique/unified modes) outlasted --seconds there: raise --seconds, or measure a \
             lighter job.",
            empty.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trained_counts_only_updates_inside_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let lines = [
            "{\"at_ms\":999,\"trajectories\":64}",
            "{\"at_ms\":1000,\"trajectories\":8}",
            "not json",
            "{\"at_ms\":1999,\"trajectories\":4}",
            "{\"at_ms\":2000,\"trajectories\":16}",
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        assert_eq!(trained_between(&path, 1000, 2000), 12);
        assert_eq!(trained_between(&dir.path().join("missing"), 0, u64::MAX), 0);
    }

    #[test]
    fn cpu_counters_read_this_process_and_the_machine() {
        let before = process_ticks(std::process::id());
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(100) {
            std::hint::black_box(started.elapsed());
        }
        assert!(process_ticks(std::process::id()) > before, "a busy loop of 100 ms shows in utime + stime");
        let (busy, total) = machine_jiffies();
        assert!(total > 0 && busy <= total);
        assert_eq!(process_ticks(u32::MAX), 0, "a process that does not exist has no ticks");
    }
}
