//! `reagent run` as a process. A whole run against a Redis with a known password leaves that
//! password in none of its output (stdout, stderr, every file of the run directory: logs,
//! the resolved config, metrics, checkpoints). And when the launcher dies without a chance to clean up (SIGKILL
//! runs no destructor, so `kill_on_drop` cannot act), its role processes must not outlive it.
//! Found by hand: a launcher stopped with `pkill` left its learner, actors and RRM worker
//! training into a deleted run directory for minutes. Each role now gets SIGTERM from the
//! kernel when its launcher goes (`PR_SET_PDEATHSIG`) and leaves as on any SIGTERM: they left
//! 0.4 s after the kill when measured, and without the prctl this test fails (the roles were
//! still running after its 90 s limit). Its private redis-server is told the same
//! (`RedisServerOptions::stop_with_parent`): before, every run of this test left one running,
//! serving from a deleted temporary directory. So are the benches' private servers
//! (`bench::private_redis`): `reagent bench queue` killed mid-run left its server running
//! before.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::process::{Child, Command, Stdio};

use protocol::acl::{acl_file, AclUser};
use protocol::redis_server::{RedisServer, RedisServerOptions, ServerAuth};
use std::time::{Duration, Instant};

/// Longest the roles may take to start (a debug build loading libtorch, a short cold start).
const START: Duration = Duration::from_secs(240);
/// Longest a role may take to leave after the launcher died (its graceful leave included).
const LEAVE: Duration = Duration::from_secs(90);

/// The pids of the processes whose parent is `parent`, with their command lines.
fn children(parent: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid …: the command may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').unwrap_or(0) + 1..];
        let ppid: u32 = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid == parent {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

/// Whether `pid` still runs (a zombie waiting for a reaper has left).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat[stat.rfind(')').unwrap_or(0) + 1..].trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// The `reagent` binary without the caller's `REAGENT*` variables.
fn reagent() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT")) {
        cmd.env_remove(k);
    }
    cmd
}

/// `reagent run` of a small job (no cold start, one actor and one RRM worker, groups of 2,
/// `rl_minutes` of RL) with its run directory under `dir`, none of the caller's `REAGENT*`
/// variables and no metrics port.
fn run_command(dir: &std::path::Path, rl_minutes: f64) -> Command {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[launch]\nsft_model = \"\"\nrl_minutes = {rl_minutes:?}\nactors = 1\nrrm_workers = 1\neval_tasks = 2\n\
             eval_samples = 1\n[actor]\nslots = 1\ngroup_size = 2\n[learner.service]\ngroup_size = 2\n\
             groups_per_update = 1\n"
        ),
    )
    .unwrap();
    let mut cmd = reagent();
    cmd.args(["run", "--config"])
        .arg(&job)
        .env("REAGENT__RUN__DIR", dir.join("runs"))
        .env("REAGENT__METRICS__LISTEN", "");
    cmd
}

