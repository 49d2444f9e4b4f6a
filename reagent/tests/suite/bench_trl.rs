//! `reagent bench trl` as a process: without the TRL venv it stops before any work with an
//! error naming the script that makes the venv, and it refuses batch sizes that are not whole
//! groups. (The run itself needs target/trl-venv, which `scripts/setup.sh` does not install;
//! its figures are in BENCHMARKS.md.)
#![allow(clippy::unwrap_used, reason = "tests unwrap")]

use std::process::{Command, Output};

fn bench_trl(args: &[&str], venv: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["bench", "trl"])
        .args(args)
        .env("REAGENT_TRL_VENV", venv)
        .output()
        .unwrap()
}

#[test]
fn without_the_venv_the_error_names_the_script() {
    let empty = tempfile::tempdir().unwrap();
    let out = bench_trl(&["--steps", "1", "--repeats", "1"], empty.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("scripts/trl_venv.sh"), "{stderr}");
    assert!(stderr.contains(&empty.path().join("bin/python").display().to_string()), "{stderr}");
    // A given interpreter that cannot import TRL is refused too, naming the script.
    let not_python = empty.path().join("python");
    std::fs::write(&not_python, "#!/bin/sh\nexit 1\n").unwrap();
    let mut perms = std::fs::metadata(&not_python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&not_python, perms).unwrap();
    let out = bench_trl(&["--trl-python", not_python.to_str().unwrap()], empty.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("cannot import") && stderr.contains("scripts/trl_venv.sh"),
        "{stderr}"
    );
}

#[test]
fn batch_sizes_must_be_whole_groups_of_eight() {
    let empty = tempfile::tempdir().unwrap();
    let out = bench_trl(&["--completions-per-step", "8,12"], empty.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--completions-per-step: 12 is not a positive multiple of 8"), "{stderr}");
}
