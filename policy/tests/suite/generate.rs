//! Generation: KV-cache decoding against full recomputation, log-probs against the learner's
//! recomputation, sampling controls, stopping, and reproducibility.

use policy::{Generation, LoadedModel, Sampler, SamplingParams, StopReason};
use tch::{Kind, Tensor};

use crate::common::{fixture_model, max_abs_diff};

const PROMPTS: [&[u32]; 3] = [&[17, 250, 3], &[5, 9, 120, 33, 7, 299, 64], &[42, 42, 8, 200, 11]];

fn prompts() -> Vec<Vec<u32>> {
    PROMPTS.iter().map(|p| p.to_vec()).collect()
}

fn row(ids: &[u32]) -> Tensor {
    Tensor::from_slice(&ids.iter().map(|&i| i64::from(i)).collect::<Vec<_>>()).unsqueeze(0)
}

fn params(temperature: f64, top_p: f64, n: usize) -> SamplingParams {
    SamplingParams { temperature, top_p, max_new_tokens: n, ..SamplingParams::default() }
}

/// Checks each row's log-probs against `token_logprobs` over prompt + generation.
fn check_logprobs(m: &LoadedModel, gens: &[Generation], temperature: f64) {
    for (prompt, g) in PROMPTS.iter().zip(gens) {
        let full: Vec<u32> = prompt.iter().chain(&g.tokens).copied().collect();
        let lp = m.model.token_logprobs(&row(&full), None, temperature).unwrap();
        let tail = lp.get(0).narrow(0, prompt.len() as i64 - 1, g.tokens.len() as i64);
        let diff = max_abs_diff(&tail, &Tensor::from_slice(&g.logprobs));
        assert!(diff < 1e-5, "log-probs differ by {diff}");
    }
}

#[test]
fn cached_greedy_decoding_equals_full_recomputation() {
    let m = fixture_model(false);
    let n = 12;
    let gens = Sampler::new(0).generate(&m.model, &prompts(), &params(0.0, 1.0, n)).unwrap();
    for (prompt, g) in PROMPTS.iter().zip(&gens) {
        let mut seq = prompt.to_vec();
        for _ in 0..n {
            let logits = m.model.forward(&row(&seq), None).unwrap().logits;
            seq.push(logits.get(0).get(seq.len() as i64 - 1).argmax(-1, false).int64_value(&[]) as u32);
        }
        assert_eq!(g.tokens, seq[prompt.len()..], "prompt {prompt:?}");
        assert_eq!(g.stop_reason, StopReason::MaxTokens);
    }
    check_logprobs(&m, &gens, 1.0);
}

#[test]
fn sampled_logprobs_are_those_the_learner_recomputes() {
    let m = fixture_model(false);
    let gens = Sampler::new(11).generate(&m.model, &prompts(), &params(0.7, 1.0, 10)).unwrap();
    check_logprobs(&m, &gens, 0.7);
}

/// With top_p < 1 a token's behaviour log-prob is that of the nucleus it was drawn from: the
/// full distribution's minus log(kept mass), and the kept mass is at least top_p, so each lies
/// in [full, full − ln top_p]; some token of ten per row was drawn from a cut nucleus.
#[test]
fn top_p_logprobs_are_the_truncated_distributions() {
    let m = fixture_model(false);
    let top_p = 0.9;
    let gens = Sampler::new(11).generate(&m.model, &prompts(), &params(0.7, top_p, 10)).unwrap();
    let mut cut = 0;
    for (prompt, g) in PROMPTS.iter().zip(&gens) {
        let full: Vec<u32> = prompt.iter().chain(&g.tokens).copied().collect();
        let lp = m.model.token_logprobs(&row(&full), None, 0.7).unwrap();
        let tail: Vec<f32> = lp.get(0).narrow(0, prompt.len() as i64 - 1, g.tokens.len() as i64).try_into().unwrap();
        for (recorded, full) in g.logprobs.iter().zip(&tail) {
            let d = f64::from(recorded - full);
            assert!((-1e-5..=-top_p.ln() + 1e-5).contains(&d), "behaviour {recorded} vs full {full}");
            cut += usize::from(d > 1e-4);
        }
    }
    assert!(cut > 0, "no token came from a cut nucleus");
}

#[test]
fn sampling_is_reproducible_and_top_p_near_zero_is_greedy() {
    let m = fixture_model(false);
    let sample = |seed, top_p| Sampler::new(seed).generate(&m.model, &prompts(), &params(1.0, top_p, 10)).unwrap();
    let a = sample(3, 1.0);
    assert_eq!(a, sample(3, 1.0), "same seed, same samples");
    assert_ne!(a, sample(4, 1.0), "another seed, other samples");
    let greedy = Sampler::new(0).generate(&m.model, &prompts(), &params(0.0, 1.0, 10)).unwrap();
    let narrow = sample(5, 1e-9);
    for (g, s) in greedy.iter().zip(&narrow) {
        assert_eq!(g.tokens, s.tokens);
    }
    // A sampler resumed from a saved state continues the same stream.
    let mut s = Sampler::new(9);
    s.generate(&m.model, &prompts(), &params(1.0, 1.0, 3)).unwrap();
    let mut resumed = Sampler::from_state(s.state());
    let p = params(1.0, 1.0, 5);
    assert_eq!(s.generate(&m.model, &prompts(), &p).unwrap(), resumed.generate(&m.model, &prompts(), &p).unwrap());
}

