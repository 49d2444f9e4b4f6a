//! The store's tools run against an episode's store. Every tool but `find_user` and
//! `transfer_to_human` needs an identified customer and only touches that customer's records;
//! refusals are observations ("order #W1234567 is shipped and cannot be cancelled"), never panics.

use super::call::{err, lower, Call, ErrKind, ToolError};
use super::db::{money, parse_money, Status, Store, REASONS};

/// What a successful call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// The result the agent sees.
    pub text: String,
    /// Whether the store or the identified customer changed.
    pub changed: bool,
    /// Orders whose status the result shows, each with whether their total is shown too.
    pub viewed: Vec<(usize, bool)>,
}

fn done(text: String) -> Result<Done, ToolError> {
    Ok(Done { text, changed: false, viewed: Vec::new() })
}

fn identified(auth: Option<usize>) -> Result<usize, ToolError> {
    auth.ok_or_else(|| err(ErrKind::NotIdentified, "identify the customer first with find_user"))
}

fn own_user(store: &Store, auth: Option<usize>, id: &str) -> Result<usize, ToolError> {
    let me = identified(auth)?;
    match store.user(id) {
        Some(u) if u == me => Ok(u),
        Some(_) => Err(err(ErrKind::BadArgs, format!("user {id} is not the identified customer"))),
        None => Err(err(ErrKind::BadArgs, format!("no user {id}"))),
    }
}

fn own_order(store: &Store, auth: Option<usize>, id: &str) -> Result<usize, ToolError> {
    let me = identified(auth)?;
    let o = store.order(id).ok_or_else(|| err(ErrKind::BadArgs, format!("no order #{id}")))?;
    if store.users.get(me).is_some_and(|u| u.id == store.orders[o].user_id) {
        Ok(o)
    } else {
        Err(err(ErrKind::BadArgs, format!("order #{id} does not belong to the identified customer")))
    }
}

fn find(store: &Store, email: Option<&str>, name: Option<&str>, zip: Option<&str>) -> Result<usize, ToolError> {
    let hit = match email {
        Some(e) => store.users.iter().position(|u| u.email == e),
        None => store.users.iter().position(|u| Some(u.zip.as_str()) == zip && Some(lower(&u.name()).as_str()) == name),
    };
    hit.ok_or_else(|| err(ErrKind::BadArgs, "no customer matches; check the details with the user"))
}

