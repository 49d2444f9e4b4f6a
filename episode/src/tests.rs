//! Episodes as trajectories: the reference replay, batched sampling, and the agreement of
//! generation's behaviour log-probs with the training layout.

use env_workers::Limits;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
use protocol::wire::{ActorId, Episode, GroupId, PolicyVersion, Role, RunId, TaskFamily, TaskSpec, Validate};
use tch::Device;

use super::Episode as Driver;
use super::*;

fn meta() -> TrajectoryMeta {
    TrajectoryMeta { run_id: RunId::new("t").unwrap(), actor_id: ActorId("a".into()), policy_version: PolicyVersion(3) }
}

fn math(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Math, seed, difficulty }
}

fn compact() -> RolloutConfig {
    RolloutConfig {
        system_prompt: SystemPrompt::Omit,
        max_new_tokens: 12,
        limits: Limits { max_turns: 3, max_message_chars: 4096 },
        ..RolloutConfig::default()
    }
}

#[test]
fn the_reference_replay_is_a_valid_solved_trajectory_trained_on_agent_tokens_only() {
    let tok = ByteTokenizer;
    let full = reference_episode(math(5, 2), &tok, &RolloutConfig::default(), &meta()).unwrap();
    let r = reference_episode(math(5, 2), &tok, &compact(), &meta()).unwrap();
    assert!(r.outcome.success && r.trajectory.outcome_reward == 1.0, "{:?}", r.outcome);
    r.trajectory.validate().unwrap();
    let Episode::Text(turns) = &r.trajectory.episode else { panic!("a text episode") };
    assert_eq!(turns[0].role, Role::User, "the compact prompt has no system turn");
    assert_eq!(turns[0].token_ids[0], ByteTokenizer::BOS, "the template's start opens the first turn");
    let Episode::Text(full_turns) = &full.trajectory.episode else { panic!("a text episode") };
    assert_eq!(full_turns[0].role, Role::System);
    let agent: Vec<&str> = turns.iter().filter(|t| t.role == Role::Agent).map(|t| t.text.as_str()).collect();
    assert_eq!(agent, r.agent_messages.iter().map(String::as_str).collect::<Vec<_>>());
    let ids: Vec<u32> = turns.iter().flat_map(|t| t.token_ids.iter().copied()).collect();
    let trained: Vec<u32> =
        turns.iter().flat_map(|t| t.token_ids.iter().zip(&t.loss_mask).filter(|(_, m)| **m).map(|(i, _)| *i)).collect();
    let mut want = Vec::new();
    for m in &r.agent_messages {
        want.extend(ByteTokenizer::encode_str(m));
        want.push(ByteTokenizer::END);
    }
    assert_eq!(trained, want, "exactly the agent's text and end-of-turn markers are trained on");
    assert_eq!(tok.decode(&ids, false).matches("<|tool|>").count(), r.agent_messages.len() - 1);
}

#[test]
fn greedy_evaluation_of_an_untrained_model_solves_nothing() {
    let m = policy::seed::seeded(12, || LoadedModel::fresh(&ModelConfig::tiny(), Device::Cpu, false)).unwrap();
    let specs = held_out_specs(TaskFamily::Math, 1, 4);
    assert!(specs.iter().all(|s| s.seed >= HELD_OUT_SEED_BASE));
    let report = evaluate_greedy(PolicyRef { model: &m.model, tokenizer: &ByteTokenizer }, &specs, &compact()).unwrap();
    assert_eq!((report.episodes, report.successes, report.success_rate), (4, 0, 0.0));
    assert_eq!(report.mean_turns, 3.0);
}

