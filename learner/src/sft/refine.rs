//! Refinement examples for the cold start (Reagent-C/U need them): a reference episode perturbed
//! the ways agents fail, replayed through the environment, judged by the reference judge, and
//! turned into one training sequence — the refined attempt's start in the layout
//! `rollout.refine_from` names (`episode::refined_start`) followed by the correct solution,
//! trained on the solution's agent tokens only. `start`: the prompt holds the whole flawed
//! attempt and the critique, the whole reference solution is trained. `first_flaw`: the prompt
//! holds the critique, the flawed attempt's messages before the first flagged one are replayed
//! (not trained; never more than it shares with the reference), and the reference solution from
//! there on is trained. Some first attempts are left flawless, so that a clean critique teaches
//! "keep it as it was", not "always change something".
//!
//! ```text
//!  reference messages ─ Flaw::apply (seeded) ─► flawed messages ─ scripted_episode ─► first attempt
//!        │                                                 └─ judge_messages ─► critique
//!        └─ scripted_episode(refined_start(task, first attempt, critique), the rest of the
//!                            reference) ─► flatten ─► Sequence
//! ```
//!
//! The perturbations are text edits that work for every family: a changed digit in a tool call
//! (wrong operand or argument), a dropped step, an answer given at once with a changed digit
//! (guessed or fabricated), no final answer (stopped early), an unclosed action tag (format
//! error), and a tool call renamed to another tool of the episode (wrong tool).

use env_workers::{judge, registry, Environment, Limits};
use episode::{refined_start, scripted_episode, EpisodeError, EpisodeTask, RefineFrom, RolloutConfig, TrajectoryMeta};
use policy::Tokenizer;
use protocol::wire::{Attempt, GroupId, TaskSpec};

use crate::error::Result;
use crate::rng::SampleRng;
use crate::tensors::{flatten, Sequence};

/// The ways a first attempt is made to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Left as the reference solution.
    None,
    /// One digit of a tool call changed.
    WrongValue,
    /// A step before the answer left out.
    SkippedStep,
    /// The answer given at once, with a digit changed.
    GuessedAnswer,
    /// Stopped before the final answer.
    NoAnswer,
    /// One action tag left unclosed.
    FormatError,
    /// A tool call made with another tool's name.
    WrongTool,
}

impl Flaw {
    /// Every flaw, the flawless case first.
    pub const ALL: [Flaw; 7] = [
        Flaw::None,
        Flaw::WrongValue,
        Flaw::SkippedStep,
        Flaw::GuessedAnswer,
        Flaw::NoAnswer,
        Flaw::FormatError,
        Flaw::WrongTool,
    ];

