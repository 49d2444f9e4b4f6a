//! The env-worker over loopback TCP: many concurrent sessions, a client that disappears (its
//! sessions are freed with its connection), idle sessions expiring, a call past its deadline,
//! malformed requests, ownership, quotas and caps, tokens, and shutdown.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use env_workers::service::{auth, serve, EnvClient, ServeOptions, SessionTable, TableConfig, Token};
use env_workers::EnvError;
use protocol::rpc::{EnvAction, ServiceError, SessionId, Start, StepReply};
use protocol::wire::{TaskFamily, TaskSpec};
use testkit::wait_until;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(5);

fn cartpole(seed: u64) -> TaskSpec {
    TaskSpec { family: TaskFamily::Cartpole, seed, difficulty: 1 }
}

struct Worker {
    addr: std::net::SocketAddr,
    table: Arc<SessionTable>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn worker(config: TableConfig) -> Worker {
    worker_with(config, ServeOptions::default()).await
}

async fn worker_with(config: TableConfig, options: ServeOptions) -> Worker {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let table = Arc::new(SessionTable::new(config));
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, table.clone(), options, stop.clone()));
    Worker { addr, table, stop, task }
}

async fn connect(addr: std::net::SocketAddr) -> EnvClient {
    EnvClient::connect(addr, TIMEOUT, None).await.unwrap()
}

/// A raw connection past the handshake.
async fn raw(addr: std::net::SocketAddr) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(&auth::hello(None)).await.unwrap();
    assert_eq!(sock.read_u8().await.unwrap(), 0, "accepted");
    sock
}