#[test]
fn an_episode_driven_step_by_step_matches_the_lockstep_reference_replay() {
    let tok = ByteTokenizer;
    let spec = math(7, 1);
    let replay = reference_episode(spec, &tok, &compact(), &meta()).unwrap();
    use env_workers::Environment;
    let mut env = env_workers::registry::make(spec, Limits { max_turns: usize::MAX, ..compact().limits }).unwrap();
    let prompt = env.prompt().clone();
    let mut ep = Driver::start(EpisodeTask::initial(spec, GroupId(0)), &prompt, &tok, &compact()).unwrap();
    let eot = tok.chat_template().end_of_turn;
    for message in env.reference() {
        assert!(!ep.is_over() && ep.ensure_room(12, 4096));
        let mut ids = tok.encode(&message).unwrap();
        ids.extend_from_slice(&eot);
        let sent = ep.push_agent(&ids, &vec![0.0; ids.len()]);
        assert_eq!(sent, message, "the decoded message is what the environment gets");
        ep.apply_observation(env.step(&sent)).unwrap();
    }
    assert!(ep.is_over());
    let driven = ep.finish(&meta());
    let (Episode::Text(a), Episode::Text(b)) = (&driven.trajectory.episode, &replay.trajectory.episode) else {
        panic!("text episodes")
    };
    assert_eq!(a, b, "same turns, ids, masks and log-probs");
    assert_eq!((driven.outcome, driven.agent_messages), (replay.outcome, replay.agent_messages));
}

#[test]
fn an_episode_without_room_for_the_next_message_ends_unsolved() {
    let tok = ByteTokenizer;
    let prompt = protocol::wire::Prompt { system: "s".into(), user: "u".repeat(50) };
    let mut ep = Driver::start(EpisodeTask::initial(math(1, 1), GroupId(0)), &prompt, &tok, &compact()).unwrap();
    let need = ep.prompt_ids().len() + 12;
    assert!(ep.ensure_room(12, need) && !ep.is_over());
    assert!(!ep.ensure_room(12, need - 1) && ep.is_over());
    let r = ep.finish(&meta());
    assert_eq!(r.trajectory.outcome_reward, 0.0);
    assert!(r.outcome.summary.contains("context limit"), "{}", r.outcome.summary);
}

#[test]
fn a_refined_prompt_holds_task_first_attempt_and_critique_and_drops_oldest_messages_over_budget() {
    let tok = ByteTokenizer;
    let first = reference_episode(math(5, 2), &tok, &RolloutConfig::default(), &meta()).unwrap();
    use env_workers::Environment;
    let prompt = env_workers::registry::make(math(5, 2), Limits::default()).unwrap().prompt().clone();
    let critique = "Check the second step before answering.";
    let full = refined_prompt(&prompt, &first.trajectory, critique, &tok, usize::MAX).unwrap();
    assert_eq!(full.system, prompt.system);
    assert!(full.user.starts_with(&prompt.user), "the task comes first");
    assert!(full.user.contains(critique) && full.user.ends_with(REFINE_INSTRUCTION));
    for (i, m) in first.agent_messages.iter().enumerate() {
        let line = format!("{}: {m}", agent_label(i + 1));
        assert!(full.user.contains(&line), "{line} missing from {}", full.user);
    }
    assert!(full.user.contains("your first message: ") && full.user.contains("your second message: "));
    assert!(!full.user.contains("left out"));
    let budget = tok.encode(&full.user).unwrap().len() - 20;
    let cut = refined_prompt(&prompt, &first.trajectory, critique, &tok, budget).unwrap();
    assert!(tok.encode(&cut.user).unwrap().len() <= budget, "fits the budget");
    assert!(cut.user.contains("earlier messages left out") && cut.user.contains(critique));
    let n = first.agent_messages.len();
    let newest = format!("{}: {}", agent_label(n), first.agent_messages[n - 1]);
    assert!(cut.user.contains(&newest), "the newest stay, with their own numbers: {}", cut.user);
    assert!(!cut.user.contains("your first message: "), "the oldest went: {}", cut.user);
    let tiny = refined_prompt(&prompt, &first.trajectory, critique, &tok, 1).unwrap();
    assert!(tiny.user.starts_with(&prompt.user) && tiny.user.contains(critique), "task and critique always stay");
}