#[test]
fn rows_stop_on_eos_or_a_stop_sequence() {
    let m = fixture_model(false);
    let greedy = Sampler::new(0).generate(&m.model, &prompts(), &params(0.0, 1.0, 12)).unwrap();
    let g = &greedy[1].tokens;
    let first = |k: usize| g.iter().position(|&t| t == g[k]).unwrap();
    let eos_at = first(4);
    let mut p = params(0.0, 1.0, 12);
    p.eos_id = Some(g[eos_at]);
    let out = Sampler::new(0).generate(&m.model, &prompts(), &p).unwrap();
    assert_eq!(out[1].tokens, g[..=eos_at], "stops right after EOS, which is kept");
    assert_eq!(out[1].stop_reason, StopReason::Eos);
    assert_eq!(out[1].logprobs.len(), out[1].tokens.len());
    let mut p = params(0.0, 1.0, 12);
    p.stop_sequences = vec![vec![299, 298, 297], g[5..7].to_vec()];
    let out = Sampler::new(0).generate(&m.model, &prompts(), &p).unwrap();
    let end = (2..=7).find(|&e| g[..e].ends_with(&g[5..7])).unwrap();
    assert_eq!(out[1].tokens, g[..end]);
    assert_eq!(out[1].stop_reason, StopReason::StopSequence { index: 1 });
    // The other rows went on as they would have alone.
    for r in [0, 2] {
        assert!(greedy[r].tokens.starts_with(&out[r].tokens));
    }
}

#[test]
fn bad_requests_are_errors() {
    let m = fixture_model(false);
    let gen = |prompts: Vec<Vec<u32>>, p: SamplingParams| Sampler::new(0).generate(&m.model, &prompts, &p);
    assert!(gen(vec![vec![]], params(1.0, 1.0, 4)).is_err(), "empty prompt");
    assert!(gen(vec![vec![300]], params(1.0, 1.0, 4)).is_err(), "id outside the vocabulary");
    assert!(gen(vec![vec![1]], params(1.0, 0.0, 4)).is_err(), "top_p 0");
    assert!(gen(vec![vec![1]], params(-1.0, 1.0, 4)).is_err(), "negative temperature");
    assert!(gen(vec![vec![1]], params(1.0, 1.0, 200)).is_err(), "past max_position_embeddings");
    assert!(gen(vec![], params(1.0, 1.0, 4)).is_err(), "no prompt");
}

#[test]
fn generation_runs_in_bf16() {
    // The CUDA path runs in bf16; check on the CPU that nothing in generation assumes f32.
    let mut m = fixture_model(false);
    m.vs.set_kind(Kind::BFloat16);
    let out = Sampler::new(1).generate(&m.model, &prompts(), &params(1.0, 0.95, 4)).unwrap();
    assert!(out.iter().all(|g| g.tokens.len() == 4 && g.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0)));
}

/// Three turns of three conversations of different lengths, each turn's prompt the previous
/// prompt, its reply and a new observation of its own length: generating with the previous
/// turn's keys and values (only the new tokens prefilled) gives the tokens and log-probs that
/// generating from scratch gives, sampled with the same stream; the caches hold the prompt and
/// all replied tokens but the last (which was never run).
#[test]
fn continuing_from_cached_turns_equals_prefilling_the_whole_conversation() {
    let m = fixture_model(false);
    let p = params(0.8, 1.0, 6);
    let (mut cached, mut scratch) = (Sampler::new(5), Sampler::new(5));
    let mut caches: Vec<Option<policy::PrefixCache>> = (0..3).map(|_| None).collect();
    let mut convs = prompts();
    let mut new_tokens = 0;
    for turn in 0..3 {
        new_tokens += if turn == 0 {
            convs.iter().map(Vec::len).sum::<usize>()
        } else {
            caches.iter().zip(&convs).map(|(c, conv)| conv.len() - c.as_ref().unwrap().len()).sum()
        };
        let a = cached.generate_continuing(&m.model, &convs, &p, &mut caches).unwrap();
        let b = scratch.generate(&m.model, &convs, &p).unwrap();
        for (r, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x.tokens, y.tokens, "turn {turn}, row {r}");
            let diff = max_abs_diff(&Tensor::from_slice(&x.logprobs), &Tensor::from_slice(&y.logprobs));
            assert!(diff < 1e-4, "turn {turn}, row {r}: log-probs differ by {diff}");
            let held = caches[r].as_ref().unwrap();
            assert_eq!(held.len(), convs[r].len() + x.tokens.len() - 1, "turn {turn}, row {r}");
        }
        // The next turn: the reply, then an observation of 1, 4 or 7 tokens.
        for (r, (conv, g)) in convs.iter_mut().zip(&a).enumerate() {
            conv.extend(&g.tokens);
            conv.extend((0..1 + 3 * r as u32).map(|i| 30 + 17 * i + turn));
        }
    }
    // Only what came since the previous turn was run: the reply's last token and the observation.
    assert_eq!(cached.prefilled_tokens(), new_tokens as u64);
    let whole: u64 = scratch.prefilled_tokens();
    assert!(whole > 2 * new_tokens as u64, "from scratch {whole}, continuing {new_tokens}");
    // A cache that does not begin the prompt is ignored, not misused.
    let other = vec![vec![99u32, 98, 97, 96, 95, 94, 93, 92, 91, 90]; 3];
    let a = Sampler::new(2).generate_continuing(&m.model, &other, &params(0.0, 1.0, 4), &mut caches).unwrap();
    let b = Sampler::new(2).generate(&m.model, &other, &params(0.0, 1.0, 4)).unwrap();
    assert_eq!(a.iter().map(|g| &g.tokens).collect::<Vec<_>>(), b.iter().map(|g| &g.tokens).collect::<Vec<_>>());
}
