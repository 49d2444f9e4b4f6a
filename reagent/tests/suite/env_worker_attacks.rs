//! A real `reagent env-worker` process under attack by a client that holds the token (and one
//! that does not), while an honest client plays CartPole episodes beside it. After each attack:
//! the worker is still running, its resident memory (VmRSS from /proc) stayed within
//! RSS_BOUND_MIB of what it was before the attacks, and the honest client finished more
//! episodes. The attacks: garbage bytes, a 2 GiB frame header, slowloris, verify requests of
//! the full frame size made of empty strings (which once expanded 141×), one client filling the
//! session table, stepping and closing another client's session, deadlines of 10^8 s and
//! 2^64−1 s (which once panicked), and a wrong or missing token.
//!
//! ```text
//!  test ──spawn──► reagent env-worker --listen 127.0.0.1:0   (REAGENT_ENV_TOKEN set: required)
//!    honest: EnvClient(token) open/step/close CartPole in a loop ──► episodes counter
//!    attack i ──► assert up, VmRSS ≤ before + RSS_BOUND_MIB, episodes advanced
//! ```
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use env_workers::service::{auth, EnvClient, Token};
use env_workers::EnvError;
use protocol::codec::Codec;
use protocol::rpc::{EnvAction, EnvServiceRequest, EnvServiceResponse, ServiceError, StepReply};
use protocol::wire::{TaskFamily, TaskSpec};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Growth of the worker's resident memory allowed over the whole run, in MiB. Without the
/// transport's limits one 0.95 MiB verify request alone grew it by ~134 MiB.
const RSS_BOUND_MIB: u64 = 64;
const SECRET: &str = "attack-test-token-7f3a";
const TIMEOUT: Duration = Duration::from_secs(5);
/// The worker's request frame limit (`env_worker.max_request_bytes`, default).
const FRAME: usize = 1 << 20;
const READ_TIMEOUT_MS: u64 = 400;

struct Worker {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    fn start() -> Self {
        Self::start_with(Stdio::null())
    }

    /// [`Worker::start`] with the worker's log (stderr) going to `stderr`.
    fn start_with(stderr: Stdio) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_reagent"))
            .args(["env-worker", "--listen", "127.0.0.1:0", "--grace-s", "1"])
            .env("REAGENT__METRICS__LISTEN", "127.0.0.1:0")
            .env("REAGENT_ENV_TOKEN", SECRET)
            .env("REAGENT__ENV_WORKER__READ_TIMEOUT_MS", READ_TIMEOUT_MS.to_string())
            .env("REAGENT__ENV_WORKER__HANDSHAKE_TIMEOUT_MS", "400")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("reagent starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("a line");
        let addr = line.trim().strip_prefix("env-worker listening on ").expect("the address line").parse().unwrap();
        Self { child, addr }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
    }

