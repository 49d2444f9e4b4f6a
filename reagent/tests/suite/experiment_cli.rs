//! `reagent experiment modes` as a user runs it, at the smallest size: every arm trains from the
//! committed cold-start fixture, is evaluated on the same held-out tasks, and the evidence lands
//! in the output directory — a table with a row per arm and per claimed difference, a JSON file
//! with every run's per-task results, and a PNG. Whether the paper's ordering appears at this
//! size is not asserted (the exit status says it; one iteration of two tasks cannot show it).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::process::{Command, Stdio};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../learner/fixtures/micro-math-sft");

/// `reagent experiment modes` from the fixture on difficulty 1, one seed, two tasks per
/// iteration, one sample per held-out task, no ablation, `extra` options, into `dir`; run to
/// its end without an error; its standard error.
fn modes(dir: &std::path::Path, extra: &[&str]) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["experiment", "modes", "--init", FIXTURE, "--difficulty", "1", "--seeds", "1"])
        .args(["--tasks-per-iteration", "2", "--eval-samples", "1", "--no-ablation"])
        .args(extra)
        .arg("--out")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .expect("reagent runs");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!stderr.contains("error:"), "the comparison ran to its end: {stderr}");
    stderr
}

#[test]
fn a_tiny_mode_comparison_writes_its_tables_runs_and_plot() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("modes");
    let stderr = modes(&dir, &["--iterations", "1", "--eval-tasks", "4"]);
    // The cold start's evaluation (minutes with a real model) is said as it begins and ends.
    for said in
        ["the cold start: held-out evaluation, 4 tasks greedy and 1 sample each", "the cold start: held-out greedy"]
    {
        assert!(stderr.contains(said), "no {said:?} line:\n{stderr}");
    }
    let table = std::fs::read_to_string(dir.join("modes.md")).unwrap();
    assert!(
        table.contains("critiques did not say whether the task was solved"),
        "the default hides the outcome:\n{table}"
    );
    for arm in ["| outcome |", "| critique |", "| score |", "| unified |"] {
        assert!(table.contains(arm), "{arm} row missing:\n{table}");
    }
    for diff in ["unified − score", "score − outcome", "critique − outcome", "unified − outcome"] {
        assert_eq!(table.matches(diff).count(), 2, "{diff}: a sampled and a greedy row:\n{table}");
    }
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("modes.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "four arms, one seed");
    for r in runs {
        assert_eq!(r["greedy"].as_array().unwrap().len(), 4, "a result per held-out task");
        assert_eq!(r["sampled"].as_array().unwrap().len(), 4);
        let rate = r["sampled_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&rate));
    }
    let tokens = |arm: &str| runs.iter().find(|r| r["arm"] == arm).unwrap()["generated_tokens"].as_u64().unwrap();
    assert!(tokens("critique") > tokens("outcome"), "refining modes also generate refined attempts");
    let png = std::fs::read(dir.join("modes.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn the_token_matched_variant_gives_every_arm_the_outcome_arms_tokens_and_the_outcome_can_be_revealed() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("modes");
    modes(&dir, &["--iterations", "2", "--eval-tasks", "2", "--token-matched", "--reveal-outcome"]);
    let table = std::fs::read_to_string(dir.join("modes.md")).unwrap();
    assert!(table.contains("Token-matched"));
    assert!(
        table.contains("critiques said whether the task was solved"),
        "--reveal-outcome reached the runs:\n{table}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("modes.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    let get = |arm: &str, key: &str| runs.iter().find(|r| r["arm"] == arm).unwrap()[key].as_u64().unwrap();
    assert_eq!(get("outcome", "groups"), 4, "the first arm keeps the group budget");
    let budget = get("outcome", "generated_tokens");
    for arm in ["critique", "score", "unified"] {
        let (tokens, groups) = (get(arm, "generated_tokens"), get(arm, "groups"));
        // Stopped after the first iteration that reached the budget, or at the cap of 8× the
        // group budget.
        assert!(tokens >= budget || groups == 32, "{arm}: {tokens} tokens in {groups} groups, budget {budget}");
    }
}

#[test]
fn a_family_without_a_judge_is_refused_by_name() {
    let run = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["experiment", "modes", "--init", FIXTURE, "--family", "cartpole"])
        .stdin(Stdio::null())
        .output()
        .expect("reagent runs");
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("--family cartpole"), "{stderr}");
}

#[test]
fn arms_pick_the_modes_compared_and_matched_steps_is_reported() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("modes");
    modes(&dir, &["--iterations", "1", "--eval-tasks", "2", "--arms", "outcome,critique", "--matched-steps"]);
    let table = std::fs::read_to_string(dir.join("modes.md")).unwrap();
    assert!(table.contains("Matched steps"), "{table}");
    assert!(table.contains("| outcome |") && table.contains("| critique |"), "{table}");
    assert!(!table.contains("| score |") && !table.contains("| unified |"), "only the arms asked for:\n{table}");
    assert_eq!(table.matches("critique − outcome").count(), 2, "the one difference among them:\n{table}");
}

#[test]
fn sft_init_that_is_not_a_model_directory_is_refused_by_name() {
    let missing = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["sft", "--size", "micro", "--steps", "1", "--init"])
        .arg(missing.path())
        .stdin(Stdio::null())
        .output()
        .expect("reagent runs");
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("--init") && stderr.contains("config.json"), "{stderr}");
}