#[test]
fn the_roles_leave_when_the_launcher_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut launcher = spawn_quiet(&mut run_command(dir.path(), 5.0));
    let started = Instant::now();
    let roles = loop {
        let roles: Vec<(u32, String)> = children(launcher.id())
            .into_iter()
            .filter(|(_, cmd)| [" learner ", " actor ", " rrm ", "redis-server "].iter().any(|r| cmd.contains(r)))
            .collect();
        // The three roles and the launcher's private redis-server.
        if roles.len() == 4 {
            break roles;
        }
        if let Some(status) = launcher.try_wait().unwrap() {
            panic!("the launcher exited ({status}) before its roles were up: {roles:?}");
        }
        assert!(started.elapsed() < START, "the roles did not start within {START:?}: {roles:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("roles up after {:?}", started.elapsed());
    kill_and_watch_leave(launcher, &roles, LEAVE);
}

#[test]
fn a_killed_bench_leaves_no_redis_server() {
    // Long enough to be killed mid-run: 50,000 messages of 4 KiB, five times each way.
    let mut bench = spawn_quiet(
        reagent()
            .args(["bench", "queue", "--sizes", "4096", "--messages", "50000", "--repeats", "5"])
            .args(["--trajectory-tokens", "0"]),
    );
    let started = Instant::now();
    let server = loop {
        if let Some(server) = children(bench.id()).into_iter().find(|(_, cmd)| cmd.contains("redis-server ")) {
            break server;
        }
        if let Some(status) = bench.try_wait().unwrap() {
            panic!("the bench exited ({status}) before its redis-server was seen");
        }
        assert!(started.elapsed() < START, "no redis-server within {START:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    kill_and_watch_leave(bench, &[server], Duration::from_secs(30));
}

/// Spawns `cmd` with no standard input and its output discarded.
fn spawn_quiet(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("reagent starts")
}

/// Kills `parent` with SIGKILL (no destructor runs) and waits up to `limit` for each of `procs`
/// (its children, read from /proc) to leave; any still running then are killed and the test fails.
fn kill_and_watch_leave(mut parent: Child, procs: &[(u32, String)], limit: Duration) {
    parent.kill().unwrap();
    parent.wait().unwrap();
    let killed = Instant::now();
    while procs.iter().any(|(pid, _)| running(*pid)) {
        let left: Vec<&(u32, String)> = procs.iter().filter(|(pid, _)| running(*pid)).collect();
        if killed.elapsed() > limit {
            for (pid, _) in &left {
                // SAFETY: kill(2) on a pid this test read from /proc; failure only means it left.
                unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
            }
            panic!("children outlived their killed parent by {limit:?}: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("children {procs:?} left {:?} after their parent was killed", killed.elapsed());
}

/// Every file under `dir`, recursively.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_whole_run_prints_and_writes_no_redis_password() {
    const KNOWN: &str = "Kn0wn-Run-Passw0rd-9e2f";
    let users: Vec<(AclUser, &str)> = AclUser::ALL.iter().map(|u| (*u, KNOWN)).collect();
    let auth = ServerAuth { acl: acl_file(&users, "*"), admin_password: KNOWN.into() };
    let redis = RedisServer::start(RedisServerOptions { auth: Some(auth), ..Default::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = run_command(dir.path(), 0.2)
        .env("REAGENT__REDIS__URL", format!("redis://admin:{KNOWN}@127.0.0.1:{}", redis.port()))
        .stdin(Stdio::null())
        .output()
        .expect("reagent run runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(
        stdout.contains("held-out success at the start"),
        "the run went through RL to its report:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains(KNOWN) && !stderr.contains(KNOWN), "the password was printed:\n{stdout}\n{stderr}");
    let written = files(&dir.path().join("runs"));
    assert!(written.iter().any(|f| f.ends_with("config.toml")) && written.len() > 3, "{written:?}");
    for file in &written {
        let bytes = std::fs::read(file).unwrap();
        let hit = bytes.windows(KNOWN.len()).any(|w| w == KNOWN.as_bytes());
        assert!(!hit, "{} holds the password", file.display());
    }
}

/// With `launch.rl_updates` the steps decide: RL ends after that many learner updates, long
/// before its minutes (10 here), and the evaluation after RL takes exactly the version the last
/// counted update published (version 3 after three updates from a fresh start), not whatever
/// the learner published while the roles were leaving.
#[test]
fn rl_updates_decide_when_rl_ends_and_which_version_is_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_command(dir.path(), 10.0)
        .env("REAGENT__LAUNCH__RL_UPDATES", "3")
        .stdin(Stdio::null())
        .output()
        .expect("reagent run runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("held-out success at the start"), "the run reached its report:\n{stdout}\n{stderr}");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("runs/default/summary.json")).expect("summary.json was written"),
    )
    .unwrap();
    assert_eq!(summary["after"]["version"], 3, "{summary}");
    assert!(summary["updates"].as_u64().unwrap() >= 3, "{summary}");
    // The per-task outcomes pair the two evaluations, and the change carries its interval.
    let tasks = |when: &str, how: &str| summary[when][how]["per_task"].as_array().map_or(0, Vec::len);
    let n = summary["before"]["greedy"]["episodes"].as_u64().unwrap() as usize;
    assert!(
        n > 0 && ["before", "after"].iter().all(|w| tasks(w, "greedy") == n && tasks(w, "sampled") == n),
        "{summary}"
    );
    let change = &summary["sampled_change"];
    let (low, points, high) =
        (change["low"].as_f64().unwrap(), change["points"].as_f64().unwrap(), change["high"].as_f64().unwrap());
    assert!(low <= points && points <= high, "{summary}");
    let rates = |w: &str| summary[w]["sampled"]["success_rate"].as_f64().unwrap();
    assert!((points - 100.0 * (rates("after") - rates("before"))).abs() < 1e-9, "{summary}");
    assert!(stdout.contains("95% interval over tasks"), "{stdout}");
    assert!(!stdout.contains("reached launch.rl_minutes"), "the minutes, not the updates, ended RL:\n{stdout}");
}