#[test]
fn refined_attempts_are_played_from_the_critique_of_their_first_attempt() {
    let m = policy::seed::seeded(13, || LoadedModel::fresh(&ModelConfig::tiny(), Device::Cpu, false)).unwrap();
    let tok = ByteTokenizer;
    let policy = PolicyRef { model: &m.model, tokenizer: &tok };
    let cfg = compact();
    let tasks: Vec<EpisodeTask> = (0..3).map(|s| EpisodeTask::initial(math(s, 1), GroupId(u128::from(s)))).collect();
    let mut sampler = policy::Sampler::new(5);
    let firsts = tch::no_grad(|| run_episodes(policy, &tasks, &cfg, &meta(), &mut sampler)).unwrap();
    let critiques: Vec<String> = firsts.iter().map(|r| critique_of(r, false).unwrap()).collect();
    assert!(critiques.iter().all(|c| !c.contains("solve")), "the outcome stays hidden: {critiques:?}");
    let refs: Vec<&EpisodeResult> = firsts.iter().collect();
    let start = RolloutConfig { refine_from: RefineFrom::Start, ..cfg.clone() };
    let refined = tch::no_grad(|| play_refinements(policy, &refs, &critiques, &start, &meta(), &mut sampler)).unwrap();
    for ((first, second), critique) in firsts.iter().zip(&refined).zip(&critiques) {
        assert_eq!(second.trajectory.attempt, protocol::wire::Attempt::Refined { of: first.trajectory.id });
        assert_eq!(second.trajectory.group_id, first.trajectory.group_id, "a refined attempt keeps its group");
        second.trajectory.validate().unwrap();
        let Episode::Text(turns) = &second.trajectory.episode else { panic!("a text episode") };
        let user = &turns[0].text;
        assert!(user.contains("Your previous attempt:") && user.contains(critique.trim()), "{user}");
    }
    // first_flaw: the critique in the prompt, the first attempt's messages before the flagged
    // one replayed untrained, the policy's own messages after them.
    let refined = tch::no_grad(|| play_refinements(policy, &refs, &critiques, &cfg, &meta(), &mut sampler)).unwrap();
    for ((first, second), critique) in firsts.iter().zip(&refined).zip(&critiques) {
        second.trajectory.validate().unwrap();
        let Episode::Text(turns) = &second.trajectory.episode else { panic!("a text episode") };
        assert!(turns[0].text.contains(critique.trim()) && turns[0].text.ends_with(REFINE_FROM_FLAW_INSTRUCTION));
        let agents: Vec<&protocol::wire::Turn> = turns.iter().filter(|t| t.role == Role::Agent).collect();
        let kept = kept_count(critique, first.agent_messages.len());
        assert!(agents.len() > kept, "the policy wrote after the kept messages ({critique})");
        for (i, turn) in agents.iter().enumerate() {
            assert_eq!(turn.loss_mask.iter().any(|m| *m), i >= kept, "message {i} of {kept} kept ({critique})");
            if i < kept {
                assert_eq!(turn.text, first.agent_messages[i], "a kept message is replayed as it was");
            }
        }
    }
    // The held-out check on the same untrained model: nothing solved either way.
    let report = evaluate_refinement(policy, &held_out_specs(TaskFamily::Math, 1, 2), 2, &cfg, 3, false).unwrap();
    assert_eq!((report.episodes, report.initial_success, report.refined_success), (4, 0.0, 0.0));
}

