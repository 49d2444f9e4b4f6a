//! A process with no dataset loaded refuses `dataset` tasks with a typed error that says which
//! configuration is missing (its own test binary: the dataset is process-wide).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::families::dataset::DatasetError;
use env_workers::{registry, EnvError, Limits, TaskFamily, TaskSpec};

#[test]
fn dataset_tasks_need_a_loaded_dataset() {
    let spec = TaskSpec { family: TaskFamily::Dataset, seed: 1, difficulty: 1 };
    let e = registry::make(spec, Limits::default()).err().unwrap();
    assert_eq!(e, EnvError::Dataset(DatasetError::NotLoaded));
    assert!(e.to_string().contains("`[dataset] files`"), "{e}");
    assert!(env_workers::judge::judge_messages(spec, &[], false).is_err());
}
