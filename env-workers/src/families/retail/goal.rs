//! A retail task: the generated store, the customer's private goals, and the target store those
//! goals lead to.
//!
//! Difficulty (1..=3): the number of customers (3, 5, 8), of orders per customer, and of goals
//! (one at levels 1 and 2, two of different kinds at level 3). Level 2 adds a customer with the
//! same last name and the re-addressing goal; level 3 adds a namesake (same full name, different
//! zip and email) and customers sharing the first or the last name.

use super::db::{canon_address, Item, Status, Store, REASONS};
use super::gen::Gen;
use crate::rng::Rng;

const SALT: u64 = 0x007E_7A11;

/// One thing the customer wants. Order fields index `Store::orders` (indices never change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Goal {
    /// Cancel a pending order for this reason.
    Cancel {
        /// The order.
        order: usize,
        /// One of `REASONS`.
        reason: &'static str,
    },
    /// Refund one item of a delivered order.
    Refund {
        /// The order.
        order: usize,
        /// The item's name.
        item: &'static str,
        /// Its price: the amount to refund, in cents.
        amount: u64,
    },
    /// Change the customer's default address.
    MoveHome {
        /// The new address, canonical.
        address: String,
    },
    /// Change the shipping address of a pending order.
    Reroute {
        /// The order.
        order: usize,
        /// The new address, canonical.
        address: String,
    },
    /// Be told an order's total (an information need).
    AskTotal {
        /// The order.
        order: usize,
    },
    /// Be told an order's status (an information need).
    AskStatus {
        /// The order.
        order: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cancel,
    Refund,
    MoveHome,
    Reroute,
    AskTotal,
    AskStatus,
}

impl Goal {
    /// The order the goal is about, if any.
    pub fn order(&self) -> Option<usize> {
        match self {
            Self::Cancel { order, .. }
            | Self::Refund { order, .. }
            | Self::Reroute { order, .. }
            | Self::AskTotal { order }
            | Self::AskStatus { order } => Some(*order),
            Self::MoveHome { .. } => None,
        }
    }

    /// Whether the goal is to be told something rather than to change the store.
    pub fn is_info(&self) -> bool {
        matches!(self, Self::AskTotal { .. } | Self::AskStatus { .. })
    }

    /// How the customer states it, without any identifying fact (`variant` picks a wording).
    pub fn intent(&self, variant: usize) -> &'static str {
        let two: [&str; 2] = match self {
            Self::Cancel { .. } => ["I'd like to cancel an order I placed.", "I need to cancel one of my orders."],
            Self::Refund { .. } => [
                "I got an order but I want a refund for one of the items.",
                "One item in an order I received isn't right, and I'd like my money back for it.",
            ],
            Self::MoveHome { .. } => {
                ["I've moved and need to update my address on file.", "Please change the home address on my account."]
            }
            Self::Reroute { .. } => [
                "I need to change where one of my orders is shipped.",
                "Can an order of mine go to a different address?",
            ],
            Self::AskTotal { .. } => {
                ["What was the total of one of my orders?", "I want to know how much I paid for an order."]
            }
            Self::AskStatus { .. } => {
                ["What's the status of one of my orders?", "Can you check where one of my orders stands?"]
            }
        };
        two[variant % 2]
    }

    /// Whether a write goal's entity in `store` equals the target's; info goals are checked by
    /// the episode (told or not), so they count as met here.
    pub fn written(&self, store: &Store, target: &Store, customer: usize) -> bool {
        match self {
            Self::MoveHome { .. } => store.users.get(customer) == target.users.get(customer),
            Self::Cancel { order, .. } | Self::Refund { order, .. } | Self::Reroute { order, .. } => {
                store.orders.get(*order) == target.orders.get(*order)
            }
            Self::AskTotal { .. } | Self::AskStatus { .. } => true,
        }
    }

    fn apply(&self, store: &mut Store, customer: usize) {
        match self {
            Self::Cancel { order, reason } => {
                if let Some(o) = store.orders.get_mut(*order) {
                    o.status = Status::Cancelled;
                    o.reason = Some(reason);
                }
            }
            Self::Refund { order, amount, .. } => {
                if let Some(o) = store.orders.get_mut(*order) {
                    o.refunded += amount;
                }
            }
            Self::MoveHome { address } => {
                if let Some(u) = store.users.get_mut(customer) {
                    u.address.clone_from(address);
                }
            }
            Self::Reroute { order, address } => {
                if let Some(o) = store.orders.get_mut(*order) {
                    o.ship_to.clone_from(address);
                }
            }
            Self::AskTotal { .. } | Self::AskStatus { .. } => {}
        }
    }
}

/// A generated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The store as the episode starts.
    pub store: Store,
    /// The store once every goal is done: the reward compares against it.
    pub target: Store,
    /// The customer's index in `store.users`.
    pub customer: usize,
    /// The customer's goals, in the order they are stated.
    pub goals: Vec<Goal>,
    /// Whether the reference identifies the customer by email (else by name and zip).
    pub by_email: bool,
    /// The first user message.
    pub opening: String,
    /// The request as the opening states it (no identifying fact), for the user to repeat.
    pub request: String,
}