    fn is_up(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

fn cartpole(seed: u64) -> TaskSpec {
    TaskSpec { family: TaskFamily::Cartpole, seed, difficulty: 1 }
}

async fn client(addr: SocketAddr) -> EnvClient {
    EnvClient::connect(addr, TIMEOUT, Some(&Token::new(SECRET))).await.expect("an honest connection")
}

/// Plays CartPole episodes until dropped, counting finished ones.
fn honest(addr: SocketAddr, episodes: Arc<AtomicU64>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let env = client(addr).await;
        for seed in 0.. {
            let session = env.open(cartpole(seed)).await.expect("honest open").session;
            for step in 0u32.. {
                let StepReply::Control(o) =
                    env.step(session, EnvAction::Discrete(step % 2)).await.expect("honest step")
                else {
                    panic!("a control reply")
                };
                if o.terminated || o.truncated {
                    break;
                }
            }
            assert!(env.close(session).await.expect("honest close"));
            episodes.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// A raw connection that passed the handshake with the right token.
async fn raw(addr: SocketAddr) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(&auth::hello(Some(&Token::new(SECRET)))).await.unwrap();
    assert_eq!(sock.read_u8().await.unwrap(), 0, "the token is accepted");
    sock
}

/// Waits for the worker to close `sock`; returns how long it took.
async fn hung_up(sock: &mut TcpStream, within: Duration) -> Duration {
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    loop {
        match tokio::time::timeout(within, sock.read(&mut buf)).await.expect("the worker hangs up") {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => {} // replies (e.g. an error response) before the close
        }
    }
}

fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// `tarpc::ClientMessage::Request` as the wire has it, with any deadline (seconds, nanos).
#[derive(Serialize)]
enum RawMessage {
    Request { context: RawContext, id: u64, message: EnvServiceRequest },
}

#[derive(Serialize)]
struct RawContext {
    deadline: (u64, u32),
    trace_context: tarpc::trace::Context,
}

fn request(id: u64, deadline_s: u64, message: EnvServiceRequest) -> Vec<u8> {
    let context = RawContext { deadline: (deadline_s, 0), trace_context: tarpc::trace::Context::default() };
    let raw = RawMessage::Request { context, id, message };
    framed(&Codec::new(16 << 20).encode(&raw).expect("encodes"))
}

async fn read_response(sock: &mut TcpStream) -> tarpc::Response<EnvServiceResponse> {
    let len = tokio::time::timeout(TIMEOUT, sock.read_u32()).await.expect("a reply in time").expect("a frame") as usize;
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body).await.unwrap();
    Codec::new(16 << 20).decode(&body).expect("a response")
}

struct Check {
    baseline_kib: u64,
    episodes: Arc<AtomicU64>,
}

impl Check {
    /// After an attack: up, memory bounded, the honest client advancing.
    async fn after(&self, worker: &mut Worker, attack: &str) {
        let before = self.episodes.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.episodes.load(Ordering::SeqCst) < before + 2 {
            assert!(Instant::now() < deadline, "{attack}: the honest client made no progress");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(worker.is_up(), "{attack}: the worker died");
        let rss = worker.rss_kib();
        let grown = rss.saturating_sub(self.baseline_kib);
        eprintln!("{attack}: VmRSS {rss} KiB (+{grown} KiB), honest episodes {}", self.episodes.load(Ordering::SeqCst));
        assert!(grown <= RSS_BOUND_MIB << 10, "{attack}: VmRSS grew by {grown} KiB, over {RSS_BOUND_MIB} MiB");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_env_worker_survives_attacks_while_an_honest_client_plays() {
    let mut worker = Worker::start();
    let addr = worker.addr;
    let episodes = Arc::new(AtomicU64::new(0));
    let honest_task = honest(addr, episodes.clone());
    let check = Check { baseline_kib: worker.rss_kib(), episodes };
    check.after(&mut worker, "warm-up").await;

    // Garbage instead of a handshake, and garbage in a frame after one.
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let _ = sock.write_all(&garbage).await;
    hung_up(&mut sock, TIMEOUT).await;
    let mut sock = raw(addr).await;
    sock.write_all(&framed(&garbage)).await.unwrap();
    hung_up(&mut sock, TIMEOUT).await;
    check.after(&mut worker, "garbage bytes").await;

    // A frame header claiming 2 GiB: refused before anything is read or allocated.
    let mut sock = raw(addr).await;
    sock.write_all(&[0x80, 0, 0, 0, 1, 2, 3]).await.unwrap();
    hung_up(&mut sock, TIMEOUT).await;
    check.after(&mut worker, "2 GiB frame header").await;

    // Slowloris: eight connections each dribbling a frame a byte at a time.
    let slow: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                let mut sock = raw(addr).await;
                sock.write_all(&1000u32.to_be_bytes()).await.unwrap();
                let started = Instant::now();
                let mut tick = tokio::time::interval(Duration::from_millis(50));
                loop {
                    tick.tick().await;
                    if sock.write_all(&[1]).await.is_err() {
                        break;
                    }
                    let mut probe = [0u8; 1];
                    if let Ok(Ok(0) | Err(_)) =
                        tokio::time::timeout(Duration::from_millis(1), sock.read(&mut probe)).await
                    {
                        break;
                    }
                    assert!(started.elapsed() < Duration::from_secs(5), "a slowloris connection was never closed");
                }
                started.elapsed()
            })
        })
        .collect();
    for s in slow {
        let took = s.await.unwrap();
        assert!(took < Duration::from_millis(READ_TIMEOUT_MS * 4), "slowloris closed after {took:?}");
    }
    check.after(&mut worker, "slowloris").await;

    // Verify requests of the full frame size made of empty strings, on 16 connections at once.
    let spec = TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 };
    let empty = vec![String::new(); FRAME - 64];
    let frame = request(1, 10, EnvServiceRequest::Verify { spec, agent_messages: empty });
    assert!(frame.len() <= FRAME + 4 && frame.len() > FRAME - 64, "a full frame: {}", frame.len());
    let frame = Arc::new(frame);
    let floods: Vec<_> = (0..16)
        .map(|_| {
            let frame = frame.clone();
            tokio::spawn(async move {
                let mut sock = raw(addr).await;
                sock.write_all(&frame).await.unwrap();
                hung_up(&mut sock, TIMEOUT).await
            })
        })
        .collect();
    for f in floods {
        f.await.unwrap();
    }
    check.after(&mut worker, "verify amplification (16 × 1 MiB of empty strings)").await;

