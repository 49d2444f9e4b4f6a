//! The role processes in their one shape, as real `reagent` processes: each (and `reagent
//! status`) refuses an empty `redis.url` with the one message; a running role is ready on its own `/readyz`, leaves on
//! SIGINT as on SIGTERM, prints its report, and stops serving its endpoint when it exits.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use protocol::config::ReagentConfig;
use protocol::redis_server::{RedisServer, RedisServerOptions};

/// Longest a role process may take to start, answer or leave (a debug build loading libtorch).
const PATIENCE: Duration = Duration::from_secs(120);

/// `reagent args…` with `env` and none of the caller's `REAGENT__*` variables.
fn reagent(args: &[&str], env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// Waits for `child` to exit within [`PATIENCE`] (killing it and failing otherwise).
fn wait_output(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not exit within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `GET path` on `addr`: the status line, or `None` when nothing answers.
fn status_line(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    reply.lines().next().map(str::to_string)
}

#[test]
fn every_role_and_status_refuse_an_empty_redis_url_with_the_one_message() {
    let cfg = ReagentConfig::from_toml_str("").unwrap();
    let message = protocol::role::redis_url(&cfg.redis).unwrap_err().to_string();
    for role in ["learner", "actor", "rrm", "status"] {
        let child = reagent(&[role], &[]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = wait_output(child, role);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "reagent {role} started without a Redis: {err}");
        assert!(err.contains(&format!("error: {message}")), "reagent {role}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_is_ready_then_leaves_on_sigint_with_its_report_and_stops_serving() {
    let redis = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", testkit::free_port().unwrap()).parse().unwrap();
    let env = [
        ("REAGENT__REDIS__URL", redis.url()),
        ("REAGENT__METRICS__LISTEN", metrics.to_string()),
        ("REAGENT__RUN__ID", "roles".to_string()),
    ];
    let child = reagent(&["rrm"], &env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let ready = || async { status_line(metrics, "/readyz").is_some_and(|l| l.starts_with("HTTP/1.1 200")) };
    testkit::wait_until("reagent rrm to be ready on its /readyz", PATIENCE, ready).await;
    assert!(status_line(metrics, "/healthz").unwrap().starts_with("HTTP/1.1 200"));

    let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let out = tokio::task::spawn_blocking(move || wait_output(child, "reagent rrm after SIGINT")).await.unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "reagent rrm left with {}: {stderr}", out.status);
    let report =
        "rrm shut down: batches 0, judged 0, failed 0, not_requested 0, unrefined_skipped 0, replies 0, reclaimed_meanwhile 0";
    assert_eq!(stdout.lines().last(), Some(report), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(status_line(metrics, "/healthz"), None, "the endpoint stops with the role");
}
