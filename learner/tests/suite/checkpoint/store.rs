//! Saving, pruning, verification, fallback and `--resume` modes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use learner::checkpoint::{
    list_checkpoints, load, resolve_resume, step_dir_name, CheckpointData, CheckpointStore, ConsumptionState,
    ResumeMode, OPTIMIZER, WEIGHTS,
};
use learner::optim::OptimizerState;
use learner::LearnerError;
use protocol::wire::{PolicyVersion, TrajectoryId};
use tch::Tensor;

use crate::checkpoint::trainer::raw_bytes;

fn data(step: u64) -> CheckpointData {
    let w = Tensor::from_slice(&[step as f32, 1.5, -2.25, 1e-30]).reshape([2, 2]);
    let m = Tensor::from_slice(&[0.1f32 * step as f32, 0.2]);
    CheckpointData {
        step,
        policy_version: PolicyVersion(step + 100),
        weights: vec![("layer.weight".into(), w), ("layer.bias".into(), Tensor::from_slice(&[step as f64]))],
        optimizer: OptimizerState { step, tensors: vec![("m.layer.weight".into(), m)] },
        rng: BTreeMap::from([("data".to_string(), vec![step as u8, 0xff, 0])]),
        config_hash: "abc123".into(),
        consumption: ConsumptionState {
            applied_since_ack: vec![TrajectoryId(u128::MAX - step as u128), TrajectoryId(step as u128)],
            queue_entry_ids: vec![format!("{step}-0"), format!("{step}-1")],
            ..ConsumptionState::default()
        },
    }
}

fn store_with(dir: &Path, steps: &[u64], keep: usize) -> CheckpointStore {
    let store = CheckpointStore::new(dir, keep);
    for &s in steps {
        store.save(&data(s)).unwrap();
    }
    store
}

fn ckpt(dir: &Path, step: u64) -> PathBuf {
    dir.join(step_dir_name(step))
}

fn resume_step(dir: &Path) -> (u64, Vec<String>) {
    let loaded = resolve_resume(dir, &ResumeMode::Auto).unwrap().expect("a checkpoint");
    (loaded.data.step, loaded.skipped.into_iter().map(|s| s.reason).collect())
}

/// Runs `f` with a subscriber that records log lines, and returns them.
fn logs_of<T>(f: impl FnOnce() -> T) -> (T, String) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || Writer(sink.clone())).finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    (out, text)
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_checkpoint_round_trips_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_with(dir.path(), &[7], 3).dir().join(step_dir_name(7));
    let got = load(&path).unwrap();
    let want = data(7);
    assert_eq!((got.step, got.policy_version, got.optimizer.step), (7, PolicyVersion(107), 7));
    assert_eq!((&got.rng, &got.config_hash, &got.consumption), (&want.rng, &want.config_hash, &want.consumption));
    for ((n1, t1), (n2, t2)) in sorted(got.weights).iter().zip(&sorted(want.weights)) {
        assert_eq!((n1, t1.kind(), raw_bytes(t1)), (n2, t2.kind(), raw_bytes(t2)));
    }
    assert_eq!(raw_bytes(&got.optimizer.tensors[0].1), raw_bytes(&want.optimizer.tensors[0].1));
}

fn sorted(mut v: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn only_the_newest_k_are_kept_and_crash_leftovers_are_ignored_then_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[1, 2, 3, 4], 2);
    let steps: Vec<u64> = list_checkpoints(dir.path()).unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, [4, 3]);
    // A save that crashed before its rename leaves a temporary directory: never listed, and
    // removed by the next save.
    let leftover = dir.path().join(".tmp-step-0000000005-999");
    fs::create_dir(&leftover).unwrap();
    fs::write(leftover.join(WEIGHTS), b"partial").unwrap();
    assert_eq!(resume_step(dir.path()).0, 4);
    store.save(&data(5)).unwrap();
    assert!(!leftover.exists());
    // Saving a step again replaces it whole.
    store.save(&data(5)).unwrap();
    assert_eq!(load(&ckpt(dir.path(), 5)).unwrap().step, 5);
}

#[test]
fn a_flipped_byte_falls_back_to_the_previous_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    store_with(dir.path(), &[1, 2], 3);
    let file = ckpt(dir.path(), 2).join(WEIGHTS);
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&file, bytes).unwrap();
    let ((step, skipped), logs) = logs_of(|| resume_step(dir.path()));
    assert!(logs.contains("WARN") && logs.contains("checkpoint unusable; trying the previous one"), "{logs}");
    assert_eq!(step, 1);
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].contains("weights.safetensors has sha256"), "{}", skipped[0]);
}

#[test]
fn a_truncated_file_or_missing_manifest_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    store_with(dir.path(), &[1, 2, 3], 3);
    let file = ckpt(dir.path(), 3).join(OPTIMIZER);
    let len = fs::metadata(&file).unwrap().len();
    fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 2).unwrap();
    fs::remove_file(ckpt(dir.path(), 2).join("manifest.json")).unwrap();
    let (step, skipped) = resume_step(dir.path());
    assert_eq!(step, 1);
    assert!(skipped[0].contains("optimizer.safetensors has"), "{}", skipped[0]);
    assert!(skipped[1].contains("manifest.json"), "{}", skipped[1]);
}

#[test]
fn resume_modes() {
    let empty = tempfile::tempdir().unwrap();
    assert!(resolve_resume(empty.path(), &ResumeMode::Auto).unwrap().is_none());
    assert!(resolve_resume(&empty.path().join("absent"), &ResumeMode::Auto).unwrap().is_none());
    assert!(resolve_resume(empty.path(), &ResumeMode::Never).unwrap().is_none());

    let dir = tempfile::tempdir().unwrap();
    store_with(dir.path(), &[1, 2], 3);
    let never = resolve_resume(dir.path(), &ResumeMode::Never).unwrap_err();
    assert!(matches!(never, LearnerError::NoCheckpoint(_)) && never.to_string().contains("already holds 2"));
    let by_path = resolve_resume(dir.path(), &ResumeMode::Path(ckpt(dir.path(), 1))).unwrap().unwrap();
    assert_eq!(by_path.data.step, 1);
    let missing = resolve_resume(dir.path(), &ResumeMode::Path(ckpt(dir.path(), 9))).unwrap_err();
    assert!(missing.to_string().contains("not a checkpoint directory"), "{missing}");

    // A corrupt checkpoint named explicitly is an error, not a silent fallback.
    fs::write(ckpt(dir.path(), 2).join(WEIGHTS), b"garbage").unwrap();
    let named = resolve_resume(dir.path(), &ResumeMode::Path(ckpt(dir.path(), 2))).unwrap_err();
    assert!(matches!(named, LearnerError::CorruptCheckpoint { .. }), "{named}");
    // With every checkpoint corrupt, `auto` refuses to start fresh.
    fs::write(ckpt(dir.path(), 1).join("state.json"), b"{}").unwrap();
    let all = resolve_resume(dir.path(), &ResumeMode::Auto).unwrap_err();
    assert!(all.to_string().contains("all 2 checkpoint(s)"), "{all}");
    assert_eq!("auto".parse::<ResumeMode>().unwrap(), ResumeMode::Auto);
    assert_eq!("x/y".parse::<ResumeMode>().unwrap().to_string(), "x/y");
}
