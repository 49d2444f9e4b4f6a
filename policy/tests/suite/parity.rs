//! The causal LM against Hugging Face transformers: the fixture's logits (computed by
//! `Qwen2ForCausalLM` in f32, eager attention, for a batch with one left-padded row) must be
//! reproduced within 1e-4 at every real position.

use tch::{Kind, Tensor};

use crate::common::{fixture_model, golden, max_abs_diff};

#[test]
fn logits_match_transformers_on_a_padded_batch() {
    let m = fixture_model(false);
    let ids = golden("input_ids");
    let mask = golden("attention_mask");
    let expected = golden("logits");
    let out = m.model.forward(&ids, Some(&mask)).unwrap();
    assert_eq!(out.logits.size(), vec![2, 10, 300]);
    assert!(out.values.is_none());
    let full = max_abs_diff(&out.logits.get(0), &expected.get(0));
    let padded = max_abs_diff(&out.logits.get(1).narrow(0, 3, 7), &expected.get(1).narrow(0, 3, 7));
    eprintln!("max |Δlogit| vs transformers: row 0 {full:.2e}, left-padded row 1 {padded:.2e}");
    assert!(full < 1e-4 && padded < 1e-4, "{full} {padded}");
}

#[test]
fn padding_on_either_side_or_none_gives_the_same_real_logits() {
    let m = fixture_model(false);
    let ids = golden("input_ids");
    let expected = golden("logits").get(1).narrow(0, 3, 7);
    let real = ids.get(1).narrow(0, 3, 7);
    let alone = m.model.forward(&real.unsqueeze(0), None).unwrap().logits.get(0);
    assert!(max_abs_diff(&alone, &expected) < 1e-4);
    // Right padding: the same 7 tokens then 3 pads of id 5.
    let right = Tensor::cat(&[real, Tensor::full([3], 5, (Kind::Int64, tch::Device::Cpu))], 0).unsqueeze(0);
    let mask = Tensor::cat(
        &[Tensor::ones([7], (Kind::Int64, tch::Device::Cpu)), Tensor::zeros([3], (Kind::Int64, tch::Device::Cpu))],
        0,
    );
    let out = m.model.forward(&right, Some(&mask.unsqueeze(0))).unwrap().logits.get(0).narrow(0, 0, 7);
    assert!(max_abs_diff(&out, &expected) < 1e-4);
    assert!(bool::try_from(out.isfinite().all()).unwrap());
}

#[test]
fn token_logprobs_and_entropy_follow_from_the_logits() {
    let m = fixture_model(true);
    let ids = golden("input_ids").get(0).unsqueeze(0);
    let out = m.model.forward(&ids, None).unwrap();
    let values = out.values.expect("value head");
    assert_eq!((values.size(), values.kind()), (vec![1, 10], Kind::Float));
    let lp = m.model.token_logprobs(&ids, None, 0.7).unwrap();
    assert_eq!(lp.size(), vec![1, 9]);
    let reference = (out.logits.narrow(1, 0, 9) / 0.7)
        .log_softmax(-1, Kind::Float)
        .gather(-1, &ids.narrow(1, 1, 9).unsqueeze(-1), false)
        .squeeze_dim(-1);
    assert!(max_abs_diff(&lp, &reference) < 1e-5);
    let h = m.model.token_entropy(&ids, None, 1.0).unwrap();
    assert_eq!(h.size(), vec![1, 10]);
    let max_entropy = (300f64).ln();
    assert!(h.min().double_value(&[]) > 0.0 && h.max().double_value(&[]) < max_entropy);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let m = fixture_model(false);
    let cpu = (Kind::Int64, tch::Device::Cpu);
    assert!(m.model.forward(&Tensor::zeros([4], cpu), None).is_err(), "1-D");
    assert!(m.model.forward(&Tensor::zeros([1, 4], (Kind::Float, tch::Device::Cpu)), None).is_err(), "float ids");
    assert!(m.model.forward(&Tensor::full([1, 4], 300, cpu), None).is_err(), "id ≥ vocab");
    assert!(m.model.forward(&Tensor::full([1, 4], -1, cpu), None).is_err(), "negative id");
    assert!(m.model.forward(&Tensor::zeros([1, 4], cpu), Some(&Tensor::ones([1, 3], cpu))).is_err(), "mask shape");
    assert!(m.model.forward(&Tensor::zeros([1, 129], cpu), None).is_err(), "past max_position_embeddings");
    assert!(m.model.token_logprobs(&Tensor::zeros([1, 1], cpu), None, 1.0).is_err(), "T = 1");
    assert!(m.model.token_logprobs(&Tensor::zeros([1, 4], cpu), None, 0.0).is_err(), "temperature 0");
}
