//! The `reagent` binary as a user runs it: doctor against a live and a dead Redis, a config
//! with a misspelt key, `config show`, and small runs of the benches, whose tables must agree
//! with themselves (each ratio the quotient of its row's printed figures, within rounding).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use protocol::redis_server::{RedisServer, RedisServerOptions};

/// Longest any one invocation may take (a debug build loading libtorch included).
const DEADLINE: Duration = Duration::from_secs(180);

/// Runs `reagent args…` with `env` and none of the caller's `REAGENT__*` variables; kills it
/// and fails the test if it runs past [`DEADLINE`].
fn reagent(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    let child = cmd.spawn().expect("reagent starts");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("reagent's output is readable"),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            panic!("reagent {args:?} did not finish within {DEADLINE:?}");
        }
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn free_closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn doctor_passes_every_check_against_a_live_server() {
    let server = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let out = reagent(&["doctor"], &[("REAGENT__REDIS__URL", &server.url())]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in ["config", "rollout", "model", "redis", "libtorch", "cuda"] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("✔ {check} "))), "no passing {check} line in:\n{all}");
    }
    assert!(stdout.contains(&format!("127.0.0.1:{}", server.port())) && stdout.contains("redis 7"), "{all}");
}

/// The `cuda` line of `reagent doctor` run with `extra` prepended to `LD_LIBRARY_PATH`.
fn doctor_cuda_line(server: &RedisServer, library_path: Option<&Path>) -> String {
    let url = server.url();
    let joined = library_path.map(|dir| {
        let rest = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        format!("{}:{rest}", dir.display())
    });
    let mut env = vec![("REAGENT__REDIS__URL", url.as_str())];
    if let Some(joined) = &joined {
        env.push(("LD_LIBRARY_PATH", joined.as_str()));
    }
    let out = reagent(&["doctor"], &env);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("✔ cuda "))
        .unwrap_or_else(|| panic!("{all}"))
        .to_string()
}

/// One binary for CPU and GPU machines (issue 29 item 6): libtorch_cuda is not linked but
/// loaded at run time from beside libtorch_cpu. Here, where the CUDA libraries it needs are
/// absent, doctor names the one that could not be found; with them present (stand-ins from
/// scripts/cuda_stubs.py for cuDNN, cuBLAS, … and the driver, which is what a CPU-only machine
/// with the CUDA wheels installed looks like to the loader) the same binary loads libtorch_cuda,
/// sees no device, and still passes on the CPU. Before, the binary had libtorch_cuda linked or
/// not at build time and doctor said "a CPU build" in both of these cases.
#[test]
fn doctor_loads_libtorch_cuda_at_run_time_and_says_why_there_is_no_gpu() {
    if policy::device::cuda_available() {
        return; // A GPU machine: `reagent bench gpu` checks this side.
    }
    let server = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let plain = doctor_cuda_line(&server, None);
    assert!(
        plain.contains("libtorch_cuda is not loaded: cannot load") && plain.contains("libtorch_cuda.so"),
        "{plain}"
    );
    assert!(plain.contains("cannot open shared object file"), "names the missing library: {plain}");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let stubs = tempfile::tempdir().unwrap();
    let made = Command::new("python3")
        .arg(root.join("scripts/cuda_stubs.py"))
        .arg(root.join(".libtorch"))
        .arg(stubs.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "cuda_stubs.py: {}", text(&made));
    let stubbed = doctor_cuda_line(&server, Some(stubs.path()));
    assert!(stubbed.contains("libtorch_cuda.so loaded, but no device is visible"), "{stubbed}");
}