async fn assert_hung_up(sock: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(within, sock.read(&mut buf)).await.expect("the server hangs up");
    assert!(matches!(read, Ok(0) | Err(_)), "connection closed, got {read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_sessions_over_several_connections() {
    let w = worker(TableConfig::default()).await;
    let mut tasks = Vec::new();
    for c in 0..4u64 {
        let client = connect(w.addr).await;
        tasks.push(tokio::spawn(async move {
            let mut sessions = Vec::new();
            for s in 0..50 {
                let opened = client.open(cartpole(c * 100 + s)).await.unwrap();
                assert!(matches!(opened.start, Start::Control { actions: 2, .. }));
                sessions.push(opened.session);
            }
            let mut steps = 0;
            for _ in 0..5 {
                let batch = sessions.iter().map(|s| (*s, EnvAction::Discrete((steps % 2) as u32))).collect();
                for reply in client.step_batch(batch).await.unwrap() {
                    assert!(matches!(reply.unwrap(), StepReply::Control(o) if o.observation.len() == 4));
                    steps += 1;
                }
            }
            for s in &sessions {
                assert!(client.close(*s).await.unwrap());
            }
            steps
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 4 * 50 * 5);
    assert!(w.table.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_clients_sessions_are_freed_with_its_connection() {
    let w = worker(TableConfig::default()).await;
    let client = connect(w.addr).await;
    let opened = client.open(cartpole(1)).await.unwrap();
    client.open(cartpole(2)).await.unwrap();
    assert_eq!(w.table.len(), 2);
    drop(client); // the actor dies without closing
    wait_until("the sessions to be freed", Duration::from_secs(5), || async { w.table.is_empty() }).await;
    let again = connect(w.addr).await;
    let err = again.step(opened.session, EnvAction::Discrete(0)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::UnknownSession(opened.session)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_of_a_live_connection_expires() {
    let w = worker(TableConfig { idle_timeout: Duration::from_millis(200), ..TableConfig::default() }).await;
    let client = connect(w.addr).await;
    let opened = client.open(cartpole(1)).await.unwrap();
    wait_until("the idle session to expire", Duration::from_secs(10), || async { w.table.is_empty() }).await;
    let err = client.step(opened.session, EnvAction::Discrete(0)).await.unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_belong_to_their_connection() {
    let w = worker(TableConfig::default()).await;
    let (mine, other) = (connect(w.addr).await, connect(w.addr).await);
    let a = mine.open(cartpole(1)).await.unwrap().session;
    let b = mine.open(cartpole(2)).await.unwrap().session;
    assert_ne!(a.0 >> 64, b.0 >> 64, "ids are random, not sequential");
    let refused = EnvError::Service(ServiceError::NotOwner(a));
    assert_eq!(other.step(a, EnvAction::Discrete(0)).await.unwrap_err(), refused);
    assert_eq!(other.close(a).await.unwrap_err(), refused);
    let batch = other.step_batch(vec![(a, EnvAction::Discrete(0))]).await.unwrap();
    assert_eq!(batch[0].clone().unwrap_err(), refused);
    // The owner is unaffected.
    assert!(matches!(mine.step(a, EnvAction::Discrete(0)).await.unwrap(), StepReply::Control(_)));
    assert!(mine.close(a).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_and_caps_refuse_with_typed_errors() {
    let mut options = ServeOptions::default();
    options.config.max_batch = 3;
    let table = TableConfig { max_per_owner: 4, ..TableConfig::default() };
    let w = worker_with(table, options).await;
    let client = connect(w.addr).await;
    let mut sessions = Vec::new();
    for s in 0..4 {
        sessions.push(client.open(cartpole(s)).await.unwrap().session);
    }
    assert_eq!(client.open(cartpole(9)).await.unwrap_err(), EnvError::Service(ServiceError::Quota { limit: 4 }));
    // Another connection has its own quota.
    assert!(connect(w.addr).await.open(cartpole(9)).await.is_ok());
    let batch = sessions.iter().map(|s| (*s, EnvAction::Discrete(0))).collect();
    let err = client.step_batch(batch).await.unwrap_err();
    assert!(err.to_string().contains("sessions per step_batch: 4 is over the limit of 3"), "{err}");
    let spec = TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 };
    let err = client.verify(spec, vec![String::new(); 17]).await.unwrap_err();
    assert!(err.to_string().contains("messages per verify: 17 is over the limit of 16"), "{err}");
    let err = client.verify(spec, vec!["x".repeat(4097)]).await.unwrap_err();
    assert!(err.to_string().contains("characters of message 0: 4097 is over the limit of 4096"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_set() {
    let options = ServeOptions { token: Some(Token::new("right")), ..ServeOptions::default() };
    let w = worker_with(TableConfig::default(), options).await;
    for presented in [None, Some(Token::new("wrong"))] {
        let err = EnvClient::connect(w.addr, TIMEOUT, presented.as_ref()).await.err().expect("refused");
        assert!(matches!(err, EnvError::Unauthorized { .. }), "{err}");
    }
    let client = EnvClient::connect(w.addr, TIMEOUT, Some(&Token::new("right"))).await.unwrap();
    assert!(client.open(cartpole(1)).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed() {
    let mut options = ServeOptions::default();
    options.config.read_timeout_ms = 300;
    options.config.idle_timeout_s = 1;
    options.config.handshake_timeout_ms = 500;
    let w = worker_with(TableConfig::default(), options).await;
    // A frame begun and never finished: closed after the read timeout.
    let mut slow = raw(w.addr).await;
    slow.write_all(&[0, 0, 0, 100, 1]).await.unwrap();
    let started = Instant::now();
    assert_hung_up(&mut slow, Duration::from_secs(3)).await;
    assert!(started.elapsed() < Duration::from_millis(900), "closed after {:?}", started.elapsed());
    // Nothing at all: closed after the idle timeout.
    let mut idle = raw(w.addr).await;
    assert_hung_up(&mut idle, Duration::from_secs(4)).await;
    // No handshake at all: closed after the handshake timeout.
    let mut mute = TcpStream::connect(w.addr).await.unwrap();
    assert_hung_up(&mut mute, Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_gives_a_deadline_error_naming_it() {
    // A listener that accepts connections and never replies: a stuck env-worker.
    let stuck = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = stuck.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = stuck.accept().await {
            held.push(sock);
        }
    });
    let client = EnvClient::connect(addr, Duration::from_millis(300), None).await;
    // The handshake is not answered either: the connect itself times out, naming the peer.
    let err = client.err().expect("no answer");
    assert!(matches!(err, EnvError::Timeout { op: "connect", .. }), "{err}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_answering_gives_a_deadline_error_naming_it() {
    // A peer that accepts the handshake and then never replies: a stuck env-worker.
    let stuck = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = stuck.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut sock, _)) = stuck.accept().await {
            let mut hello = [0u8; 10];
            sock.read_exact(&mut hello).await.unwrap();
            sock.write_all(&[0]).await.unwrap();
            held.push(sock);
        }
    });
    let client = EnvClient::connect(addr, Duration::from_millis(300), None).await.unwrap();
    let started = Instant::now();
    let err = client.open(cartpole(1)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "the deadline held");
    assert!(matches!(err, EnvError::Timeout { op: "open", .. }), "{err}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_end_only_their_connection() {
    let w = worker(TableConfig::default()).await;
    // Garbage instead of a handshake: dropped.
    let mut sock = TcpStream::connect(w.addr).await.unwrap();
    sock.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert_hung_up(&mut sock, TIMEOUT).await;
    // Garbage in a valid frame, then a frame claiming 1 GiB: each connection is dropped.
    for bytes in [vec![0, 0, 0, 5, 1, 2, 3, 4, 5], vec![0x40, 0, 0, 0, 9, 9]] {
        let mut sock = raw(w.addr).await;
        sock.write_all(&bytes).await.unwrap();
        assert_hung_up(&mut sock, TIMEOUT).await;
    }
    // The worker still serves well-formed clients.
    let client = connect(w.addr).await;
    let opened = client.open(cartpole(2)).await.unwrap();
    assert!(matches!(client.step(opened.session, EnvAction::Discrete(1)).await.unwrap(), StepReply::Control(_)));
    // Requests that parse but make no sense get a clear error.
    let err = client.step(opened.session, EnvAction::Text("hi".into())).await.unwrap_err();
    assert!(err.to_string().contains("text action was sent to a control task"), "{err}");
    let err = client.step(SessionId(999_999_999), EnvAction::Discrete(0)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::UnknownSession(SessionId(999_999_999))));
    let err = client.open(TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 9 }).await.unwrap_err();
    assert!(err.to_string().contains("difficulty 9"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bounded_with_a_clear_error() {
    let w = worker(TableConfig { max_sessions: 2, ..TableConfig::default() }).await;
    let client = connect(w.addr).await;
    client.open(cartpole(1)).await.unwrap();
    client.open(cartpole(2)).await.unwrap();
    let err = client.open(cartpole(3)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::Full { limit: 2 }));
    assert!(err.to_string().contains("2 sessions open"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_sessions_and_lets_open_ones_finish() {
    let w = worker(TableConfig::default()).await;
    let client = connect(w.addr).await;
    let opened = client.open(cartpole(1)).await.unwrap();
    w.stop.cancel();
    wait_until("shutdown to begin", Duration::from_secs(5), || async { w.table.is_closing() }).await;
    assert_eq!(client.open(cartpole(2)).await.unwrap_err(), EnvError::Service(ServiceError::ShuttingDown));
    // The open episode can still be played and closed during the grace period ...
    assert!(matches!(client.step(opened.session, EnvAction::Discrete(0)).await.unwrap(), StepReply::Control(_)));
    assert!(client.close(opened.session).await.unwrap());
    // ... and then the server returns.
    tokio::time::timeout(TIMEOUT, w.task).await.expect("serve returns after the last session").unwrap().unwrap();
}

#[tokio::test]
async fn the_local_client_behaves_like_the_remote_one() {
    let table = Arc::new(SessionTable::new(TableConfig::default()));
    let client = EnvClient::local(table.clone());
    let opened = client.open(cartpole(4)).await.unwrap();
    let Start::Control { observation, .. } = opened.start else { panic!("control start") };
    assert_eq!(observation.len(), 4);
    assert!(matches!(client.step(opened.session, EnvAction::Discrete(0)).await.unwrap(), StepReply::Control(_)));
    assert!(client.close(opened.session).await.unwrap());
    assert!(table.is_empty());
}

/// Honest traffic at the service's own limits is answered (issue 31): one `step_batch` over
/// `max_batch` sessions of every family, each ending its episode with an answer (or a control
/// step). Such a reply is many small results, a few bytes each on the wire and about a hundred
/// in memory; a decode budget of eight times the payload (plus 4 KiB) refused the cartpole batch
/// ("payload of 2132 bytes would decode into more than 21152 bytes") and closed the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_step_batch_of_every_family_is_answered() {
    let options = ServeOptions::default();
    let max = options.config.max_batch;
    let w = worker_with(TableConfig { max_per_owner: max, ..TableConfig::default() }, options).await;
    let client = connect(w.addr).await;
    for family in [TaskFamily::Cartpole, TaskFamily::Math, TaskFamily::Retail, TaskFamily::Webnav, TaskFamily::Searchqa]
    {
        let mut sessions = Vec::with_capacity(max);
        for seed in 0..max as u64 {
            sessions.push(client.open(TaskSpec { family, seed, difficulty: 3 }).await.unwrap().session);
        }
        let action = match family {
            TaskFamily::Cartpole => EnvAction::Discrete(1),
            _ => EnvAction::Text("<answer>7</answer>".into()),
        };
        let replies = client.step_batch(sessions.iter().map(|s| (*s, action.clone())).collect()).await;
        let replies = replies.unwrap_or_else(|e| panic!("{family:?}: a step_batch of {max} sessions failed: {e}"));
        assert_eq!(replies.len(), max, "{family:?}");
        assert!(replies.iter().all(Result::is_ok), "{family:?}: {:?}", replies.iter().find(|r| r.is_err()));
        for s in sessions {
            client.close(s).await.unwrap();
        }
    }
    assert!(w.table.is_empty());
}