/// `--steps 0` evaluates a model directory as it is (no update: the report says 0 steps and
/// still has the held-out figures and the critique channel), with the system turn chosen by
/// `--system-prompt`; without `--init` it is refused naming the setting, and an unreadable
/// `--system-prompt-file` is refused naming the flag, before anything runs.
#[test]
fn sft_steps_zero_evaluates_a_model_as_it_is_and_bad_prompt_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let sft = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_reagent"))
            .args(["sft", "--size", "micro"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (first, second) = (out("first"), out("second"));
    let trained = sft(&["--steps", "1", "--eval-tasks", "2", "--out", &first]);
    assert!(
        trained.status.success() || trained.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&trained.stderr)
    );
    let model = format!("{first}/model");
    let evaluated =
        sft(&["--init", &model, "--steps", "0", "--eval-tasks", "2", "--system-prompt", "full", "--out", &second]);
    let stderr = String::from_utf8_lossy(&evaluated.stderr);
    assert!(evaluated.status.success() || evaluated.status.code() == Some(1), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{second}/sft_report.json")).unwrap()).unwrap();
    assert_eq!(report["steps"], 0, "{report}");
    assert!(!report["final_eval"].as_array().unwrap().is_empty(), "{report}");
    // No update, so no loss in the summary; the evaluations say they are running and how they ended.
    let stdout = String::from_utf8_lossy(&evaluated.stdout);
    assert!(stdout.contains("sft: no update (evaluated as it is)") && !stdout.contains("NaN"), "{stdout}");
    for phase in ["held-out greedy evaluation: 2 tasks", "solved (", "critique channel: 4 first attempts on 2"] {
        assert!(stderr.contains(phase), "no {phase:?} progress line:\n{stderr}");
    }

    let refused = sft(&["--steps", "0", "--out", &out("third")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("steps") && stderr.contains("model directory"), "{stderr}");
    let missing = sft(&["--steps", "1", "--system-prompt-file", "/nonexistent/prompt.txt", "--out", &out("fourth")]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && stderr.contains("--system-prompt-file"), "{stderr}");
}

/// `reagent sft --numerics portable` writes the same bytes whatever kernels the CPU would offer:
/// the run again with libtorch told to use its AVX2 kernels, MKL left to pick its own path, glibc's
/// AVX2, FMA and AVX-512 variants masked (an older CPU, as far as libm can tell) and one thread
/// instead of the machine's; the process says it runs with portable numerics. Under `--numerics
/// fast`, libtorch's plain kernels in place of this CPU's AVX2 or AVX-512 ones change the bytes:
/// what a cold start remade on another CPU model meets, and what makes the first assertion able
/// to fail. Needs an x86-64 CPU with AVX2 (every machine this project runs on); on one without it
/// the test fails naming that, rather than pass weakly.
#[test]
fn portable_numerics_give_the_same_bytes_whatever_kernels_the_cpu_offers() {
    assert!(
        std::is_x86_feature_detected!("avx2"),
        "this test compares libtorch's AVX2 kernels with its portable ones: it needs a CPU with AVX2"
    );
    let dir = tempfile::tempdir().unwrap();
    let older_cpu = [
        ("ATEN_CPU_CAPABILITY", "avx2"),
        ("MKL_CBWR", "AUTO"),
        ("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F,-AVX2_Usable,-FMA_Usable,-AVX512F_Usable"),
        ("OMP_NUM_THREADS", "1"),
    ];
    let sft = |name: &str, numerics: &str, env: &[(&str, &str)]| {
        let out = dir.path().join(name);
        let run = Command::new(env!("CARGO_BIN_EXE_reagent"))
            .args(["sft", "--size", "micro", "--steps", "3", "--eval-tasks", "1", "--device", "cpu"])
            .args(["--numerics", numerics, "--out"])
            .arg(&out)
            .env_remove("ATEN_CPU_CAPABILITY")
            .env_remove("MKL_CBWR")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("reagent runs");
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success() || run.status.code() == Some(1), "{name}: {stderr}");
        (std::fs::read(out.join("model/model.safetensors")).unwrap(), stderr)
    };
    let (here, said) = sft("portable", "portable", &[]);
    assert!(said.contains("portable numerics"), "the run says how it computes:\n{said}");
    let (elsewhere, _) = sft("portable-older-cpu", "portable", &older_cpu);
    assert!(here == elsewhere, "--numerics portable wrote other bytes under another CPU's kernels");
    let (fast, said) = sft("fast", "fast", &[]);
    assert!(!said.contains("portable numerics"), "{said}");
    let (fast_elsewhere, _) = sft("fast-plain-kernels", "fast", &[("ATEN_CPU_CAPABILITY", "default")]);
    assert!(fast != fast_elsewhere, "the kernels changed nothing under --numerics fast: this test cannot fail");
    assert!(fast != here, "portable numerics computed as the fast kernels do");
}

/// A comparison killed after its first run continues from it: the same command again takes the
/// finished run from `runs.jsonl` (the run's line, marked here with an impossible training time,
/// reaches `modes.json` as it is: not trained again), redoes the run whose line was torn, and
/// leaves one complete line per run, each naming the cold start's weights. Other settings reuse
/// nothing, and the command says so and why.
#[test]
fn a_killed_comparison_continues_from_its_finished_runs() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("modes");
    let args = ["--iterations", "1", "--eval-tasks", "2", "--arms", "outcome,critique"];
    modes(&dir, &args);
    let runs_file = dir.join("runs.jsonl");
    let text = std::fs::read_to_string(&runs_file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "one line per finished run:\n{text}");
    let mut first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    first["result"]["train_seconds"] = serde_json::json!(12345.0);
    // The kill: the first run's line complete, the second's cut short.
    std::fs::write(&runs_file, format!("{first}\n{}", &lines[1][..lines[1].len() / 2])).unwrap();

    let stderr = modes(&dir, &args);
    assert!(stderr.contains("1 of 2 runs are in the runs file; 1 to train"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("modes.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["train_seconds"], 12345.0, "the finished run is taken from the file");
    assert_ne!(runs[1]["train_seconds"], 12345.0);
    let text = std::fs::read_to_string(&runs_file).unwrap();
    assert_eq!(text.lines().count(), 2, "the torn line replaced by the redone run's:\n{text}");
    let weights: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["weights"].as_str().unwrap().to_string())
        .collect();
    assert!(weights[0].len() == 64 && weights[0] == weights[1], "both lines name the same cold start: {weights:?}");

    let stderr = modes(&dir, &["--iterations", "2", "--eval-tasks", "2", "--arms", "outcome,critique"]);
    assert!(
        stderr.contains("none of the 2 finished runs in the runs file is one of this comparison's 2")
            && stderr.contains("2 from these weights under other settings"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("modes.json")).unwrap()).unwrap();
    assert!(json["runs"].as_array().unwrap().iter().all(|r| r["train_seconds"] != 12345.0), "other settings rerun");
    assert_eq!(std::fs::read_to_string(&runs_file).unwrap().lines().count(), 4);
}
