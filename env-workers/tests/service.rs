//! The env-worker over loopback TCP: many concurrent sessions, a client that disappears (its
//! session expires), a call past its deadline, malformed requests, limits and shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use env_workers::service::{serve, EnvClient, SessionTable, TableConfig};
use env_workers::EnvError;
use protocol::rpc::{EnvAction, ServiceError, SessionId, Start, StepReply};
use protocol::wire::{TaskFamily, TaskSpec};
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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let table = Arc::new(SessionTable::new(config));
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, table.clone(), stop.clone(), Duration::from_secs(5)));
    Worker { addr, table, stop, task }
}

async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_sessions_over_several_connections() {
    let w = worker(TableConfig::default()).await;
    let mut tasks = Vec::new();
    for c in 0..4u64 {
        let client = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
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
async fn a_vanished_clients_session_expires() {
    let w = worker(TableConfig { idle_timeout: Duration::from_millis(200), ..TableConfig::default() }).await;
    let client = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
    let opened = client.open(cartpole(1)).await.unwrap();
    drop(client); // the actor dies without closing
    assert_eq!(w.table.len(), 1);
    wait_until("the idle session to expire", Duration::from_secs(10), || w.table.is_empty()).await;
    let again = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
    let err = again.step(opened.session, EnvAction::Discrete(0)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::UnknownSession(opened.session)));
    assert!(err.to_string().contains("expired"), "{err}");
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
    let client = EnvClient::connect(addr, Duration::from_millis(300)).await.unwrap();
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
    // Garbage in a valid frame, then a frame claiming 1 GiB: each connection is dropped.
    for bytes in [vec![0, 0, 0, 5, 1, 2, 3, 4, 5], vec![0x40, 0, 0, 0, 9, 9]] {
        let mut sock = TcpStream::connect(w.addr).await.unwrap();
        sock.write_all(&bytes).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(TIMEOUT, sock.read(&mut buf)).await.expect("the server hangs up");
        assert!(matches!(read, Ok(0) | Err(_)), "connection closed, got {read:?}");
    }
    // The worker still serves well-formed clients.
    let client = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
    let opened = client.open(cartpole(2)).await.unwrap();
    assert!(matches!(client.step(opened.session, EnvAction::Discrete(1)).await.unwrap(), StepReply::Control(_)));
    // Requests that parse but make no sense get a clear error.
    let err = client.step(opened.session, EnvAction::Text("hi".into())).await.unwrap_err();
    assert!(err.to_string().contains("text action was sent to a control task"), "{err}");
    let err = client.step(SessionId(999_999), EnvAction::Discrete(0)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::UnknownSession(SessionId(999_999))));
    let err = client.open(TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 9 }).await.unwrap_err();
    assert!(err.to_string().contains("difficulty 9"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bounded_with_a_clear_error() {
    let w = worker(TableConfig { max_sessions: 2, ..TableConfig::default() }).await;
    let client = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
    client.open(cartpole(1)).await.unwrap();
    client.open(cartpole(2)).await.unwrap();
    let err = client.open(cartpole(3)).await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::Full { limit: 2 }));
    assert!(err.to_string().contains("2 sessions open"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_sessions_and_lets_open_ones_finish() {
    let w = worker(TableConfig::default()).await;
    let client = EnvClient::connect(w.addr, TIMEOUT).await.unwrap();
    let opened = client.open(cartpole(1)).await.unwrap();
    w.stop.cancel();
    wait_until("shutdown to begin", Duration::from_secs(5), || w.table.is_closing()).await;
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
