//! The learner's TensorBoard event files read back by TensorBoard itself: update records written
//! as the learner writes them (one folder per run id under a runs directory) come back through
//! TensorBoard's EventMultiplexer, after its record reader checked every record's CRCs
//! (scripts/tb_read.py, in the venv scripts/tb_venv.sh makes from PyPI on first use).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use learner::service::record::UpdateRecord;
use learner::tensorboard::{Board, DIR};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// scripts/tb_read.py run on `logdir` in the venv of scripts/tb_venv.sh (made if missing).
fn run_reader(logdir: &Path) -> std::process::Output {
    let setup = Command::new("bash").arg(repo().join("scripts/tb_venv.sh")).output().expect("bash runs");
    assert!(setup.status.success(), "scripts/tb_venv.sh: {}", String::from_utf8_lossy(&setup.stderr));
    let venv = std::env::var_os("REAGENT_TB_VENV").map_or_else(|| repo().join("target/tb-venv"), PathBuf::from);
    Command::new(venv.join("bin/python"))
        .arg(repo().join("scripts/tb_read.py"))
        .arg(logdir)
        .output()
        .expect("the venv's python runs")
}

/// What TensorBoard reads from `logdir` (scripts/tb_read.py's JSON).
fn read_back(logdir: &Path) -> Value {
    let out = run_reader(logdir);
    assert!(out.status.success(), "tb_read.py: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("tb_read.py prints JSON")
}

/// An update record at `step` with figures that differ by step, the optional ones present only
/// on even steps.
fn record(step: u64) -> UpdateRecord {
    let s = step as f64;
    let even = step.is_multiple_of(2);
    serde_json::from_value(serde_json::json!({
        "step": step, "version": step - 1, "at_ms": 1_700_000_000_000u64 + step * 1_500,
        "trajectories": 32, "success_rate": 0.25 + 0.01 * s,
        "initial_success_rate": if even { Some(0.2 + 0.01 * s) } else { None },
        "refined_success_rate": if even { Some(0.5) } else { None },
        "score_mean": if even { Some(0.75) } else { None },
        "judge_failed": step % 3, "reward_mean": 0.1 * s, "policy_lag_mean": 1.25,
        "policy_lag_counts": [10, 20, 2], "loss": 1.0 / s, "kl": 1e-4 * s, "clip_fraction": 0.05,
        "clip_low_fraction": 0.01, "clip_high_fraction": 0.04, "kl_proximal": 3e-3,
        "kl_behaviour": 2e-3, "optimizer_steps": 4, "flat_groups": 1, "entropy": 2.5,
        "grad_norm": 0.8 + s, "trained_tokens": 4096 + step, "update_seconds": 1.5
    }))
    .expect("a complete record")
}

#[test]
fn every_number_of_every_update_record_reads_back_in_tensorboard_one_run_per_run_id() {
    let runs = tempfile::tempdir().unwrap();
    let ids = ["alpha", "beta"];
    let mut written: Vec<(String, Vec<UpdateRecord>)> = Vec::new();
    for (k, id) in ids.iter().enumerate() {
        let mut board = Board::new(runs.path().join(id).join(DIR));
        let records: Vec<UpdateRecord> = (1..=5 + k as u64).map(record).collect();
        for r in &records {
            r.write_to(&mut board).unwrap();
        }
        written.push((format!("{id}/{DIR}"), records));
    }
    // A second incarnation of alpha's learner (a restart) writes its own file beside the first.
    let mut again = Board::new(runs.path().join("alpha").join(DIR));
    record(6).write_to(&mut again).unwrap();
    written[0].1.push(record(6));

    let read = read_back(runs.path());
    assert_eq!(read["files"], 3, "{read}");
    let total: usize = written.iter().map(|(_, r)| r.len() + 2).sum::<usize>() - 1;
    assert_eq!(read["records"], total, "a version event per file and one event per update");
    let run_names: BTreeSet<&str> = read["runs"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(run_names, BTreeSet::from(["alpha/tb", "beta/tb"]));

    for (run, records) in &written {
        let tags = read["runs"][run].as_object().unwrap();
        let expected: BTreeSet<String> = records.iter().flat_map(|r| r.scalars()).map(|(t, _)| t).collect();
        assert_eq!(tags.keys().cloned().collect::<BTreeSet<_>>(), expected, "{run}");
        for tag in ["loss", "success_rate", "grad_norm", "trajectories", "policy_lag_counts/1", "score_mean"] {
            assert!(tags.contains_key(tag), "{run}: {tag} is a scalar");
        }
        for r in records {
            for (tag, value) in r.scalars() {
                let points = tags[&tag].as_array().unwrap();
                let at =
                    points.iter().find(|p| p[0] == r.step).unwrap_or_else(|| panic!("{run} {tag} step {}", r.step));
                let got = at[1].as_f64().unwrap();
                assert_eq!(got, f64::from(value as f32), "{run} {tag} at {}", r.step);
                assert!((at[2].as_f64().unwrap() - r.at_ms as f64 / 1000.0).abs() < 1e-3, "wall time");
            }
        }
        // Absent figures stay absent: score_mean only on even steps.
        let steps: Vec<u64> = tags["score_mean"].as_array().unwrap().iter().map(|p| p[0].as_u64().unwrap()).collect();
        assert!(steps.iter().all(|s| s.is_multiple_of(2)) && !steps.is_empty(), "{steps:?}");
    }
}

#[test]
fn a_corrupted_event_file_is_refused_by_tensorboards_reader() {
    let runs = tempfile::tempdir().unwrap();
    let mut board = Board::new(runs.path().join("r").join(DIR));
    record(1).write_to(&mut board).unwrap();
    let file = std::fs::read_dir(board.dir()).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 6;
    bytes[last] ^= 0x40;
    std::fs::write(&file, bytes).unwrap();
    let out = run_reader(runs.path());
    assert!(!out.status.success(), "a flipped bit must fail the CRC check");
    assert!(String::from_utf8_lossy(&out.stderr).contains("crc"), "{}", String::from_utf8_lossy(&out.stderr));
}
