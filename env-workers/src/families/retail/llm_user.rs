//! The retail customer played by a chat model (MUA-RL), in place of the rule-based user of
//! `user.rs`: its system prompt (persona, private goal and facts, rules, the stop signal) and
//! one turn of the conversation.
//!
//! ```text
//!  agent Say(text) ──► replies so far = max_turns?  ──► end: "the user's turn limit … was reached"
//!                  ──► episode.say (told bookkeeping; the rule-based reply, kept as the fallback)
//!                  ──► model: Says(reply) ──► the agent sees the reply
//!                             Ends(words) ──► end: "the user ended the conversation"
//!                             Err        ──► the rule-based reply, counted as a fallback
//!  every end is rewarded by the ground truth (store == target ∧ every asked fact told)
//! ```

use std::sync::Arc;

use super::episode::Episode;
use super::goal::{Goal, Task};
use crate::env::Observation;
use crate::rng::Rng;
use crate::user_model::{Conversation, UserModel, UserTurn};

const PERSONA_SALT: u64 = 0x05E2_50AA;

/// How the customer comes across; one is picked per task seed.
const PERSONAS: [&str; 4] = [
    "You are polite and patient, and you write in full sentences.",
    "You are in a hurry and write short, terse messages.",
    "You are friendly and a little chatty, but you stay on topic.",
    "You are a bit worried about your order and say so, but you cooperate.",
];

/// One goal as the customer knows it, facts included.
fn want(task: &Task, goal: &Goal) -> String {
    let id = goal.order().and_then(|o| task.store.orders.get(o)).map_or("", |o| o.id.as_str());
    match goal {
        Goal::Cancel { reason, .. } => format!("Cancel your order #{id}. Your reason: {reason}."),
        Goal::Refund { item, .. } => format!("Get a refund for the {item} in your delivered order #{id}."),
        Goal::MoveHome { address } => format!("Change the default address on your account to {address}."),
        Goal::Reroute { address, .. } => format!("Have your pending order #{id} shipped to {address} instead."),
        Goal::AskTotal { .. } => format!("Find out the total amount of your order #{id}."),
        Goal::AskStatus { .. } => format!("Find out the status of your order #{id}."),
    }
}

/// The user model's system prompt for `task`: persona (picked by `seed`), private goal and
/// facts, rules, and how to end the conversation with `stop`.
pub fn system_prompt(task: &Task, seed: u64, stop: &str) -> String {
    let persona = *Rng::new(seed, PERSONA_SALT).pick(&PERSONAS);
    let mut out = String::from(
        "You are playing a customer of an online store who is chatting with the store's customer-service agent. \
         You are the customer, never the agent.\n\n",
    );
    if let Some(me) = task.store.users.get(task.customer) {
        out.push_str(&format!("Who you are: {}, zip code {}, email {}. {persona}\n\n", me.name(), me.zip, me.email));
    }
    out.push_str("What you want (private: the agent does not know it yet):\n");
    for goal in &task.goals {
        out.push_str(&format!("- {}\n", want(task, goal)));
    }
    out.push_str(&format!(
        "\nRules:\n\
         - You already opened the chat vaguely. Give a fact (your name, zip code, email, an order number, an item, a \
         reason, an address) only when the agent asks for it; never volunteer one.\n\
         - Never invent a fact that is not written above; if asked for something you do not know, say so.\n\
         - Write one short message at a time, as a customer typing in a chat. Never call tools, never write \
         <tool> or <answer>, never act as the agent.\n\
         - When everything you want is done, or the agent hands you to a human, or it cannot be done, reply with \
         {stop} (a short goodbye before it is fine).\n"
    ));
    out
}

/// The model-played customer of one episode.
#[derive(Debug)]
pub struct PlayedUser {
    model: Arc<UserModel>,
    conversation: Conversation,
}

impl PlayedUser {
    /// The customer of `task` (generated from `seed`), who opened with `task.opening`.
    pub fn new(model: Arc<UserModel>, task: &Task, seed: u64) -> Self {
        let conversation = Conversation::new(system_prompt(task, seed, model.stop_signal()), task.opening.clone());
        Self { model, conversation }
    }

    /// The conversation so far, as the model sees it.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The customer's answer to the agent's free text `text`.
    pub fn answer(&mut self, episode: &mut Episode, task: &Task, text: &str) -> Observation {
        let limit = self.model.max_turns();
        if self.conversation.replies() >= limit {
            return episode.finish(task, &format!("the user's turn limit of {limit} replies was reached"));
        }
        let rules = episode.say(task, text);
        self.conversation.agent_said(text);
        match self.model.reply(&self.conversation) {
            Ok(UserTurn::Says(reply)) => {
                self.conversation.user_said(&reply);
                Observation::user(reply)
            }
            Ok(UserTurn::Ends(words)) => {
                let mut end = episode.finish(task, "the user ended the conversation");
                if !words.is_empty() {
                    end.text = format!("{words}\n{}", end.text);
                }
                end
            }
            Err(e) => {
                self.model.fell_back(&e);
                self.conversation.user_said(&rules.text);
                rules
            }
        }
    }
}
