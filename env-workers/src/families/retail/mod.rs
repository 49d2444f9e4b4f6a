//! `retail`: customer service against a simulated store, with a simulated user who holds a
//! private goal (tau-bench / MUA-RL-like).
//!
//! ```text
//!  seed ──► Task { store, goals, target store }         (goal.rs, db.rs, gen.rs)
//!  episode: own copy of the store
//!   agent ──Say──► simulated user (user.rs): reveals a fact only when a request names it
//!                  or, with a user model, the model playing the customer (llm_user.rs)
//!   agent ──<tool>──► call.rs, tools.rs: find_user, get_user, list_orders, get_order, cancel_order,
//!                     refund, update_address, transfer_to_human
//!   agent ──<answer>──► end: reward 1.0 iff store == target ∧ every asked fact told (MUA-RL)
//! ```
//!
//! - **Goals**: cancel a pending order for a reason; refund one item of a delivered order;
//!   change the default address; change a pending order's shipping address; be told an order's
//!   total or status. Difficulty 3 gives two goals (see `goal.rs` for the knob).
//! - **The user** opens vaguely ("I'd like to cancel an order I placed."), with no identifying
//!   fact, and reveals name, zip, email, order ids, item, reason or new address only when a
//!   request asks for it (keyword rules in `user.rs`). [`RetailEnv::with_user_model`] has a chat
//!   model play the user instead (MUA-RL; `llm_user.rs`): same opening, same ground truth.
//! - **Policy** (enforced by the tools, refusals are observations): identify the customer with
//!   `find_user` first and touch only their records; cancel only pending orders, with reason
//!   `no longer needed` or `ordered by mistake`; refund only delivered orders, at most what is
//!   left of the total; re-address only pending orders.
//! - **Verifier** rules: see `verify.rs` (a table of every finding kind and when it fires).

mod call;
mod db;
mod episode;
mod gen;
mod goal;
mod llm_user;
mod reference;
mod tools;
mod user;
mod verify;

use std::sync::Arc;

use protocol::wire::TaskSpec;

use crate::action::{parse, Action};
use crate::env::{Environment, Observation, Prompt};
use crate::user_model::{Conversation, UserModel};
use crate::verify::Finding;
use episode::Episode;
use goal::Task;
use llm_user::PlayedUser;

const SYSTEM: &str = "You are a customer-service agent for an online store. Help the user with their \
request using the tools below, following the store's policy.

Policy:
- Identify the customer with find_user before anything else; only look at or change that customer's records.
- Ask the user for any fact you need (name and zip code, or email; order number; reason; item; new address). Never guess ids.
- Only pending orders can be cancelled; the reason must be \"no longer needed\" or \"ordered by mistake\".
- Only delivered orders can be refunded, for at most what is left of the order total.
- Only pending orders can have their shipping address changed.
- If the user asks you something, tell them the answer in a normal message.
- When the request is done, reply <answer>done</answer>. If you cannot help, call transfer_to_human.

Tools:
- find_user(name=\"First Last\", zip=\"12345\") or find_user(email=\"...\"): identify the customer
- get_user(user_id): the customer's profile
- list_orders(user_id): the customer's orders with their status
- get_order(order_id): an order's status, items, total, refunds and shipping address
- cancel_order(order_id, reason): cancel a pending order
- refund(order_id, amount): refund part of a delivered order, amount in dollars such as 12.50
- update_address(user_id, address) or update_address(order_id=\"#W...\", address=\"...\"): change the \
default address, or a pending order's shipping address
- transfer_to_human(summary): hand the conversation to a human (ends it)

Action protocol: call a tool with <tool>name(key=\"value\", ...)</tool>; finish with <answer>...</answer>; \
anything else is a message to the user. One action per message.";

/// The retail environment for one task spec.
pub struct RetailEnv {
    spec: TaskSpec,
    task: Task,
    prompt: Prompt,
    episode: Episode,
    played: Option<PlayedUser>,
}

impl RetailEnv {
    /// Generates the task for `spec` (difficulty clamped to 1..=3) and starts its episode.
    pub fn new(spec: TaskSpec) -> Self {
        let task = Task::generate(spec.seed, spec.difficulty);
        let prompt = Prompt { system: SYSTEM.to_string(), user: task.opening.clone() };
        let episode = Episode::new(&task);
        Self { spec, task, prompt, episode, played: None }
    }

    /// As [`RetailEnv::new`], with the user played by `model` (the rule-based user answers a
    /// turn the model fails). Rewards are unchanged: the store and what the user was told.
    pub fn with_user_model(spec: TaskSpec, model: Arc<UserModel>) -> Self {
        let mut env = Self::new(spec);
        env.played = Some(PlayedUser::new(model, &env.task, spec.seed));
        env
    }

    /// The conversation as the user model sees it (role-flipped), when a model plays the user.
    pub fn user_conversation(&self) -> Option<&Conversation> {
        self.played.as_ref().map(PlayedUser::conversation)
    }

    /// The user's private facts (name, zip, email, order ids, item, reason, new address): for
    /// tests and the judge, which check that none leaks unasked.
    pub fn private_facts(&self) -> Vec<String> {
        user::private_facts(&self.task)
    }

    /// Whether the episode so far earns the reward: the store equals the target store and every
    /// fact the user asked for was told.
    pub fn solved(&self) -> bool {
        self.episode.success(&self.task)
    }
}

impl Environment for RetailEnv {
    fn spec(&self) -> TaskSpec {
        self.spec
    }

    fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    fn step(&mut self, message: &str) -> Observation {
        if let (Some(user), false) = (&mut self.played, self.episode.over) {
            if let Ok(Action::Say(text)) = parse(message) {
                return user.answer(&mut self.episode, &self.task, &text);
            }
        }
        self.episode.step(&self.task, message)
    }

    fn reference(&self) -> Vec<String> {
        reference::reference(&self.task)
    }

    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        verify::verify(&self.task, agent_messages)
    }
}