/// A family whose reference messages outgrow `actor.max_new_tokens` is named with the values
/// to set, as a warning: the checks still pass.
#[test]
fn doctor_warns_when_the_rollout_cannot_hold_a_familys_episodes() {
    let server = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let url = server.url();
    let env = [("REAGENT__REDIS__URL", url.as_str()), ("REAGENT__ACTOR__FAMILY", "searchqa")];
    let out = reagent(&["doctor"], &env);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let line =
        all.lines().find(|l| l.starts_with("! rollout")).unwrap_or_else(|| panic!("no rollout warning in:\n{all}"));
    assert!(line.contains("searchqa") && line.contains("actor.max_new_tokens >= "), "{line}");
    let fitted = [env[0], env[1], ("REAGENT__ACTOR__MAX_NEW_TOKENS", "176")];
    let all = text(&reagent(&["doctor"], &fitted));
    assert!(all.lines().any(|l| l.starts_with("✔ rollout") && l.contains("searchqa")), "{all}");
}

#[test]
fn doctor_fails_and_names_the_endpoint_when_redis_is_down() {
    let port = free_closed_port();
    let url = format!("redis://127.0.0.1:{port}");
    let out = reagent(&["doctor"], &[("REAGENT__REDIS__URL", &url)]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    let line =
        all.lines().find(|l| l.starts_with("✘ redis")).unwrap_or_else(|| panic!("no failing redis line in:\n{all}"));
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{all}");
}

#[test]
fn a_misspelt_config_key_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[queue]\nhigh_water_mrk = 5\n").unwrap();
    let out = reagent(&["--config", path(&bad), "doctor"], &[]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("high_water_mrk") && all.contains("✘ config"), "{all}");

    let out = reagent(&["--config", path(&bad), "config", "show"], &[]);
    let all = text(&out);
    assert!(!out.status.success() && all.contains("high_water_mrk"), "{all}");
}