/// Runs `call` (not a transfer, which the episode handles) against `store`.
pub fn run(store: &mut Store, auth: &mut Option<usize>, call: &Call) -> Result<Done, ToolError> {
    match call {
        Call::FindUser { email, name, zip } => {
            let u = find(store, email.as_deref(), name.as_deref(), zip.as_deref())?;
            let changed = *auth != Some(u);
            *auth = Some(u);
            let user = &store.users[u];
            let text = format!("found {}: user_id {}; the customer is now identified", user.name(), user.id);
            Ok(Done { text, changed, viewed: Vec::new() })
        }
        Call::GetUser(id) => {
            let u = &store.users[own_user(store, *auth, id)?];
            done(format!("user {}: {}, email {}, zip {}, address {}", u.id, u.name(), u.email, u.zip, u.address))
        }
        Call::ListOrders(id) => {
            own_user(store, *auth, id)?;
            let mine: Vec<(usize, bool)> =
                (0..store.orders.len()).filter(|&o| store.orders[o].user_id == *id).map(|o| (o, false)).collect();
            let mut text = format!("orders of {id}:");
            for (k, &(o, _)) in mine.iter().enumerate() {
                let sep = if k == 0 { " " } else { "; " };
                text.push_str(&format!("{sep}#{}: {}", store.orders[o].id, store.orders[o].status.word()));
            }
            Ok(Done { text, changed: false, viewed: mine })
        }
        Call::GetOrder(id) => {
            let o = own_order(store, *auth, id)?;
            let order = &store.orders[o];
            let items: Vec<String> = order.items.iter().map(|i| format!("{} {}", i.name, money(i.price))).collect();
            let text = format!(
                "order #{}: status {}, total {}, refunded {}, ship to {}; items: {}",
                order.id,
                order.status.word(),
                money(order.total),
                money(order.refunded),
                order.ship_to,
                items.join(", ")
            );
            Ok(Done { text, changed: false, viewed: vec![(o, true)] })
        }
        Call::Cancel { order, reason } => {
            let o = own_order(store, *auth, order)?;
            let Some(&why) = REASONS.iter().find(|r| **r == reason.as_str()) else {
                return Err(err(ErrKind::BadArgs, format!("reason must be one of: {}", REASONS.join(", "))));
            };
            let order = &mut store.orders[o];
            if order.status != Status::Pending {
                let text = format!("order #{} is {} and cannot be cancelled", order.id, order.status.word());
                return Err(err(ErrKind::Refused, text));
            }
            order.status = Status::Cancelled;
            order.reason = Some(why);
            Ok(Done {
                text: format!("order #{} is now cancelled (reason: {why})", order.id),
                changed: true,
                viewed: vec![],
            })
        }
        Call::Refund { order, amount } => {
            let o = own_order(store, *auth, order)?;
            let cents = parse_money(amount)
                .filter(|&c| c > 0)
                .ok_or_else(|| err(ErrKind::BadArgs, "amount must be a positive dollar amount such as 12.50"))?;
            let order = &mut store.orders[o];
            let left = order.total - order.refunded.min(order.total);
            if order.status != Status::Delivered {
                let text =
                    format!("order #{} is {}; only delivered orders can be refunded", order.id, order.status.word());
                return Err(err(ErrKind::Refused, text));
            }
            if cents > left {
                let text = format!(
                    "{} is more than the {} still refundable on order #{}",
                    money(cents),
                    money(left),
                    order.id
                );
                return Err(err(ErrKind::Refused, text));
            }
            order.refunded += cents;
            let text = format!(
                "refunded {} on order #{} ({} of {} refunded)",
                money(cents),
                order.id,
                money(order.refunded),
                money(order.total)
            );
            Ok(Done { text, changed: true, viewed: vec![] })
        }
        Call::Readdress { order, user, address } => {
            if address.is_empty() {
                return Err(err(ErrKind::BadArgs, "update_address needs a non-empty address"));
            }
            if let Some(order) = order {
                let o = own_order(store, *auth, order)?;
                let order = &mut store.orders[o];
                if order.status != Status::Pending {
                    let text = format!(
                        "order #{} is {}; only pending orders can be re-addressed",
                        order.id,
                        order.status.word()
                    );
                    return Err(err(ErrKind::Refused, text));
                }
                order.ship_to.clone_from(address);
                return Ok(Done {
                    text: format!("order #{} will ship to {address}", order.id),
                    changed: true,
                    viewed: vec![],
                });
            }
            let u = own_user(store, *auth, user.as_deref().unwrap_or(""))?;
            store.users[u].address.clone_from(address);
            Ok(Done {
                text: format!("the address of {} is now {address}", store.users[u].id),
                changed: true,
                viewed: vec![],
            })
        }
        Call::Transfer(_) => done("transferred to a human agent".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::retail::db::Order;
    use crate::families::retail::gen::Gen;
    use crate::rng::Rng;

    fn store() -> Store {
        let mut g = Gen::new(Rng::new(1, 2));
        let (a, b) = (g.user("Ann", "Lee"), g.user("Ann", "Lee"));
        let mut orders: Vec<Order> = Status::ALL.iter().map(|&s| g.order(&a, s)).collect();
        orders.push(g.order(&b, Status::Pending));
        Store { users: vec![a, b], orders }
    }

    #[test]
    fn policy_refusals_are_errors_not_panics() {
        let mut s = store();
        let mut auth = None;
        let ids: Vec<String> = s.orders.iter().map(|o| o.id.clone()).collect();
        let mut kind = |s: &mut Store, call: Call| run(s, &mut auth, &call).map(|d| d.changed).map_err(|e| e.kind);
        assert_eq!(kind(&mut s, Call::GetOrder(ids[0].clone())), Err(ErrKind::NotIdentified));
        let (name, zip) = (lower(&s.users[0].name()), s.users[0].zip.clone());
        assert_eq!(kind(&mut s, Call::FindUser { email: None, name: Some(name), zip: Some(zip) }), Ok(true));
        let cancel = |o: usize, why: &str| Call::Cancel { order: ids[o].clone(), reason: why.into() };
        assert_eq!(kind(&mut s, cancel(1, "no longer needed")), Err(ErrKind::Refused), "shipped");
        assert_eq!(kind(&mut s, cancel(4, "no longer needed")), Err(ErrKind::BadArgs), "not hers");
        assert_eq!(kind(&mut s, cancel(0, "whim")), Err(ErrKind::BadArgs));
        assert_eq!(kind(&mut s, cancel(0, "no longer needed")), Ok(true));
        assert_eq!(s.orders[0].status, Status::Cancelled);
        let total = s.orders[2].total;
        let refund = |amount: String| Call::Refund { order: ids[2].clone(), amount };
        assert_eq!(kind(&mut s, refund(money(total + 1))), Err(ErrKind::Refused));
        assert_eq!(kind(&mut s, refund(money(total))), Ok(true));
        assert_eq!(kind(&mut s, refund("0.01".into())), Err(ErrKind::Refused));
        assert_eq!(kind(&mut s, refund("-1".into())), Err(ErrKind::BadArgs));
    }
}
