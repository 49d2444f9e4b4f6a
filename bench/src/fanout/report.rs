//! The report of `reagent bench fanout`: the setup line by line, then one Markdown row per
//! layout (to paste into BENCHMARKS.md), with the load average before and after, since other
//! work on the machine shares its cores.

use std::path::Path;
use std::time::Duration;

use super::{FanoutBenchArgs, Measured};
use crate::report::median;

/// The 1-, 5- and 15-minute load averages (/proc/loadavg).
pub(super) fn load_average() -> String {
    let text = std::fs::read_to_string(Path::new("/proc/loadavg")).unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(super) fn report(args: &FanoutBenchArgs, rows: &[Measured], gets: &[Duration], load: [String; 2]) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let cpu = crate::cpu_model().map(|c| format!(" ({c})")).unwrap_or_default();
    let get = median(&gets.iter().map(|&d| ms(d)).collect::<Vec<_>>());
    println!("command: {}", crate::command_line());
    println!("machine: {cores} cores{cpu}; load average before {}, after {}", load[0], load[1]);
    println!(
        "setup: private redis-servers (AOF off) on loopback; {} follower processes, each a WeightStore reader \
         (pub/sub watcher, fetch_newer_than, every chunk's hash checked); {} MB f32 per version; {} versions \
         per layout, medians; GET: one GET of {} MB from the primary, alone (median of {})",
        args.followers, args.mb, args.repeats, args.mb, args.repeats
    );
    println!(
        "latency: wall clock from the call of publish on the primary to the last follower holding the version; \
         CPU: seconds per version of the primary / the replicas / the followers; CPU/cores: their sum over \
         {cores} cores, the least wall time that work takes on this machine"
    );
    println!();
    println!("| layout | publish ms | last follower ms (median; min–max) | GET ms | ratio | CPU s: primary / replicas / followers | CPU/cores ms |");
    println!("|---|---:|---:|---:|---:|---|---:|");
    for r in rows {
        let lat: Vec<f64> = r.latencies.iter().map(|&d| ms(d)).collect();
        let (lo, hi) = lat.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let publish = median(&r.publishes.iter().map(|&d| ms(d)).collect::<Vec<_>>());
        let latency = median(&lat);
        let floor = r.cpu.iter().sum::<f64>() / cores as f64 * 1e3;
        println!(
            "| {} | {publish:.1} | {latency:.1} ({lo:.1}–{hi:.1}) | {get:.1} | {:.2}× | {:.2} / {:.2} / {:.2} | {floor:.0} |",
            r.layout,
            latency / get.max(1e-9),
            r.cpu[0],
            r.cpu[1],
            r.cpu[2]
        );
    }
}
