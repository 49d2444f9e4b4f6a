//! The rule-based simulated user: it holds the task's private facts and reveals one only when
//! the agent's free-text message asks for it.
//!
//! ```text
//!  agent says (lowercased) ──► is it a request?  any of  ?  please  tell me  provide  share  …
//!                               └─ yes: for each trigger present, the fact it unlocks:
//!      name → full name   zip/postal → zip   email/e-mail → email   order → each goal's order id
//!      item/product → the item to refund   reason/why → the cancellation reason
//!      address → the new address
//! ```
//!
//! A fact the user does not hold (a reason when nothing is to be cancelled) is never invented;
//! a message without a trigger gets a generic reply restating the request, which names no fact.
//! Information needs are checked by content ([`claim`]): an order's total is told when the
//! message states the amount; its status when a sentence about the order names that status and
//! no other.

use super::db::{Status, Store};
use super::goal::{Goal, Task};

const ASKS: [&str; 13] = [
    "?",
    "please",
    "tell me",
    "provide",
    "share",
    "give me",
    "let me know",
    "need",
    "what",
    "which",
    "could you",
    "can you",
    "may i",
];

/// What a message says about an information need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Nothing.
    Silent,
    /// The true fact (the need is met).
    Right,
    /// A different value for it.
    Wrong,
}

/// Dollar amounts in a text, in cents, each with whether it was written with `$`. A number
/// counts when it has a `$` or two (or one) decimals; digits glued to letters (ids) never do.
pub fn amounts(text: &str) -> Vec<(u64, bool)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let glued = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.' || b[i - 1] == b'_');
        if !b[i].is_ascii_digit() || glued {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let whole = &text[start..i];
        let mut frac = "";
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            let f = i + 1;
            i = f;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac = &text[f..i];
        }
        let mut j = start;
        while j > 0 && b[j - 1] == b' ' {
            j -= 1;
        }
        let dollar = j > 0 && b[j - 1] == b'$';
        if whole.len() <= 9 && frac.len() <= 2 && (dollar || !frac.is_empty()) {
            let cents = whole.parse::<u64>().unwrap_or(0) * 100;
            let f = frac.parse::<u64>().unwrap_or(0);
            out.push((cents + if frac.len() == 1 { f * 10 } else { f }, dollar));
        }
    }
    out
}

/// What `lower` (a lowercased agent message) says about the information `goal` asks for,
/// judged against `store`; [`Claim::Silent`] for goals that are not information needs.
pub fn claim(store: &Store, goal: &Goal, lower: &str) -> Claim {
    let Some(order) = goal.order().and_then(|o| store.orders.get(o)) else { return Claim::Silent };
    let mentions = |word: &str| lower.contains(word) || lower.contains(&order.id.to_ascii_lowercase());
    match goal {
        Goal::AskTotal { .. } => {
            let found = amounts(lower);
            if found.iter().any(|&(c, _)| c == order.total) {
                Claim::Right
            } else if mentions("total") && found.iter().any(|&(_, dollar)| dollar) {
                Claim::Wrong
            } else {
                Claim::Silent
            }
        }
        Goal::AskStatus { .. } => status_claim(order.status, &order.id.to_ascii_lowercase(), lower),
        _ => Claim::Silent,
    }
}

/// A status claim, sentence by sentence: the sentences naming the order (all of them when none
/// does). Right when one names the true status and no other; Wrong when one that names the order
/// or says "status" names only other statuses (a wrong sentence outweighs a right one).
fn status_claim(truth: Status, id: &str, lower: &str) -> Claim {
    let sentences = || lower.split(['.', '!', '?', ';', '\n']);
    let about_order = sentences().any(|s| s.contains(id));
    let mut claim = Claim::Silent;
    for sentence in sentences().filter(|s| !about_order || s.contains(id)) {
        let named: Vec<Status> = Status::ALL.into_iter().filter(|s| sentence.contains(s.stem())).collect();
        if named == [truth] {
            claim = Claim::Right;
        } else if !named.is_empty() && !named.contains(&truth) && (about_order || sentence.contains("status")) {
            return Claim::Wrong;
        }
    }
    claim
}

/// Whether the lowercased message is a request at all.
pub fn is_request(lower: &str) -> bool {
    ASKS.iter().any(|a| lower.contains(a))
}