    /// `reference` with this flaw, choosing where with `rng`; `None` when the episode has no
    /// place for it (no tool call to change, a single message to drop, …).
    pub fn apply(self, reference: &[String], rng: &mut SampleRng) -> Option<Vec<String>> {
        let n = reference.len();
        let calls: Vec<usize> = (0..n.saturating_sub(1)).filter(|&i| reference[i].contains("<tool>")).collect();
        let pick = |v: &[usize], rng: &mut SampleRng| (!v.is_empty()).then(|| v[rng.below(v.len())]);
        let mut out = reference.to_vec();
        match self {
            Flaw::None => {}
            Flaw::WrongValue => {
                let with_digit: Vec<usize> =
                    calls.iter().copied().filter(|&i| reference[i].contains(|c: char| c.is_ascii_digit())).collect();
                let i = pick(&with_digit, rng)?;
                out[i] = bump_last_digit(&out[i]);
            }
            Flaw::SkippedStep => {
                let i = pick(&(0..n.saturating_sub(1)).collect::<Vec<_>>(), rng)?;
                out.remove(i);
            }
            Flaw::GuessedAnswer => {
                let last = reference.last()?;
                if n < 2 || !last.contains(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                out = vec![bump_last_digit(last)];
            }
            Flaw::NoAnswer => {
                if n < 2 {
                    return None;
                }
                out.pop();
            }
            Flaw::FormatError => {
                let i = pick(&calls, rng)?;
                out[i] = out[i].replacen("</tool>", "", 1);
            }
            Flaw::WrongTool => {
                let names: Vec<String> = calls.iter().filter_map(|&i| tool_name(&reference[i])).collect();
                let i = pick(&calls, rng)?;
                let own = tool_name(&reference[i])?;
                let other = names.iter().find(|m| **m != own)?;
                out[i] = out[i].replacen(&format!("<tool>{own}("), &format!("<tool>{other}("), 1);
            }
        }
        Some(out)
    }
}

/// `text` with its last ASCII digit increased by one (9 → 0).
fn bump_last_digit(text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    if let Some(d) = chars.iter_mut().rev().find(|c| c.is_ascii_digit()) {
        *d = char::from(b'0' + ((*d as u8 - b'0' + 1) % 10));
    }
    chars.into_iter().collect()
}

/// The name of the tool called in `message` (`<tool>name(…)`).
fn tool_name(message: &str) -> Option<String> {
    let start = message.find("<tool>")? + "<tool>".len();
    let rest = &message[start..];
    Some(rest[..rest.find('(')?].trim().to_string())
}

/// One refinement example for `spec` with `flaw` (see the module header), or `None` when the flaw
/// has no place in this task's reference solution. `max_prompt_tokens` bounds the refined
/// prompt as the actors bound it.
pub fn refinement_example(
    spec: TaskSpec,
    flaw: Flaw,
    rng: &mut SampleRng,
    tokenizer: &dyn Tokenizer,
    rollout: &RolloutConfig,
    meta: &TrajectoryMeta,
    max_prompt_tokens: usize,
) -> Result<Option<Sequence>> {
    let env = registry::make(spec, Limits { max_turns: usize::MAX, ..rollout.limits }).map_err(EpisodeError::from)?;
    let reference = env.reference();
    let Some(flawed) = flaw.apply(&reference, rng) else { return Ok(None) };
    let initial = EpisodeTask::initial(spec, GroupId(0));
    let first = scripted_episode(initial, None, Some(&flawed), tokenizer, rollout, meta)?;
    let critique = judge::judge_messages(spec, &first.agent_messages, false).map_err(EpisodeError::from)?.critique;
    let from = rollout.refine_from;
    let mut start = refined_start(env.prompt(), &first.trajectory, &critique, from, tokenizer, max_prompt_tokens)?;
    let shared = reference.iter().zip(&first.agent_messages).take_while(|(a, b)| a == b).count();
    start.kept.truncate(shared);
    let rest = match from {
        RefineFrom::Start => &reference[..],
        RefineFrom::FirstFlaw => &reference[start.kept.len()..],
    };
    let refined = EpisodeTask { attempt: Attempt::Refined { of: first.trajectory.id }, ..initial };
    let second = scripted_episode(refined, Some(&start), Some(rest), tokenizer, rollout, meta)?;
    Ok(Some(flatten(&second.trajectory)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::ByteTokenizer;
    use protocol::wire::{ActorId, PolicyVersion, RunId, TaskFamily};

    fn reference() -> Vec<String> {
        vec!["<tool>calc(12 * 3)</tool>".into(), "<tool>lookup(7)</tool>".into(), "<answer>36</answer>".into()]
    }

    #[test]
    fn each_flaw_edits_the_reference_as_named() {
        let mut rng = SampleRng::new(3);
        let r = reference();
        assert_eq!(Flaw::None.apply(&r, &mut rng).unwrap(), r);
        let w = Flaw::WrongValue.apply(&r, &mut rng).unwrap();
        assert!(
            w == ["<tool>calc(12 * 4)</tool>", &r[1], &r[2]] || w == [&r[0], "<tool>lookup(8)</tool>", &r[2]],
            "{w:?}"
        );
        let s = Flaw::SkippedStep.apply(&r, &mut rng).unwrap();
        assert!(s.len() == 2 && s.last() == r.last(), "{s:?}");
        assert_eq!(Flaw::GuessedAnswer.apply(&r, &mut rng).unwrap(), ["<answer>37</answer>"]);
        assert_eq!(Flaw::NoAnswer.apply(&r, &mut rng).unwrap(), &r[..2]);
        let f = Flaw::FormatError.apply(&r, &mut rng).unwrap();
        assert_eq!(f.iter().filter(|m| m.contains("<tool>") && !m.contains("</tool>")).count(), 1, "{f:?}");
        let t = Flaw::WrongTool.apply(&r, &mut rng).unwrap();
        assert!(t[0] == "<tool>lookup(12 * 3)</tool>" || t[1] == "<tool>calc(7)</tool>", "{t:?}");
        // No place for it: a single answer has no step to drop and no tool to rename.
        let one = vec!["<answer>x</answer>".to_string()];
        for flaw in [Flaw::WrongValue, Flaw::SkippedStep, Flaw::GuessedAnswer, Flaw::NoAnswer, Flaw::WrongTool] {
            assert!(flaw.apply(&one, &mut rng).is_none(), "{flaw:?}");
        }
    }

    #[test]
    fn an_example_trains_the_reference_solution_under_the_critique_of_the_flawed_attempt() {
        let tok = ByteTokenizer;
        let rollout = RolloutConfig {
            system_prompt: episode::SystemPrompt::Omit,
            refine_from: RefineFrom::Start,
            ..RolloutConfig::default()
        };
        let meta = TrajectoryMeta {
            run_id: RunId::new("t").unwrap(),
            actor_id: ActorId("a".into()),
            policy_version: PolicyVersion(0),
        };
        let spec = TaskSpec { family: TaskFamily::Math, seed: 4, difficulty: 2 };
        let reference = registry::make(spec, Limits::default()).unwrap().reference();
        let mut rng = SampleRng::new(1);
        let seq = refinement_example(spec, Flaw::SkippedStep, &mut rng, &tok, &rollout, &meta, 4096).unwrap().unwrap();
        let text = tok.decode(&seq.ids, false);
        assert!(
            text.contains("Your previous attempt:") && text.contains("Critique of the previous attempt:"),
            "{text}"
        );
        assert!(text.contains("your first message: "), "{text}");
        assert!(text.contains("In your"), "the critique points at a numbered message: {text}");
        let trained: Vec<u32> = seq.ids.iter().zip(&seq.loss_mask).filter(|(_, m)| **m).map(|(i, _)| *i).collect();
        let want: String =
            reference.iter().map(|m| format!("{m}{}", tok.decode(&tok.chat_template().end_of_turn, false))).collect();
        assert_eq!(tok.decode(&trained, false), want, "exactly the reference solution is trained on");
    }

    #[test]
    fn a_first_flaw_example_replays_the_shared_prefix_and_trains_the_rest_of_the_reference() {
        let tok = ByteTokenizer;
        let rollout = RolloutConfig { system_prompt: episode::SystemPrompt::Omit, ..RolloutConfig::default() };
        assert_eq!(rollout.refine_from, RefineFrom::FirstFlaw, "the default layout");
        let meta = TrajectoryMeta {
            run_id: RunId::new("t").unwrap(),
            actor_id: ActorId("a".into()),
            policy_version: PolicyVersion(0),
        };
        let eot = tok.decode(&tok.chat_template().end_of_turn, false);
        let mut kept_some = false;
        for seed in 0..12 {
            let spec = TaskSpec { family: TaskFamily::Math, seed, difficulty: 3 };
            let reference = registry::make(spec, Limits::default()).unwrap().reference();
            let mut rng = SampleRng::new(seed);
            let Some(flawed) = Flaw::WrongValue.apply(&reference, &mut SampleRng::new(seed)) else { continue };
            let changed = reference.iter().zip(&flawed).position(|(a, b)| a != b).unwrap();
            let seq =
                refinement_example(spec, Flaw::WrongValue, &mut rng, &tok, &rollout, &meta, 4096).unwrap().unwrap();
            let text = tok.decode(&seq.ids, false);
            assert!(text.contains(episode::REFINE_FROM_FLAW_INSTRUCTION), "{text}");
            assert!(!text.contains("Your previous attempt:"), "no transcript in the prompt: {text}");
            let trained: Vec<u32> = seq.ids.iter().zip(&seq.loss_mask).filter(|(_, m)| **m).map(|(i, _)| *i).collect();
            let want: String = reference[changed..].iter().map(|m| format!("{m}{eot}")).collect();
            assert_eq!(
                tok.decode(&trained, false),
                want,
                "the reference from the changed message on is trained (seed {seed}): {text}"
            );
            for m in &reference[..changed] {
                assert!(text.contains(m.as_str()), "the kept message {m:?} is replayed: {text}");
            }
            kept_some |= changed > 0;
        }
        assert!(kept_some, "some example kept a prefix");
    }
}
