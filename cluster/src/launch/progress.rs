//! The RL phase's progress bar: the learner's `metrics.jsonl` read as it grows (success rate,
//! mean score, policy lag, trajectories per second), and every role process watched — one that
//! fails ends the run with its name and log.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::progress::Progress;
use anyhow::Result;
use learner::service::record::UpdateRecord;

use super::procs::RoleProcess;

/// A bar (or progress lines) counting seconds of a phase.
pub fn time_bar(seconds: f64, label: &str) -> Result<Progress> {
    Progress::seconds(seconds, label)
}

const UPDATES_TEMPLATE: &str = "RL {bar:30} {pos}/{len} learner updates {msg} [{elapsed}]";

/// Reads the complete lines appended to a file since the last call.
struct Tail {
    offset: u64,
}

impl Tail {
    fn read(&mut self, path: &Path) -> Result<Vec<UpdateRecord>> {
        let Ok(mut file) = std::fs::File::open(path) else { return Ok(Vec::new()) };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut out = Vec::new();
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        while reader.read_line(&mut line)? > 0 {
            if !line.ends_with('\n') {
                break; // a line still being written: read it next time
            }
            self.offset += line.len() as u64;
            match serde_json::from_str(line.trim()) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable metrics line"),
            }
            line.clear();
        }
        Ok(out)
    }
}

fn describe(records: &[UpdateRecord], elapsed: f64) -> String {
    let Some(last) = records.last() else { return "waiting for the first update…".into() };
    let window = &records[records.len().saturating_sub(5)..];
    let mean = |f: fn(&UpdateRecord) -> f64| window.iter().map(f).sum::<f64>() / window.len() as f64;
    let scores: Vec<f64> = window.iter().filter_map(|r| r.score_mean).collect();
    let score =
        if scores.is_empty() { "-".into() } else { format!("{:.2}", scores.iter().sum::<f64>() / scores.len() as f64) };
    let trajectories: usize = records.iter().map(|r| r.trajectories).sum();
    let initial: Vec<f64> = window.iter().filter_map(|r| r.initial_success_rate).collect();
    let success = if initial.is_empty() {
        "-".into()
    } else {
        format!("{:.0}%", 100.0 * initial.iter().sum::<f64>() / initial.len() as f64)
    };
    format!(
        "v{} success {success} score {score} lag {:.1} {:.1} traj/s",
        last.version + 1,
        mean(|r| r.policy_lag_mean),
        trajectories as f64 / elapsed.max(1e-9)
    )
}

/// Shows progress while the roles run, until `updates` learner updates are recorded (0: no
/// such limit) or `seconds` have passed; returns every update record. Fails as soon as a role
/// process exits unexpectedly.
pub async fn watch(
    metrics: &Path,
    updates: u64,
    seconds: f64,
    learner: &mut RoleProcess,
    workers: &mut [RoleProcess],
    actors: &mut [RoleProcess],
) -> Result<Vec<UpdateRecord>> {
    let bar = if updates > 0 {
        Progress::new(updates, "RL", "learner updates", UPDATES_TEMPLATE)?
    } else {
        time_bar(seconds, "RL")?
    };
    let started = Instant::now();
    let mut tail = Tail { offset: std::fs::metadata(metrics).map_or(0, |m| m.len()) };
    let mut records = Vec::new();
    let result = loop {
        records.extend(tail.read(metrics)?);
        let elapsed = started.elapsed().as_secs_f64();
        bar.set_position(if updates > 0 { records.len() as u64 } else { elapsed as u64 });
        bar.set_message(describe(&records, elapsed));
        if (updates > 0 && records.len() as u64 >= updates) || elapsed >= seconds {
            break Ok(());
        }
        let failed = std::iter::once(&mut *learner).chain(workers.iter_mut()).chain(actors.iter_mut()).find_map(|p| {
            p.exited().map(|r| {
                r.and_then(|()| Err::<(), _>(anyhow::anyhow!("{} exited early; see {}", p.name, p.log.display())))
            })
        });
        if let Some(Err(e)) = failed {
            break Err(e);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    bar.finish_and_clear();
    result?;
    Ok(records)
}