#[test]
fn the_flagged_message_is_the_earliest_one_a_critique_names() {
    assert_eq!(flagged_message("In your third message, the operand is wrong."), Some(3));
    assert_eq!(flagged_message("In your fifth message, x. In your second message, y."), Some(2));
    assert_eq!(flagged_message("In your twenty-first message, x."), Some(21));
    assert_eq!(flagged_message("The 4th message repeats a call; message #2 guesses."), Some(2));
    assert_eq!(flagged_message("See message 7."), Some(7));
    assert_eq!(flagged_message("No flaw found. Keep working the same way."), None);
    assert_eq!(flagged_message("At the end of the episode, no answer. Messages were fine."), None);
    assert_eq!(flagged_message("message 0 and the zeroth message"), None, "numbers start at 1");
    // Every ordinal the reference judge writes reads back.
    for n in 1..100 {
        let text = format!("In your {} message, something.", env_workers::judge::ordinal(n));
        assert_eq!(flagged_message(&text), Some(n), "{text}");
    }
    assert_eq!(kept_count("In your third message, x.", 5), 2);
    assert_eq!(kept_count("In your ninth message, x.", 5), 4, "never past the last message");
    assert_eq!(kept_count("No flaw found.", 5), 4, "all but the final message");
    assert_eq!(kept_count("No flaw found.", 0), 0);
}

#[test]
fn a_first_flaw_start_keeps_the_messages_before_the_flagged_one() {
    let tok = ByteTokenizer;
    let first = reference_episode(math(5, 3), &tok, &compact(), &meta()).unwrap();
    let prompt = protocol::wire::Prompt { system: "s".into(), user: "the task".into() };
    let n = first.agent_messages.len();
    assert!(n >= 3, "a difficulty-3 solution has several messages: {:?}", first.agent_messages);
    let start = refined_start(&prompt, &first.trajectory, "In your second message, x.", RefineFrom::FirstFlaw, &tok, 1)
        .unwrap();
    assert_eq!(start.kept, first.agent_messages[..1]);
    assert!(start.prompt.user.starts_with("the task") && start.prompt.user.contains("In your second message, x."));
    assert!(!start.prompt.user.contains("Your previous attempt:"));
    let replay = scripted_episode(
        EpisodeTask::initial(math(5, 3), GroupId(0)),
        Some(&start),
        Some(&first.agent_messages[1..]),
        &tok,
        &compact(),
        &meta(),
    )
    .unwrap();
    assert!(replay.outcome.success, "the kept message and the rest solve it again: {:?}", replay.outcome);
    assert_eq!(replay.agent_messages, first.agent_messages);
    let Episode::Text(turns) = &replay.trajectory.episode else { panic!("a text episode") };
    let trained: Vec<bool> =
        turns.iter().filter(|t| t.role == Role::Agent).map(|t| t.loss_mask.iter().any(|m| *m)).collect();
    assert!(!trained[0], "the kept message is not trained");
    assert!(trained[1..].iter().all(|t| *t), "the rest is");
}

#[test]
fn with_refine_failed_only_the_unsolved_first_attempts_are_refined() {
    let m = policy::seed::seeded(13, || LoadedModel::fresh(&ModelConfig::tiny(), Device::Cpu, false)).unwrap();
    let tok = ByteTokenizer;
    let policy = PolicyRef { model: &m.model, tokenizer: &tok };
    let cfg = compact();
    let solved = reference_episode(math(1, 1), &tok, &cfg, &meta()).unwrap();
    let task = EpisodeTask::initial(math(2, 1), GroupId(2));
    let mut sampler = policy::Sampler::new(5);
    let failed = tch::no_grad(|| run_episodes(policy, &[task], &cfg, &meta(), &mut sampler)).unwrap().remove(0);
    assert!(solved.outcome.success && !failed.outcome.success);
    let firsts = [&solved, &failed];
    let critiques: Vec<String> = firsts.iter().map(|r| critique_of(r, false).unwrap()).collect();
    let only_failed = RolloutConfig { refine: RefineWhich::Failed, ..cfg.clone() };
    let refined =
        tch::no_grad(|| play_refinements(policy, &firsts, &critiques, &only_failed, &meta(), &mut sampler)).unwrap();
    let parents: Vec<_> = refined.iter().map(|r| r.trajectory.attempt).collect();
    assert_eq!(parents, [protocol::wire::Attempt::Refined { of: failed.trajectory.id }]);
    let every = tch::no_grad(|| play_refinements(policy, &firsts, &critiques, &cfg, &meta(), &mut sampler)).unwrap();
    assert_eq!(every.len(), 2, "the default refines every first attempt");
}