/// The facts the request `lower` unlocks, as sentences, in a fixed order.
fn reveal(task: &Task, lower: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !is_request(lower) {
        return out;
    }
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let Some(me) = task.store.users.get(task.customer) else { return out };
    if has(&["name"]) {
        out.push(format!("My name is {}.", me.name()));
    }
    if has(&["zip", "postal", "postcode"]) {
        out.push(format!("My zip code is {}.", me.zip));
    }
    if has(&["email", "e-mail"]) {
        out.push(format!("My email is {}.", me.email));
    }
    for goal in &task.goals {
        let id = goal.order().and_then(|o| task.store.orders.get(o)).map(|o| o.id.as_str()).unwrap_or("");
        match goal {
            Goal::Cancel { reason, .. } => {
                if has(&["order"]) {
                    out.push(format!("The order I want to cancel is #{id}."));
                }
                if has(&["reason", "why"]) {
                    out.push(format!("My reason for cancelling: {reason}."));
                }
            }
            Goal::Refund { item, .. } => {
                if has(&["order"]) {
                    out.push(format!("The order with the item to refund is #{id}."));
                }
                if has(&["item", "product"]) {
                    out.push(format!("The item I want refunded is the {item}."));
                }
            }
            Goal::MoveHome { address } => {
                if has(&["address"]) {
                    out.push(format!("My new address is {address}."));
                }
            }
            Goal::Reroute { address, .. } => {
                if has(&["order"]) {
                    out.push(format!("The order to send elsewhere is #{id}."));
                }
                if has(&["address"]) {
                    out.push(format!("It should go to {address} instead."));
                }
            }
            Goal::AskTotal { .. } | Goal::AskStatus { .. } => {
                if has(&["order"]) {
                    out.push(format!("The order I'm asking about is #{id}."));
                }
            }
        }
    }
    out
}

/// The user's reply to the agent's free text `lower` (lowercased). `told_now`: the message
/// just met an information need; `all_met`: every goal is done.
pub fn reply(task: &Task, lower: &str, told_now: bool, all_met: bool) -> String {
    let facts = reveal(task, lower);
    let mut out = String::new();
    if told_now {
        out.push_str("Thanks, that's what I wanted to know.");
    }
    for fact in &facts {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(fact);
    }
    if out.is_empty() {
        if all_met {
            out.push_str("That's everything I needed, thank you.");
        } else {
            out.push_str("Sorry, I'm not sure what you need from me. ");
            out.push_str(&task.request);
        }
    }
    out
}

/// Every fact the user holds privately (name, zip, email, order ids, item, reason, address):
/// none of them may appear in a reply to a message that did not ask for it.
pub fn private_facts(task: &Task) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(me) = task.store.users.get(task.customer) {
        out.extend([me.name(), me.zip.clone(), me.email.clone()]);
    }
    for goal in &task.goals {
        if let Some(order) = goal.order().and_then(|o| task.store.orders.get(o)) {
            out.push(order.id.clone());
        }
        match goal {
            Goal::Cancel { reason, .. } => out.push((*reason).to_string()),
            Goal::Refund { item, .. } => out.push((*item).to_string()),
            Goal::MoveHome { address } | Goal::Reroute { address, .. } => out.push(address.clone()),
            Goal::AskTotal { .. } | Goal::AskStatus { .. } => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_found_and_ids_are_not() {
        assert_eq!(amounts("total $45.98, id w1234567, 2 items"), vec![(4598, true)]);
        assert_eq!(amounts("it was 12.5 or $ 7"), vec![(1250, false), (700, true)]);
        assert_eq!(amounts("1.234 x.5 $99999999999"), vec![]);
    }

    #[test]
    fn a_status_is_told_sentence_by_sentence() {
        let claim = |text: &str| status_claim(Status::Pending, "w1234567", text);
        assert_eq!(claim("order #w1234567 is pending."), Claim::Right);
        assert_eq!(claim("i cancelled #w7654321. order #w1234567 is pending."), Claim::Right);
        assert_eq!(claim("it is pending"), Claim::Right);
        assert_eq!(claim("#w1234567 is pending, shipped, delivered or cancelled"), Claim::Silent);
        assert_eq!(claim("#w1234567 has shipped"), Claim::Wrong);
        assert_eq!(claim("#w1234567 is pending. #w1234567 has shipped"), Claim::Wrong);
        assert_eq!(claim("its status: delivered"), Claim::Wrong);
        assert_eq!(claim("orders ship fast; i cancelled the other one"), Claim::Silent);
    }

    #[test]
    fn reveals_only_what_is_asked_and_only_on_a_request() {
        let task = Task::generate(11, 1);
        let me = &task.store.users[task.customer];
        let r = reply(&task, "could you tell me your name?", false, false);
        assert!(r.contains(&me.name()) && !r.contains(&me.zip) && !r.contains(&me.email), "{r}");
        let r = reply(&task, "your name and zip code.", false, false);
        assert!(!r.contains(&me.name()) && !r.contains(&me.zip), "a statement is not a request: {r}");
        let r = reply(&task, "hello there", false, false);
        for fact in private_facts(&task) {
            assert!(!r.contains(&fact), "{fact} in {r}");
        }
    }
}
