//! Retail episodes whose user is played by a chat model (MUA-RL), against the testkit's chat
//! **test server** (a real HTTP server speaking the OpenAI protocol, replying what each test
//! scripts): the conversation reaches the model role-flipped with the user's persona and private
//! goal in the system prompt, the stop signal and the turn limit end the episode, timeouts, 5xx
//! and malformed replies are retried and then fail with a clear error (the rule-based user
//! answering that turn, counted), and rewards come from the environment's ground truth whatever
//! the model says; an env-worker configured by `[user_model]` serves such episodes over TCP, a
//! slow user holding up only its own session. Every wait is bounded by the model's own deadlines.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::sync::Arc;
use std::time::Duration;

use env_workers::chat::ChatSettings;
use env_workers::families::retail::RetailEnv;
use env_workers::service::{serve, EnvClient, ServeOptions, SessionTable, TableConfig};
use env_workers::user_model::{UserModel, UserModelError, UserModelSettings, GREETING};
use env_workers::{Environment, Guarded, Limits, Observation, Source, TaskFamily, TaskSpec};
use protocol::config::ReagentConfig;
use protocol::rpc::{EnvAction, StepReply};
use testkit::chat::{Recorded, Reply, TestChatServer};
use testkit::wait_until;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const STOP: &str = "###STOP###";

fn spec(seed: u64) -> TaskSpec {
    TaskSpec { family: TaskFamily::Retail, seed, difficulty: 1 }
}

fn settings(server: &TestChatServer, timeout: Duration, retries: u32) -> UserModelSettings {
    UserModelSettings {
        chat: ChatSettings {
            endpoints: vec![server.url()],
            model: "user-sim-test".into(),
            api_key: None,
            timeout,
            retries,
            backoff: Duration::from_millis(5),
            backoff_max: Duration::from_millis(20),
            endpoint_cooldown: Duration::from_secs(60),
            max_concurrency: 4,
            max_tokens: 64,
            temperature: 0.0,
        },
        max_turns: 10,
        stop_signal: STOP.into(),
    }
}

fn model(server: &TestChatServer) -> Arc<UserModel> {
    UserModel::new(settings(server, Duration::from_secs(5), 2)).unwrap()
}

/// The rule-based env of the same task, for its private facts and reference.
fn rules(seed: u64) -> RetailEnv {
    RetailEnv::new(spec(seed))
}

fn played(seed: u64, model: &Arc<UserModel>) -> Guarded {
    Guarded::new(Box::new(RetailEnv::with_user_model(spec(seed), model.clone())), Limits::default())
}

fn roles(r: &Recorded) -> Vec<(String, String)> {
    let messages = r.body["messages"].as_array().unwrap();
    messages.iter().map(|m| (m["role"].as_str().unwrap().into(), m["content"].as_str().unwrap().into())).collect()
}

