//! Held-out evaluation of the committed SFT fixture (the `micro` model after a cold start on
//! difficulty-1 `math`, which solves about half of the tasks): the sampled evaluation plays each
//! task as often as asked, is reproducible from its seed, draws differently from another seed,
//! and at temperature 0 is the greedy evaluation.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use episode::{evaluate_greedy, evaluate_sampled, held_out_specs, PolicyRef, RolloutConfig};
use policy::{ByteTokenizer, LoadedModel};
use protocol::wire::TaskFamily;
use tch::Device;

const SFT_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/micro-math-sft");

fn fixture() -> LoadedModel {
    LoadedModel::from_dir(std::path::Path::new(SFT_FIXTURE), Device::Cpu, false).unwrap()
}

fn sampled_rollout(temperature: f64) -> RolloutConfig {
    RolloutConfig { temperature, ..learner::sft::compact_rollout() }
}

#[test]
fn sampled_evaluation_repeats_tasks_reproducibly_and_is_greedy_at_temperature_zero() {
    let m = fixture();
    let policy = PolicyRef { model: &m.model, tokenizer: &ByteTokenizer };
    let specs = held_out_specs(TaskFamily::Math, 1, 12);

    let greedy = evaluate_greedy(policy, &specs, &learner::sft::compact_rollout()).unwrap();
    let cold = evaluate_sampled(policy, &specs, 1, &sampled_rollout(0.0), 99).unwrap();
    assert_eq!(greedy.episodes, 12);
    assert_eq!(
        (cold.successes, cold.answered, cold.agent_tokens),
        (greedy.successes, greedy.answered, greedy.agent_tokens),
        "at temperature 0 the sampled evaluation plays the greedy episodes"
    );
    assert!(greedy.successes > 0, "the fixture solves some of the tasks: {greedy:?}");
    assert_eq!(greedy.per_task.len(), 12, "one entry per task");
    assert!(greedy.per_task.iter().all(|&x| x == 0.0 || x == 1.0), "played once: {:?}", greedy.per_task);
    assert_eq!(greedy.per_task.iter().sum::<f64>(), greedy.successes as f64);
    assert_eq!(cold.per_task, greedy.per_task, "task by task, in the specs' order");

    let hot = sampled_rollout(1.0);
    let a = evaluate_sampled(policy, &specs, 3, &hot, 5).unwrap();
    let again = evaluate_sampled(policy, &specs, 3, &hot, 5).unwrap();
    let other = evaluate_sampled(policy, &specs, 3, &hot, 6).unwrap();
    assert_eq!(a.episodes, 36, "three episodes per task");
    assert_eq!(a.success_rate, a.successes as f64 / 36.0);
    assert_eq!(a.per_task.len(), 12, "one entry per task, not per episode");
    assert!(a.per_task.iter().all(|&x| [0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0].iter().any(|&k| (x - k).abs() < 1e-12)));
    assert!((a.per_task.iter().sum::<f64>() * 3.0 - a.successes as f64).abs() < 1e-9, "{:?}", a.per_task);
    assert_eq!(
        (a.successes, a.answered, a.agent_tokens),
        (again.successes, again.answered, again.agent_tokens),
        "the same seed draws the same episodes"
    );
    assert_ne!(a.agent_tokens, other.agent_tokens, "another seed draws other episodes");
}