#[test]
fn config_show_prints_toml() {
    let out = reagent(&["config", "show"], &[("REAGENT__QUEUE__READ_COUNT", "32")]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[queue]") && stdout.contains("read_count = 32"), "{all}");
    assert!(stdout.contains("REAGENT__QUEUE__READ_COUNT"), "the source names the override: {all}");
}

/// The cells of every Markdown table row of `stdout` whose first cell is `first`.
fn table_rows(stdout: &str, first: &str) -> Vec<Vec<String>> {
    let rows = stdout.lines().filter(|l| l.starts_with(&format!("| {first} |")));
    rows.map(|l| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect()).collect()
}

/// The first such row.
fn table_row(stdout: &str, first: &str) -> Option<Vec<String>> {
    table_rows(stdout, first).into_iter().next()
}

/// A number printed by a table cell, with any trailing `×`.
fn cell(row: &[String], i: usize) -> f64 {
    row[i].trim_end_matches('×').parse().unwrap_or_else(|_| panic!("column {i} of {row:?} is not a number"))
}

/// Whether `ratio`, printed with `ratio_dp` decimals, is `num / den` for some values that print
/// as `num` and `den` with `dp` decimals: the table's ratio is its own columns' quotient.
fn is_quotient(num: f64, den: f64, dp: i32, ratio: f64, ratio_dp: i32) -> bool {
    let (h, hr) = (0.5 * 10f64.powi(-dp), 0.5 * 10f64.powi(-ratio_dp));
    let (lo, hi) = ((num - h).max(0.0) / (den + h), (num + h) / (den - h).max(f64::MIN_POSITIVE));
    num > 0.0 && den > 0.0 && lo - hr <= ratio && ratio <= hi + hr
}

#[test]
fn a_small_queue_bench_reports_a_consistent_table() {
    let out = reagent(&["bench", "queue", "--messages", "200", "--sizes", "4096", "--repeats", "1"], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| payload | reagent msgs/s | redis-benchmark XADD/s | ratio |"), "{all}");
    let row = table_row(&stdout, "4 KiB").unwrap_or_else(|| panic!("no 4 KiB row in:\n{all}"));
    let (ours, xadd, ratio) = (cell(&row, 1), cell(&row, 2), cell(&row, 3));
    assert!(is_quotient(ours, xadd, 0, ratio, 2), "ratio {ratio} is not {ours} / {xadd}: {row:?}");
    // One repeat: the median is the one run listed beneath the table.
    let runs = format!("runs at 4 KiB, 200 messages each: reagent [{ours:.0}], XADD [{xadd:.0}]");
    assert!(stdout.contains(&runs), "{runs:?} not in:\n{all}");
    assert!(stdout.contains("append-only file off") && stdout.contains("nproc"), "{all}");
    // The warm-up is run and not reported; the client is one thread unless asked otherwise.
    assert!(stdout.contains("median of 1 after 1 warm-up(s); client runtime of 1 thread(s)"), "{all}");
    // What halved the 4 KiB figure once: producers waiting at the job's high-water mark (32,
    // below one batch of 128) after every batch. The bench measures the queue, not that wait.
    assert!(stdout.contains("producer waits at the high-water mark: 0"), "{all}");
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn small_env_and_learner_benches_report_consistent_figures() {
    let env = ["bench", "env", "--seconds", "0.05", "--repeats", "1", "--sessions", "8"];
    let out = reagent(&[&env[..], &["--json"]].concat(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("a JSON row per family");
    let families: Vec<&str> = rows.iter().filter_map(|r| r["family"].as_str()).collect();
    assert_eq!(families, ["math", "retail", "webnav", "searchqa", "cartpole"], "{rows:?}");
    let positive = |x: &serde_json::Value| x.as_f64() > Some(0.0);
    assert!(rows.iter().all(|r| positive(&r["in_process"]) && positive(&r["service"])), "{rows:?}");
    // The table: every family, each ratio its own row's env-worker / in-process figures.
    let out = reagent(&env, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    for family in families {
        let row = table_row(&stdout, family).unwrap_or_else(|| panic!("no {family} row in:\n{stdout}"));
        let (local, service, ratio) = (cell(&row, 1), cell(&row, 2), cell(&row, 3));
        assert!(is_quotient(service, local, 0, ratio, 2), "ratio {ratio} is not {service} / {local}: {row:?}");
    }

    let learner = ["bench", "learner", "--sizes", "tiny", "--repeats", "1", "--new-tokens", "4", "--batch", "2"];
    let learner = [&learner[..], &["--train-rows", "8", "--train-tokens", "16"]].concat();
    let out = reagent(&[&learner[..], &["--json"]].concat(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let (t, g) = (&v["training"][0], &v["generation"][0]);
    assert_eq!((t["size"].as_str(), g["size"].as_str()), (Some("tiny"), Some("tiny")), "{v}");
    let both = [&t["learner"], &t["bare"], &t["learner_peak_mib"], &t["bare_peak_mib"], &g["cached"], &g["recomputed"]];
    assert!(both.iter().all(|x| positive(x)), "{v}");
    // The tables: learner / bare loop, and KV cache / recomputation, each from its own row.
    let out = reagent(&learner, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    let rows = table_rows(&stdout, "tiny");
    assert_eq!(rows.len(), 2, "a training and a generation row for tiny:\n{stdout}");
    let (train, generation) = (&rows[0], &rows[1]);
    // | model | parameters | learner tokens/s | bare tokens/s | ratio | peak RSS learner | peak RSS bare |
    assert!(is_quotient(cell(train, 2), cell(train, 3), 0, cell(train, 4), 2), "training row: {train:?}");
    assert!(cell(train, 1) > 1e6 && cell(train, 5) > 0.0 && cell(train, 6) > 0.0, "training row: {train:?}");
    assert!(generation[3].ends_with('×'), "{generation:?}");
    let (cached, recomputed, speedup) = (cell(generation, 1), cell(generation, 2), cell(generation, 3));
    assert!(is_quotient(cached, recomputed, 0, speedup, 1), "generation row: {generation:?}");
}

#[test]
fn the_weight_sync_bench_times_follower_processes_swapping_a_published_version() {
    let out = reagent(&["bench", "weights", "--sizes", "1", "--followers", "2", "--repeats", "2"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // | 1 MB | followers | bytes | tensors | publish | latency | min | max | GET | GET CPU | ratio | goal | met |
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| 1 MB | ") && l.split('|').count() == 15)
        .unwrap_or_else(|| panic!("a 1 MB row in the results table:\n{stdout}"))
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(row[2], "2", "the follower count: {row:?}");
    let bytes: f64 = row[3].parse().unwrap();
    assert!((bytes - 1e6).abs() < 1e5, "≈ 1 MB of weights: {bytes}");
    let num = |i: usize| row[i].parse::<f64>().unwrap_or_else(|_| panic!("column {i} of {row:?}"));
    let (publish, latency, min, max, get, ratio) = (num(5), num(6), num(7), num(8), num(9), num(11));
    // `publish` returns after it has announced the version and set the superseded ones to
    // expire, so a follower may hold a small version before the call returns: the latency
    // need not exceed the publish time, only be positive.
    assert!(publish > 0.0 && latency > 0.0 && min <= latency && latency <= max, "{row:?}");
    // The table rounds to 0.1 ms: the ratio (of unrounded times) lies within the rounded bounds.
    let (lo, hi) = ((latency - 0.05) / (get + 0.05), (latency + 0.05) / (get - 0.05).max(1e-3));
    assert!(get > 0.0 && lo - 0.01 <= ratio && ratio <= hi + 0.01, "ratio {ratio} outside [{lo}, {hi}]: {row:?}");
    // Two followers: two GETs plus the second copy's share of the machine.
    assert!(num(12) >= 2.0 && row[13] == if ratio <= num(12) { "yes" } else { "no" }, "{row:?}");
    assert!(stdout.contains("goal at 100 MB: not measured"), "{stdout}");
}

#[test]
fn the_fanout_bench_times_followers_reading_through_replicas_and_a_chain() {
    let args = ["bench", "fanout", "--mb", "2", "--followers", "2", "--replicas", "2", "--repeats", "1"];
    let out = reagent(&args, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // | layout | publish | last follower (median; min–max) | GET | ratio | CPU | CPU/cores |
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| (") && l.split('|').count() == 9)
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    let layouts: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(
        layouts,
        ["(a) all from the primary", "(b) 2 replicas of the primary", "(c) 2 replicas in a chain"],
        "{stdout}"
    );
    for row in &rows {
        let num = |s: &str| s.trim_end_matches('×').parse::<f64>().unwrap_or_else(|_| panic!("{s:?} in {row:?}"));
        let latency = num(row[3].split_whitespace().next().unwrap());
        let (publish, get, ratio) = (num(row[2]), num(row[4]), num(row[5]));
        // A follower may hold a 2 MB version before `publish` returns (it expires the
        // superseded versions after announcing): both times positive, in no fixed order.
        assert!(publish > 0.0 && latency > 0.0 && get > 0.0, "times of the version: {row:?}");
        // Printed to 0.1 ms: the ratio lies within what the rounded figures allow.
        let (lo, hi) = ((latency - 0.05) / (get + 0.05), (latency + 0.05) / (get - 0.05).max(1e-3));
        assert!(lo - 0.01 <= ratio && ratio <= hi + 0.01, "ratio {ratio} outside [{lo}, {hi}]: {row:?}");
    }
    assert!(stdout.contains("load average before"), "{stdout}");
}

/// Smoke runs of the benches no other test runs (issue 31: a bench nobody ran once refused
/// honest input for weeks), at their smallest settings: each finishes and prints its table.
/// learner-memory, cartpole, generate, scale and pipeline here; queue, env, learner, weights,
/// fanout, trl and `experiment modes` have tests of their own (this file, bench_trl.rs,
/// experiment_cli.rs).
#[test]
fn every_bench_without_a_test_of_its_own_runs_at_its_smallest() {
    let memory =
        reagent(&["bench", "learner-memory", "--vocab", "1024", "--seq", "64", "--rows", "2", "--hidden", "64"], &[]);
    let all = text(&memory);
    assert!(memory.status.success(), "{all}");
    assert!(all.contains("| computation |") && all.contains("| learner update (chunked head) |"), "{all}");

    let cartpole = reagent(&["bench", "cartpole", "--seeds", "0", "--total-steps", "2048", "--threads", "1"], &[]);
    let all = text(&cartpole);
    assert!(all.contains("| seed |") && all.contains("| 0 |") && all.contains("goal: median steps"), "{all}");

    // SmolLM2 (set-up converts it into target/smollm2, relative to the workspace root).
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/smollm2");
    let model = model.to_str().unwrap();
    let args = ["bench", "generate", "--model", model, "--batches", "1", "--new-tokens", "2", "--repeats", "1"];
    let generate = reagent(&[&args[..], &["--no-baseline", "--no-episode"]].concat(), &[]);
    let all = text(&generate);
    assert!(all.contains("| batch | ours tokens/s |") && all.contains("not measured (--no-baseline)"), "{all}");
    assert!(!all.contains("-turn math episode"), "the episode was left out:\n{all}");

    let scale = reagent(&["bench", "scale", "--actors", "1", "--seconds", "1", "--warmup", "1", "--repeats", "1"], &[]);
    let all = text(&scale);
    assert!(scale.status.success(), "{all}");
    assert!(all.contains("| actors | scored traj/s |") && all.contains("\n| 1 | "), "{all}");

    let pipeline = reagent(&["bench", "pipeline", "--seconds", "1", "--warmup", "1"], &[]);
    let all = text(&pipeline);
    assert!(pipeline.status.success(), "{all}");
    assert!(all.contains("ratio (pipeline / in-process):") && all.contains("group wall time"), "{all}");
}

/// The device check's reference (scripts/gpu_reference.py: the learner's update and generation
/// in transformers) at its toy CPU sizes, so that a broken script is found here and not on a
/// scarce GPU machine: it runs, says the update moved the weights, and writes a positive rate
/// for every figure it reports.
#[test]
fn the_gpu_checks_transformers_reference_runs_at_its_quick_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("reference.json");
    let out = Command::new(crate::export::common::hf_python())
        .arg(crate::export::common::repo().join("scripts/gpu_reference.py"))
        .args(["--quick", "--json", path(&json)])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(all.matches("| weights changed |").count(), 2, "both update recipes moved the weights:\n{all}");
    let figures: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in ["update_tokens_per_s_fp32-autocast", "update_tokens_per_s_bf16", "generate_tokens_per_s_batch_1"] {
        assert!(figures[key].as_f64().is_some_and(|r| r > 0.0), "{key}: {figures}");
    }
}

/// The GPU device check tried on the CPU (`--device cpu --quick`), as `scripts/gpu_check.sh
/// build` does before the binary travels: every part runs and passes but the CUDA one, which
/// says it was skipped; the JSON report holds the same parts, and its figures are consistent
/// (the MFU is the learner's FLOP/s over the measured peak; bf16 log-probs differ from f32 but
/// by less than the limit; the chunked head agrees with f64). Without a GPU, `--device cuda`
/// (the default) stops at once, naming the flag and why no device is seen.
#[test]
fn the_gpu_check_runs_on_the_cpu_and_refuses_cuda_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("gpu.json");
    let out = reagent(&["bench", "gpu", "--device", "cpu", "--quick", "--report", path(&report)], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for part in ["precision", "log-probs", "head", "peak", "learner", "generation", "weights", "attention"] {
        assert!(all.lines().any(|l| l.starts_with(&format!("PASS {part} "))), "no PASS {part} line:\n{all}");
    }
    assert!(all.lines().any(|l| l.starts_with("SKIP linking ")), "{all}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let parts = json["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 9, "{json}");
    let figures = |name: &str| &parts.iter().find(|p| p["name"] == name).unwrap()["figures"];
    // The chunked head in bf16 against f64: the log-probs exact to fp32 sums, the gradients to
    // bf16 rounding.
    let head = figures("head");
    assert!(
        head["logp_max_abs"].as_f64().unwrap() < 1e-3 && head["grad_weight_rel"].as_f64().unwrap() < 2e-2,
        "{json}"
    );
    let (learner, peak) = (figures("learner"), figures("peak"));
    let mfu = learner["flops"].as_f64().unwrap() / peak["flops"].as_f64().unwrap();
    assert!((learner["mfu"].as_f64().unwrap() - mfu).abs() < 1e-9 && mfu > 0.0, "{json}");
    let mean = figures("log-probs")["mean_abs"].as_f64().unwrap();
    assert!(mean > 0.0 && mean < 0.1, "bf16 against f32: {mean}");
    assert_eq!(figures("precision")["masters_not_rounded"], 0, "{json}");

    if !policy::device::cuda_available() {
        let cuda = reagent(&["bench", "gpu", "--quick"], &[]);
        let all = text(&cuda);
        assert!(
            !cuda.status.success() && all.contains("--device is \"cuda\"") && all.contains("libtorch_cuda"),
            "{all}"
        );
    }
}

/// `reagent bench judge` through the OpenAI judge's whole path (the `[rrm]` keys a user would
/// write, the shared chat client, the parser), against testkit's **test server** speaking the
/// chat-completions API (not a model: it answers what it is told; BENCHMARKS.md has the run
/// against llama-cpp-python's real server, which takes a compile too long for this suite). The
/// server first answers cut at max_tokens (a malformed answer: retried), then a score of 0.5 for
/// everything: every episode is judged, the retried attempt is counted by its reason, the scores
/// of solved and wrong episodes tie (AUC 0.50), and the reference judge beside it scores solved
/// episodes above wrong ones (AUC 1.00, which fails if the "wrong" episodes were not wrong).
#[test]
fn the_judge_bench_counts_parses_retries_and_separates_right_from_wrong() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(testkit::chat::TestChatServer::start()).unwrap();
    server.push(testkit::chat::Reply::Cut("<think>the answer".into()));
    server.set_default(testkit::chat::Reply::good("recheck the last step", 0.5));
    let url = format!("{}/v1", server.url());
    let args = ["bench", "judge", "--endpoints", &url, "--model", "m", "--episodes", "6", "--difficulty", "1"];
    let out = reagent(&[&args[..], &["--prompts", "agent-rrm", "--concurrency", "1", "--json"]].concat(), &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let json: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let (openai, reference) = (&rows[0], &rows[1]);
    assert_eq!((openai["judged"].as_u64(), openai["failed"].as_u64()), (Some(6), Some(0)), "{json}");
    assert_eq!(openai["attempt_failures"]["malformed"], 1, "{json}");
    assert_eq!(openai["auc"].as_f64(), Some(0.5), "{json}");
    assert_eq!(server.request_count(), 7, "six judgements and one retry");
    assert_eq!(reference["judge"], "reference", "{json}");
    assert_eq!(reference["auc"].as_f64(), Some(1.0), "{json}");
    assert!(reference["mean_score_solved"].as_f64() > reference["mean_score_wrong"].as_f64(), "{json}");
}

/// The commands that train in their own process take `--device`; `cuda` where libtorch sees
/// no CUDA device (this machine, CI's) stops them at once, naming the flag, before they write
/// anything. (Where CUDA is seen the refusal cannot happen; the flag's parsing is still checked.)
#[test]
fn device_cuda_without_cuda_stops_sft_grpo_and_the_experiment_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let init = dir.path().join("no-model");
    let o = path(&out);
    let commands: [Vec<&str>; 3] = [
        vec!["sft", "--size", "micro", "--steps", "1", "--out", o, "--device", "cuda"],
        vec!["train", "grpo", "--init", path(&init), "--minutes", "1", "--out", o, "--device", "cuda"],
        vec!["experiment", "modes", "--quick", "--out", o, "--device", "cuda"],
    ];
    let bogus = reagent(&["sft", "--device", "tpu"], &[]);
    assert!(!bogus.status.success() && text(&bogus).contains("--device"), "{}", text(&bogus));
    if policy::device::cuda_available() {
        return;
    }
    for words in commands {
        let run = reagent(&words, &[]);
        let said = text(&run);
        assert!(!run.status.success(), "{words:?} ran without CUDA: {said}");
        assert!(said.contains("--device is \"cuda\" but libtorch sees no CUDA device"), "{words:?}: {said}");
        assert!(!out.exists(), "{words:?} wrote {} before refusing", out.display());
    }
}
