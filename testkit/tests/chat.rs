//! The chat test server's scripted behaviours, seen by a real HTTP client over TCP.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use testkit::chat::{Reply, TestChatServer};

const CALL: Duration = Duration::from_secs(10);

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(CALL).build().unwrap()
}

async fn post(server: &TestChatServer) -> reqwest::Result<reqwest::Response> {
    client()
        .post(format!("{}/v1/chat/completions", server.url()))
        .bearer_auth("secret")
        .json(&serde_json::json!({"messages": [{"role": "user", "content": "judge this"}]}))
        .send()
        .await
}

async fn content(server: &TestChatServer) -> (String, String) {
    let body: serde_json::Value = post(server).await.unwrap().error_for_status().unwrap().json().await.unwrap();
    let choice = &body["choices"][0];
    (choice["message"]["content"].as_str().unwrap().to_string(), choice["finish_reason"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn scripted_replies_come_in_order_then_the_default() {
    let server = TestChatServer::start().await.unwrap();
    server.push(Reply::Content("first".into())).push(Reply::Cut("cut".into()));
    server.set_default(Reply::good("Fine.", 0.25));
    assert_eq!(content(&server).await, ("first".to_string(), "stop".to_string()));
    assert_eq!(content(&server).await, ("cut".to_string(), "length".to_string()));
    let (text, finish) = content(&server).await;
    assert_eq!(finish, "stop");
    assert!(text.contains("<critique>Fine.</critique>\n<score>0.25</score>"), "{text}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer secret"));
    assert_eq!(requests[0].message("user"), Some("judge this"));
}

#[tokio::test]
async fn reasoning_statuses_and_malformed_bodies() {
    let server = TestChatServer::start().await.unwrap();
    server.push(Reply::ContentWithReasoning { content: "c".into(), reasoning: "r".into() });
    server.push(Reply::Status(503, "overloaded".into())).push(Reply::NotJson);
    let body: serde_json::Value = post(&server).await.unwrap().json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["reasoning_content"], "r");
    let busy = post(&server).await.unwrap();
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.text().await.unwrap(), "overloaded");
    let not_json = post(&server).await.unwrap();
    assert_eq!(not_json.status(), 200);
    assert!(not_json.json::<serde_json::Value>().await.is_err(), "the body is not JSON");

    let other = client().get(format!("{}/v1/models", server.url())).send().await.unwrap();
    assert_eq!(other.status(), 404);
    let get = client().get(format!("{}/v1/chat/completions", server.url())).send().await.unwrap();
    assert_eq!(get.status(), 404, "only POST is served");
    assert_eq!(server.request_count(), 3, "only completion requests are recorded");
}

#[tokio::test]
async fn a_dropped_connection_gets_no_response() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Drop);
    let err = post(&server).await.expect_err("no response");
    assert!(!err.is_timeout() && !err.is_status(), "closed, not timed out or answered: {err:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn delayed_replies_wait_and_hanging_ones_never_answer() {
    let server = TestChatServer::start().await.unwrap();
    server.push(Reply::after(Duration::from_millis(200), Reply::Content("late".into())));
    let started = Instant::now();
    assert_eq!(content(&server).await.0, "late");
    assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());

    server.set_default(Reply::Hang);
    let call = client().post(format!("{}/v1/chat/completions", server.url())).json(&serde_json::json!({}));
    let err = call.timeout(Duration::from_millis(300)).send().await.expect_err("never answered");
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(server.peak_active(), 1);
}

#[tokio::test]
async fn dropping_the_server_closes_its_connections() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Hang);
    let url = format!("{}/v1/chat/completions", server.url());
    let call = tokio::spawn(async move { client().post(url).json(&serde_json::json!({})).send().await });
    testkit::wait_until("the hanging request to arrive", CALL, || async {
        server.open_connections() == 1 && server.request_count() == 1
    })
    .await;
    drop(server);
    let err =
        tokio::time::timeout(CALL, call).await.expect("the client sees the close").unwrap().expect_err("no response");
    assert!(!err.is_timeout(), "closed by the server, not timed out: {err:?}");
}