    // One client opening sessions as fast as it can: stopped by its quota, in a moment.
    let greedy = client(addr).await;
    let started = Instant::now();
    let mut opened = 0;
    let refusal = loop {
        match greedy.open(cartpole(opened)).await {
            Ok(_) => opened += 1,
            Err(e) => break e,
        }
        assert!(opened <= 4096, "no quota");
    };
    eprintln!("one client: {opened} sessions then {refusal} after {:?}", started.elapsed());
    assert_eq!(refusal, EnvError::Service(ServiceError::Quota { limit: 64 }));
    check.after(&mut worker, "table filling by one client").await;
    drop(greedy);

    // Another client's session: stepping and closing it are refused; the owner goes on.
    let owner = client(addr).await;
    let victim = owner.open(cartpole(99)).await.unwrap().session;
    let thief = client(addr).await;
    let refused = EnvError::Service(ServiceError::NotOwner(victim));
    assert_eq!(thief.step(victim, EnvAction::Discrete(0)).await.unwrap_err(), refused);
    assert_eq!(thief.close(victim).await.unwrap_err(), refused);
    assert!(matches!(owner.step(victim, EnvAction::Discrete(0)).await.unwrap(), StepReply::Control(_)));
    assert!(owner.close(victim).await.unwrap());
    check.after(&mut worker, "stepping another client's session").await;

    // Deadlines of 10^8 s and 2^64−1 s: clamped; the request is served on a live connection.
    let mut sock = raw(addr).await;
    for (id, secs) in [(1, 100_000_000), (2, u64::MAX)] {
        sock.write_all(&request(id, secs, EnvServiceRequest::Open { spec: cartpole(5) })).await.unwrap();
        let reply = read_response(&mut sock).await;
        assert_eq!(reply.request_id, id);
        assert!(matches!(reply.message, Ok(EnvServiceResponse::Open(Ok(_)))), "{:?}", reply.message);
    }
    check.after(&mut worker, "deadlines of 1e8 s and u64::MAX s").await;

    // A wrong or missing token: refused, nothing served.
    for token in [None, Some(Token::new("guess"))] {
        let err = EnvClient::connect(addr, TIMEOUT, token.as_ref()).await.err().expect("refused");
        assert!(matches!(err, EnvError::Unauthorized { .. }), "{err}");
    }
    check.after(&mut worker, "wrong or missing token").await;

    assert!(!honest_task.is_finished(), "the honest client never failed");
    honest_task.abort();
}

/// Sockets that connect and never present a token, from another address (127.0.0.2), kept at
/// 96 (over the 64 one address may hold in its handshake) and re-opened as soon as the worker
/// closes them (at its 400 ms handshake deadline, or at once when a budget is full), while a token holder connects from 127.0.0.1 and opens
/// and closes a session 15 times: every time it is served. Before the handshake budgets, the
/// idle sockets held every one of the 64 connection slots and 14 of 15 such attempts failed,
/// and the worker logged each refusal (384 lines in 30 s); now one line per kind per 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_unauthenticated_sockets_do_not_keep_a_token_holder_out() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("env-worker.log");
    let mut worker = Worker::start_with(Stdio::from(std::fs::File::create(&log_path).unwrap()));
    let addr = worker.addr;
    let (stop, opened) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let idle: Vec<_> = (0..96)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let socket = tokio::net::TcpSocket::new_v4().unwrap();
                    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                    let Ok(mut sock) = socket.connect(addr).await else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    opened.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 64];
                    let _ = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf)).await;
                }
            })
        })
        .collect();
    let started = Instant::now();
    while opened.load(Ordering::SeqCst) < 256 {
        assert!(started.elapsed() < Duration::from_secs(20), "the idle sockets connect and are re-opened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let token = Token::new(SECRET);
    let mut failures = Vec::new();
    for seed in 0..15 {
        let served = async {
            let env = EnvClient::connect(addr, TIMEOUT, Some(&token)).await?;
            let session = env.open(cartpole(seed)).await?.session;
            env.close(session).await
        }
        .await;
        if let Err(e) = served {
            failures.push(e.to_string());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let attack = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    idle.iter().for_each(tokio::task::JoinHandle::abort);
    assert!(worker.is_up(), "the worker is still running");
    assert!(failures.is_empty(), "{} of 15 honest attempts failed: {failures:?}", failures.len());
    drop(worker);
    let log = std::fs::read_to_string(&log_path).unwrap();
    let warnings = log.lines().filter(|l| l.contains("WARN")).count();
    // Three kinds of refusal, each at most once per 5 s, over the attack.
    let most = 3 * (attack.as_secs() as usize / 5 + 1);
    assert!(warnings <= most, "{warnings} warnings in {attack:?} (at most {most}):\n{log}");
    assert!(log.contains("left_out="), "the throttled lines count what they left out:\n{log}");
}