fn pick_kinds(rng: &mut Rng, difficulty: u32) -> Vec<Kind> {
    use Kind::*;
    let easy = [Cancel, Refund, MoveHome, AskTotal, AskStatus];
    let all = [Cancel, Refund, MoveHome, Reroute, AskTotal, AskStatus];
    match difficulty {
        1 => vec![*rng.pick(&easy)],
        2 => vec![*rng.pick(&all)],
        _ => loop {
            let (a, b) = (*rng.pick(&all), *rng.pick(&all));
            let both = |x: Kind, y: Kind| (a == x || a == y) && (b == x || b == y);
            if a != b && !both(MoveHome, Reroute) && !both(AskTotal, AskStatus) {
                break vec![a, b];
            }
        },
    }
}

impl Task {
    /// The task for `seed` at `difficulty` (clamped to 1..=3).
    pub fn generate(seed: u64, difficulty: u32) -> Task {
        let d = difficulty.clamp(1, 3);
        let mut g = Gen::new(Rng::new(seed, SALT + u64::from(d)));
        let kinds = pick_kinds(&mut g.rng, d);
        let (first, last) = g.name();
        let customer = g.user(first, last);
        let mut users = vec![customer.clone()];
        for k in 1..[3, 5, 8][d as usize - 1] {
            let (mut f, mut l) = g.name();
            match (d, k) {
                (3, 1) => (f, l) = (first, last),
                (3, 2) => f = first,
                (2, 1) | (3, 3) => l = last,
                _ => {}
            }
            users.push(g.user(f, l));
        }
        let mut orders = Vec::new();
        let mut goals = Vec::new();
        for kind in &kinds {
            let status = match kind {
                Kind::Cancel | Kind::Reroute => Status::Pending,
                Kind::Refund => Status::Delivered,
                Kind::AskTotal | Kind::AskStatus => *g.rng.pick(&Status::ALL),
                Kind::MoveHome => {
                    goals.push((*kind, String::new()));
                    continue;
                }
            };
            let order = g.order(&customer, status);
            goals.push((*kind, order.id.clone()));
            orders.push(order);
        }
        let spread = [(0, 1, 1, 2), (1, 2, 1, 3), (2, 3, 2, 3)][d as usize - 1];
        for (i, user) in users.iter().enumerate() {
            let (lo, hi) = if i == 0 { (spread.0, spread.1) } else { (spread.2, spread.3) };
            for _ in 0..g.rng.range(lo, hi) {
                let status = *g.rng.pick(&Status::ALL);
                orders.push(g.order(user, status));
            }
        }
        g.rng.shuffle(&mut users);
        g.rng.shuffle(&mut orders);
        let store = Store { users, orders };
        let customer = store.user(&customer.id).unwrap_or(0);
        let goals: Vec<Goal> =
            goals.into_iter().map(|(kind, id)| make_goal(&mut g, &store, customer, kind, &id)).collect();
        let mut target = store.clone();
        for goal in &goals {
            goal.apply(&mut target, customer);
        }
        let by_email = g.rng.below(2) == 0;
        let mut request = String::new();
        for (i, goal) in goals.iter().enumerate() {
            if i > 0 {
                request.push_str(" And another thing: ");
            }
            request.push_str(goal.intent(g.rng.below(2)));
        }
        Task { store, target, customer, goals, by_email, opening: format!("Hi! {request}"), request }
    }
}

fn make_goal(g: &mut Gen, store: &Store, customer: usize, kind: Kind, order_id: &str) -> Goal {
    let order = store.order(order_id).unwrap_or(0);
    let fresh = |g: &mut Gen, old: &str| loop {
        let a = canon_address(&g.address());
        if a != old {
            break a;
        }
    };
    match kind {
        Kind::Cancel => Goal::Cancel { order, reason: REASONS[g.rng.below(REASONS.len())] },
        Kind::Refund => {
            let item = store.orders.get(order).map(|o| o.items[g.rng.below(o.items.len())].clone());
            let item = item.unwrap_or(Item { name: "", price: 0 });
            Goal::Refund { order, item: item.name, amount: item.price }
        }
        Kind::MoveHome => Goal::MoveHome { address: fresh(g, &store.users[customer].address) },
        Kind::Reroute => Goal::Reroute { order, address: fresh(g, &store.orders[order].ship_to) },
        Kind::AskTotal => Goal::AskTotal { order },
        Kind::AskStatus => Goal::AskStatus { order },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_fit_their_orders_and_the_target_differs_only_there() {
        for seed in 0..300 {
            for d in 1..=3 {
                let t = Task::generate(seed, d);
                assert_eq!(t.goals.len(), if d == 3 { 2 } else { 1 });
                let mut changed = 0;
                for goal in &t.goals {
                    if let Some(o) = goal.order() {
                        assert_eq!(t.store.orders[o].user_id, t.store.users[t.customer].id);
                    }
                    match goal {
                        Goal::Cancel { order, .. } | Goal::Reroute { order, .. } => {
                            assert_eq!(t.store.orders[*order].status, Status::Pending)
                        }
                        Goal::Refund { order, .. } => assert_eq!(t.store.orders[*order].status, Status::Delivered),
                        _ => {}
                    }
                    changed += usize::from(!goal.is_info());
                    assert!(goal.is_info() || !goal.written(&t.store, &t.target, t.customer));
                }
                assert_eq!(t.store == t.target, changed == 0);
            }
        }
    }
}