fn play(env: &mut Guarded, messages: &[String]) -> Vec<Observation> {
    messages.iter().map(|m| env.step(m)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_plays_the_user_with_its_goal_in_the_system_prompt_and_the_roles_flipped() {
    let server = TestChatServer::start().await.unwrap();
    let facts = rules(3).private_facts();
    let first = format!("Sure: I am {}, zip {}. The order is #{}.", facts[0], facts[1], facts[3]);
    server.push(Reply::Content(first.clone())).push(Reply::Content("Thank you!".into()));
    let model = model(&server);
    let mut env = played(3, &model);
    let opening = env.prompt().user.clone();
    let reference = env.reference();

    let says: Vec<usize> = (0..reference.len()).filter(|&i| !reference[i].starts_with('<')).collect();
    assert!(!says.is_empty(), "the reference talks to the user: {reference:?}");
    let observations = play(&mut env, &reference);
    let o = &observations[says[0]];
    assert_eq!((o.from, o.text.as_str()), (Source::User, first.as_str()), "the agent sees the model's reply");

    let requests = server.requests();
    assert_eq!(requests.len(), says.len(), "one request per message to the user, none for tool calls");
    let r = &requests[0];
    assert_eq!((r.path.as_str(), r.body["model"].as_str()), ("/v1/chat/completions", Some("user-sim-test")));
    let system = r.message("system").unwrap();
    for fact in &facts {
        assert!(system.contains(fact.as_str()), "the private fact {fact:?} is in the system prompt: {system}");
    }
    assert!(system.contains("You are the customer, never the agent") && system.contains(STOP), "{system}");
    let want = [
        ("system".to_string(), system.to_string()),
        ("user".into(), GREETING.into()),
        ("assistant".into(), opening.clone()),
        ("user".into(), reference[says[0]].clone()),
    ];
    assert_eq!(roles(r), want, "the agent's messages are the model's user turns, the user's its own");
    if let Some(&second) = says.get(1) {
        let flipped = roles(&requests[1]);
        assert_eq!(flipped[4..], [("assistant".into(), first.clone()), ("user".into(), reference[second].clone())]);
    }

    let end = observations.last().unwrap().end.as_ref().expect("the reference ends the episode");
    assert!(end.success && end.reward == 1.0, "the ground truth rewards the solved task: {end:?}");
    assert_eq!((model.replies(), model.fallbacks()), (says.len() as u64, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewards_come_from_the_ground_truth_whatever_the_model_says() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Content("Everything is perfect, you fixed it all!".into()));
    let model = model(&server);
    let mut env = played(5, &model);
    let o = env.step("Hello! Could you tell me what you need?");
    assert_eq!(o.from, Source::User);
    let end = env.step("<answer>done</answer>").end.unwrap();
    assert!(!end.success && end.reward == 0.0, "a pleased model does not make an unsolved task solved: {end:?}");

    let mut env = played(5, &model);
    server.set_default(Reply::Content("That is wrong, nothing worked.".into()));
    let end = play(&mut env, &rules(5).reference()).pop().unwrap().end.unwrap();
    assert!(end.success && end.reward == 1.0, "a displeased model does not unsolve a solved task: {end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_signal_ends_the_episode_rewarded_as_it_stands() {
    let server = TestChatServer::start().await.unwrap();
    server.push(Reply::Content(format!("Never mind, bye. {STOP}")));
    let model = model(&server);
    let mut env = played(7, &model);
    let o = env.step("How can I help?");
    let end = o.end.as_ref().expect("the stop signal ends the episode");
    assert!(!end.success && end.reward == 0.0, "{end:?}");
    assert!(o.text.starts_with("Never mind, bye.\n") && !o.text.contains(STOP), "{}", o.text);
    assert!(o.text.contains("the user ended the conversation"), "{}", o.text);
    assert!(env.is_over() && env.step("Are you still there?").flaw.is_some());
    assert_eq!(server.request_count(), 1, "nothing is asked after the end");

    // Solved before the user leaves: the ground truth still rewards it.
    let mut env = played(7, &model);
    let mut reference = rules(7).reference();
    let last = reference.pop().unwrap();
    assert_eq!(last, "<answer>done</answer>");
    server.set_default(Reply::Content("Okay.".into()));
    play(&mut env, &reference);
    server.push(Reply::Content(STOP.into()));
    let end = env.step("Is there anything else I can do for you?").end.unwrap();
    assert!(end.success && end.reward == 1.0, "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_ends_the_episode() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Content("Hmm, let me think.".into()));
    let model =
        UserModel::new(UserModelSettings { max_turns: 2, ..settings(&server, Duration::from_secs(5), 0) }).unwrap();
    let mut env = played(9, &model);
    assert!(env.step("What do you need?").end.is_none());
    assert!(env.step("<tool>get_user(user_id=\"nobody\")</tool>").end.is_none(), "tool calls are not user turns");
    assert!(env.step("Anything else?").end.is_none());
    let o = env.step("Hello?");
    let end = o.end.expect("the third message to the user ends the episode");
    assert!(end.summary.contains("the user's turn limit of 2 replies was reached") && !end.success, "{end:?}");
    assert_eq!(server.request_count(), 2, "the model was asked twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_and_a_timeout_are_retried_then_fail_with_a_clear_error() {
    let server = TestChatServer::start().await.unwrap();
    let timeout = Duration::from_millis(300);
    let model = UserModel::new(settings(&server, timeout, 2)).unwrap();
    server.push(Reply::Status(503, "overloaded".into())).push(Reply::Hang).push(Reply::Content("My order.".into()));
    let mut env = played(11, &model);
    let o = env.step("Which order is it?");
    assert_eq!((o.from, o.text.as_str()), (Source::User, "My order."), "the third attempt answers");
    assert_eq!((server.request_count(), model.fallbacks()), (3, 0));

    server.push(Reply::Status(502, "bad gateway".into())).push(Reply::Status(500, "oops".into())).push(Reply::Hang);
    let mut conversation = env_workers::user_model::Conversation::new("a customer", "Hello.");
    conversation.agent_said("Which order?");
    let err = model.reply(&conversation).unwrap_err();
    assert!(matches!(err, UserModelError::Exhausted { attempts: 3, .. }), "{err:?}");
    let text = err.to_string();
    let endpoint = server.addr().to_string();
    assert_eq!(
        text,
        format!("simulated user model: no usable reply after 3 attempts; last: endpoint {endpoint}: no response within 300 ms")
    );
    assert_eq!(err.kind(), "timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_answered_by_the_rule_based_user_and_counted() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Status(503, "down".into()));
    let model = UserModel::new(settings(&server, Duration::from_secs(5), 1)).unwrap();
    let mut env = played(13, &model);
    let facts = rules(13).private_facts();
    let o = env.step("Could you tell me your zip code?");
    assert_eq!(o.from, Source::User);
    assert!(o.text.contains(facts[1].as_str()), "the rule-based user answers the turn: {}", o.text);
    assert_eq!((model.fallbacks(), model.replies(), server.request_count()), (1, 0, 2));

    server.set_default(Reply::Content("Thanks.".into()));
    assert_eq!(env.step("Got it, one moment please.").text, "Thanks.");
    let flipped = roles(server.requests().last().unwrap());
    let fallback = ("assistant".to_string(), o.text.clone());
    assert_eq!(flipped[flipped.len() - 2], fallback, "the fallback reply stays in the model's view");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_slow_replies_are_retried() {
    let server = TestChatServer::start().await.unwrap();
    let model = UserModel::new(settings(&server, Duration::from_millis(400), 4)).unwrap();
    server
        .push(Reply::NotJson)
        .push(Reply::Cut("I want to can".into()))
        .push(Reply::Content("   ".into()))
        .push(Reply::after(Duration::from_secs(3), Reply::Content("too late".into())))
        .push(Reply::Content("I want to cancel.".into()));
    let mut env = played(17, &model);
    let o = env.step("What can I do for you?");
    assert_eq!(o.text, "I want to cancel.");
    assert_eq!((server.request_count(), model.fallbacks()), (5, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_shown() {
    let server = TestChatServer::start().await.unwrap();
    server.set_default(Reply::Content("Hi.".into()));
    let mut s = settings(&server, Duration::from_secs(5), 0);
    s.chat.api_key = Some("sk-user-test".into());
    let shown = format!("{s:?}");
    assert!(!shown.contains("sk-user-test") && shown.contains("<set>"), "{shown}");
    let model = UserModel::new(s).unwrap();
    played(19, &model).step("Hello?");
    assert_eq!(server.requests()[0].authorization.as_deref(), Some("Bearer sk-user-test"));
    assert!(!format!("{model:?}").contains("sk-user-test"));
}

fn text(reply: StepReply) -> Observation {
    match reply {
        StepReply::Text(o) => o,
        StepReply::Control(c) => panic!("a text task answered a control step: {c:?}"),
    }
}

/// `[user_model]` as a job's configuration gives it, pointing at `server`.
fn configured(server: &TestChatServer) -> Option<Arc<UserModel>> {
    let toml = format!(
        "[user_model]\nplayer = \"openai\"\n[user_model.openai]\nendpoints = \"{}\"\nmodel = \"user-sim\"\ntimeout_ms = 5000\n",
        server.url()
    );
    UserModel::from_config(&ReagentConfig::from_toml_str(&toml).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_worker_serves_model_played_users_and_a_slow_user_stalls_only_its_own_session() {
    let server = TestChatServer::start().await.unwrap();
    assert!(UserModel::from_config(&ReagentConfig::from_toml_str("").unwrap()).unwrap().is_none(), "rules by default");
    let model = configured(&server).expect("player = \"openai\" gives a model");
    let table = Arc::new(SessionTable::new(TableConfig::default()).with_user_model(Some(model.clone())));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let served = tokio::spawn(serve(listener, table.clone(), ServeOptions::default(), stop.clone()));
    let client = EnvClient::connect(addr, Duration::from_secs(30), None).await.unwrap();

    let (a, b) = (client.open(spec(21)).await.unwrap().session, client.open(spec(22)).await.unwrap().session);
    server.push(Reply::after(Duration::from_secs(2), Reply::Content("Let me look... it's the blue one.".into())));
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.step(a, EnvAction::Text("Which item is it?".into())).await })
    };
    wait_until("the slow user's request reaches the model", Duration::from_secs(10), || async {
        server.request_count() == 1
    })
    .await;
    let quick = tokio::time::timeout(
        Duration::from_secs(1),
        client.step(b, EnvAction::Text("<tool>get_user(user_id=\"nobody\")</tool>".into())),
    )
    .await
    .expect("another session steps while one waits on its user");
    assert_eq!(text(quick.unwrap()).from, Source::Tool);
    assert_eq!(table.expire_idle(), 0, "the reaper passes over the busy session without waiting for it");
    assert!(!slow.is_finished(), "the slow user is still thinking");

    let o = text(slow.await.unwrap().unwrap());
    assert_eq!((o.from, o.text.as_str()), (Source::User, "Let me look... it's the blue one."));
    assert_eq!(model.replies(), 1);
    stop.cancel();
    drop(client);
    served.await.unwrap().unwrap();
}
