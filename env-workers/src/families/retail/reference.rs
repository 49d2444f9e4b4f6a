//! The reference solution: the agent messages of a correct episode. Ask for every identifying
//! fact in one request, identify the customer, then per goal look the order up and do the write
//! (or tell the asked fact), and close with `<answer>done</answer>`. At most seven messages.

use super::db::money;
use super::goal::{Goal, Task};

fn list(parts: &[&str]) -> String {
    match parts {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// The reference agent messages for `task`.
pub fn reference(task: &Task) -> Vec<String> {
    let Some(me) = task.store.users.get(task.customer) else { return vec!["<answer>done</answer>".into()] };
    let mut asks = vec![if task.by_email { "your email" } else { "your name and zip code" }];
    match task.goals.iter().filter(|g| g.order().is_some()).count() {
        0 => {}
        1 => asks.push("the order number"),
        _ => asks.push("the order numbers"),
    }
    for goal in &task.goals {
        match goal {
            Goal::Cancel { .. } => asks.push("the reason"),
            Goal::Refund { .. } => asks.push("which item you want refunded"),
            Goal::MoveHome { .. } | Goal::Reroute { .. } => asks.push("the new address"),
            Goal::AskTotal { .. } | Goal::AskStatus { .. } => {}
        }
    }
    let mut out = vec![format!("I can help with that. Could you please tell me {}?", list(&asks))];
    out.push(if task.by_email {
        format!("<tool>find_user(email=\"{}\")</tool>", me.email)
    } else {
        format!("<tool>find_user(name=\"{}\", zip=\"{}\")</tool>", me.name(), me.zip)
    });
    for goal in &task.goals {
        let order = goal.order().and_then(|o| task.store.orders.get(o));
        let id = order.map(|o| o.id.as_str()).unwrap_or("");
        if order.is_some() {
            out.push(format!("<tool>get_order(order_id=\"#{id}\")</tool>"));
        }
        out.push(match goal {
            Goal::Cancel { reason, .. } => {
                format!("<tool>cancel_order(order_id=\"#{id}\", reason=\"{reason}\")</tool>")
            }
            Goal::Refund { amount, .. } => {
                let amount = money(*amount);
                format!("<tool>refund(order_id=\"#{id}\", amount=\"{}\")</tool>", amount.trim_start_matches('$'))
            }
            Goal::MoveHome { address } => {
                format!("<tool>update_address(user_id=\"{}\", address=\"{address}\")</tool>", me.id)
            }
            Goal::Reroute { address, .. } => {
                format!("<tool>update_address(order_id=\"#{id}\", address=\"{address}\")</tool>")
            }
            Goal::AskTotal { .. } => format!("The total of order #{id} is {}.", money(order.map_or(0, |o| o.total))),
            Goal::AskStatus { .. } => {
                format!("Order #{id} is currently {}.", order.map_or("unknown", |o| o.status.word()))
            }
        });
    }
    out.push("<answer>done</answer>".into());
    out
}
