//! Exact resume on CPU: N uninterrupted updates versus k updates in a child process that
//! checkpoints and is then killed with SIGKILL mid-training, resumed here for N − k more. The
//! final weights and optimizer moments must be bitwise equal.
//!
//! ```text
//!  parent ──spawn──► child (this test binary, CHILD_ENV set): k updates, checkpoint,
//!    │                 prints "checkpointed", keeps training without checkpointing
//!    │◄── "checkpointed" ─┘
//!    ├── SIGKILL ──────► (dies mid-update)
//!    └── resolve_resume(auto) → restore → N − k updates → compare bytes with N in-process
//! ```

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use learner::checkpoint::{resolve_resume, CheckpointStore, ResumeMode};

use crate::checkpoint::trainer::{Trainer, TORCH_RNG};

const CHILD_ENV: &str = "LEARNER_RESUME_CHILD_DIR";
const N: u64 = 12;
const K: u64 = 5;

/// The child's body; a no-op unless the parent set `CHILD_ENV`.
#[test]
fn child_trains_checkpoints_and_waits_to_be_killed() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let _rng = TORCH_RNG.lock().unwrap();
    let mut t = Trainer::new();
    for _ in 0..K {
        t.update();
    }
    CheckpointStore::new(Path::new(&dir), 3).save(&t.checkpoint()).unwrap();
    println!("checkpointed");
    // Keep training (never checkpointing again) until killed; give up after a minute so an
    // orphan cannot linger if the parent died.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        t.update();
    }
    std::process::exit(3);
}

#[test]
fn kill_and_resume_matches_an_uninterrupted_run_bitwise() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "checkpoint::exact_resume::child_trains_checkpoints_and_waits_to_be_killed", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let saw = lines.by_ref().map_while(Result::ok).any(|l| l.trim_end().ends_with("checkpointed"));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(saw, "the child never reported its checkpoint ({status:?})");
    assert_eq!(status.signal(), Some(9), "the child should have died by SIGKILL: {status:?}");

    let _rng = TORCH_RNG.lock().unwrap();
    let loaded = resolve_resume(dir.path(), &ResumeMode::Auto).unwrap().expect("a checkpoint to resume from");
    assert!(loaded.skipped.is_empty());
    assert_eq!(loaded.data.step, K);
    assert_eq!(loaded.data.consumption.applied_since_ack.len(), K as usize);
    let mut resumed = Trainer::restore(&loaded.data);
    while resumed.step < N {
        resumed.update();
    }

    let mut straight = Trainer::new();
    while straight.step < N {
        straight.update();
    }
    let (a, b) = (straight.state_bytes(), resumed.state_bytes());
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between the uninterrupted and the resumed run");
    }
    // Training moved the weights, so equality is not vacuous.
    assert_ne!(Trainer::new().state_bytes()[0].1, a[0].1);
}
