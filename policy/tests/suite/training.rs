//! The model trains: gradients reach every weight (tied embeddings and the value head
//! included), and a few Adam steps of supervised loss on agent tokens lower that loss.

use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
use protocol::wire::Role;
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor};

fn tiny(tied: bool) -> LoadedModel {
    let mut c = ModelConfig::tiny();
    c.num_hidden_layers = 2;
    c.tie_word_embeddings = tied;
    policy::seed::seeded(0, || LoadedModel::fresh(&c, Device::Cpu, true)).unwrap()
}

/// One conversation's ids `[1, T]` and its loss mask shifted to the predicted tokens `[1, T-1]`.
fn example() -> (Tensor, Tensor) {
    let t = ByteTokenizer;
    let turns = [(Role::User, "2+2?"), (Role::Agent, "<answer>4</answer>")];
    let chat = t.chat_template().render(&t, &turns).unwrap();
    let ids = Tensor::from_slice(&chat.ids.iter().map(|&i| i64::from(i)).collect::<Vec<_>>()).unsqueeze(0);
    let mask: Vec<f32> = chat.loss_mask[1..].iter().map(|&m| f32::from(u8::from(m))).collect();
    (ids, Tensor::from_slice(&mask).unsqueeze(0))
}

#[test]
fn gradients_reach_every_weight() {
    for tied in [false, true] {
        let m = tiny(tied);
        assert_eq!(m.vs.variables().contains_key("lm_head.weight"), !tied);
        let (ids, _) = example();
        let out = m.model.forward(&ids, None).unwrap();
        let lp = m.model.token_logprobs(&ids, None, 1.0).unwrap();
        let loss = -lp.mean(Kind::Float) + out.values.unwrap().square().mean(Kind::Float);
        loss.backward();
        for (name, v) in m.vs.variables() {
            let g = v.grad();
            assert!(g.defined() && g.abs().sum(Kind::Float).double_value(&[]) > 0.0, "{name} got no gradient");
        }
    }
}

#[test]
fn a_few_sft_steps_lower_the_agent_token_loss() {
    let m = tiny(false);
    let (ids, mask) = example();
    let loss = || -(m.model.token_logprobs(&ids, None, 1.0).unwrap() * &mask).sum(Kind::Float) / mask.sum(Kind::Float);
    let mut opt = tch::nn::Adam::default().build(&m.vs, 3e-3).unwrap();
    let before = loss().double_value(&[]);
    for _ in 0..20 {
        opt.backward_step(&loss());
    }
    let after = loss().double_value(&[]);
    assert!(after < 0.5 * before, "loss {before} → {after}");
}
