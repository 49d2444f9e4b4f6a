//! No Redis password in any output: every command a user or operator runs, against a real
//! redis-server with per-role ACL users and a known password, with that password in the URL,
//! in the variable `redis.password_env` names, or wrong — `config show`, `doctor`, `status`,
//! the learner, actor and RRM roles failing (bad password, nothing listening, a malformed URL)
//! and an RRM worker running and leaving. Each one's whole stdout and stderr is searched for
//! the password: zero hits. The placeholder `change-me` is refused by every role unless the
//! configuration allows it.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{Read, Seek, SeekFrom};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use protocol::acl::{acl_file, AclUser};
use protocol::redis_server::{RedisServer, RedisServerOptions, ServerAuth};

/// Longest any one invocation may take (a debug build loading libtorch included).
const DEADLINE: Duration = Duration::from_secs(180);

/// The password every user of the test server has; searched for in every output.
const KNOWN: &str = "Kn0wn-Redis-Passw0rd-4c1d";

/// `reagent args…` with `env` over none of the caller's `REAGENT*` variables, short Redis
/// retries, no metrics port, its stdout and stderr both into `log`.
fn command(args: &[&str], env: &[(&str, String)], log: &std::fs::File) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.args(args).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log.try_clone().unwrap());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT")) {
        cmd.env_remove(k);
    }
    cmd.env("REAGENT__REDIS__RETRY_FOR_MS", "300").env("REAGENT__METRICS__LISTEN", "");
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    cmd
}

/// Runs `reagent args…` to the end; its exit status and everything it printed.
fn reagent(args: &[&str], env: &[(&str, String)]) -> (ExitStatus, String) {
    let log = tempfile::tempfile().unwrap();
    let child = command(args, env, &log).spawn().expect("reagent starts");
    finish(child, log, args)
}

/// Waits for `child` (killed past [`DEADLINE`]) and reads what it wrote to `log`.
fn finish(mut child: Child, mut log: std::fs::File, what: &[&str]) -> (ExitStatus, String) {
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("reagent can be waited for") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("reagent {what:?} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    log.seek(SeekFrom::Start(0)).unwrap();
    log.read_to_string(&mut text).unwrap();
    (status, text)
}

fn no_secret(what: &str, text: &str) {
    assert!(!text.contains(KNOWN), "{what} printed the password:\n{text}");
}

fn server() -> RedisServer {
    let users: Vec<(AclUser, &str)> = AclUser::ALL.iter().map(|u| (*u, KNOWN)).collect();
    let auth = ServerAuth { acl: acl_file(&users, "*"), admin_password: KNOWN.into() };
    RedisServer::start(RedisServerOptions { auth: Some(auth), ..Default::default() }).unwrap()
}

#[test]
fn no_command_prints_the_redis_password() {
    let srv = server();
    let port = srv.port();
    let url = |user: &str, pw: &str| format!("redis://{user}:{pw}@127.0.0.1:{port}");
    let in_url = |user: &str| vec![("REAGENT__REDIS__URL", url(user, KNOWN))];
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };

    // config show: the URL is printed, its password masked.
    let (out, text) = reagent(&["config", "show"], &in_url("admin"));
    assert!(out.success(), "{text}");
    assert!(text.contains(&format!("redis://admin:***@127.0.0.1:{port}")), "{text}");
    no_secret("config show", &text);

    // A malformed URL holding the password: the config error names the key.
    let bad = vec![("REAGENT__REDIS__URL", format!("redis://admin:{KNOWN}@127.0.0.1:notaport"))];
    for args in [&["config", "show"][..], &["doctor"], &["rrm"]] {
        let (out, text) = reagent(args, &bad);
        assert!(!out.success() && text.contains("redis.url"), "{args:?}: {text}");
        no_secret(&format!("{args:?} with a malformed URL"), &text);
    }

    // doctor and status, with the password in the URL and in a variable.
    let (_, text) = reagent(&["doctor"], &in_url("admin"));
    assert!(text.contains("answered PING"), "{text}");
    no_secret("doctor", &text);
    let by_env = vec![
        ("REAGENT__REDIS__URL", format!("redis://127.0.0.1:{port}")),
        ("REAGENT__REDIS__USER", "admin".to_string()),
        ("REAGENT__REDIS__PASSWORD_ENV", "TEST_REDIS_PW".to_string()),
        ("TEST_REDIS_PW", KNOWN.to_string()),
    ];
    let (out, text) = reagent(&["status"], &by_env);
    assert!(out.success(), "{text}");
    no_secret("status", &text);

    // Every role and doctor failing: a wrong password (it differs from KNOWN by a suffix, so a
    // leak of it would contain KNOWN), and nothing listening.
    let wrong = format!("{KNOWN}-wrong");
    for role in ["learner", "actor", "rrm", "doctor", "status"] {
        let user = AclUser::for_role(role).map_or("admin", AclUser::name);
        for (case, u) in [
            ("wrong password", url(user, &wrong)),
            ("nothing listening", format!("redis://{user}:{KNOWN}@127.0.0.1:{closed}")),
        ] {
            let (out, text) = reagent(&[role], &[("REAGENT__REDIS__URL", u)]);
            assert!(!out.success() || role == "doctor", "{role} ({case}) failed: {text}");
            assert!(text.contains("***") || text.contains("redis.url"), "{role} ({case}) names the endpoint: {text}");
            no_secret(&format!("{role} ({case})"), &text);
        }
    }

    // The placeholder password is refused by every role unless allowed.
    for role in ["learner", "actor", "rrm"] {
        let placeholder = vec![("REAGENT__REDIS__URL", format!("redis://{role}:change-me@127.0.0.1:{port}"))];
        let (out, text) = reagent(&[role], &placeholder);
        assert!(!out.success() && text.contains("placeholder"), "{role}: {text}");
    }
}

#[test]
fn a_running_rrm_worker_logs_no_password() {
    let srv = server();
    let env = vec![
        ("REAGENT__REDIS__URL", format!("redis://127.0.0.1:{}", srv.port())),
        ("REAGENT__REDIS__USER", "rrm".to_string()),
        ("REAGENT__REDIS__PASSWORD_ENV", "TEST_REDIS_PW".to_string()),
        ("TEST_REDIS_PW", KNOWN.to_string()),
        ("REAGENT__LOGGING__FILTER", "debug".to_string()),
    ];
    let log = tempfile::tempfile().unwrap();
    let child = command(&["rrm"], &env, &log).spawn().unwrap();
    // Running means it joined its consumer group on the rollouts stream as user rrm.
    let link = protocol::link::RedisLink::connect(
        &format!("redis://admin:{KNOWN}@127.0.0.1:{}", srv.port()),
        protocol::link::LinkSettings::default(),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = Instant::now() + DEADLINE;
    let joined = || {
        rt.block_on(link.call("xinfo groups", Duration::ZERO, |mut c| async move {
            redis::cmd("XINFO")
                .arg("GROUPS")
                .arg("reagent:{default}:rollouts")
                .query_async::<redis::Value>(&mut c)
                .await
        }))
        .is_ok()
    };
    while !joined() {
        assert!(Instant::now() < deadline, "the rrm worker never joined its group");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on the child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let (status, text) = finish(child, log, &["rrm"]);
    assert!(status.success(), "the rrm worker left cleanly: {text}");
    no_secret("a running rrm worker (debug logs)", &text);
}
