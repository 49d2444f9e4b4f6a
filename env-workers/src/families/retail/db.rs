//! The simulated store: customers and their orders. Plain vectors (a store holds a few dozen
//! rows at most, so a linear scan beats a map), compared with `==` for the reward and cloned
//! once per episode; generated from the seed by `gen.rs`.

/// The two reasons `cancel_order` accepts (tau-bench's policy).
pub const REASONS: [&str; 2] = ["no longer needed", "ordered by mistake"];

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Placed, not yet shipped: can be cancelled or re-addressed.
    Pending,
    /// On its way.
    Shipped,
    /// Received: can be refunded.
    Delivered,
    /// Cancelled.
    Cancelled,
}

impl Status {
    /// Every status, in a fixed order.
    pub const ALL: [Status; 4] = [Self::Pending, Self::Shipped, Self::Delivered, Self::Cancelled];

    /// The word tools print.
    pub fn word(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Shipped => "shipped",
            Self::Delivered => "delivered",
            Self::Cancelled => "cancelled",
        }
    }

    /// The stem that finds the status in free text ("cancel" also matches "canceled").
    pub fn stem(self) -> &'static str {
        match self {
            Self::Cancelled => "cancel",
            other => other.word(),
        }
    }
}

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The product's name.
    pub name: &'static str,
    /// Its price in cents.
    pub price: u64,
}

/// An order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// `W` and seven digits; shown as `#W1234567`.
    pub id: String,
    /// Its customer's user id.
    pub user_id: String,
    /// Where it is.
    pub status: Status,
    /// What was bought.
    pub items: Vec<Item>,
    /// The sum of the item prices, in cents.
    pub total: u64,
    /// Refunded so far, in cents.
    pub refunded: u64,
    /// Why it was cancelled, once it is.
    pub reason: Option<&'static str>,
    /// The shipping address.
    pub ship_to: String,
}

/// A customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// `first_last_1234`, lowercase.
    pub id: String,
    /// First name.
    pub first: &'static str,
    /// Last name.
    pub last: &'static str,
    /// Unique email.
    pub email: String,
    /// Unique five-digit zip code.
    pub zip: String,
    /// The default address.
    pub address: String,
}

impl User {
    /// "First Last".
    pub fn name(&self) -> String {
        format!("{} {}", self.first, self.last)
    }
}

/// The whole database of one episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// Customers.
    pub users: Vec<User>,
    /// Orders of every customer.
    pub orders: Vec<Order>,
}

impl Store {
    /// The index of the user with this (normalised) id.
    pub fn user(&self, id: &str) -> Option<usize> {
        self.users.iter().position(|u| u.id == id)
    }

    /// The index of the order with this (normalised) id.
    pub fn order(&self, id: &str) -> Option<usize> {
        self.orders.iter().position(|o| o.id == id)
    }
}

/// Cents as `$12.34`.
pub fn money(cents: u64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// `12.34`, `$12.34`, `12.3` or `12` as cents; `None` for anything else or an absurd amount.
pub fn parse_money(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_prefix('$').unwrap_or(t).trim();
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 9 || frac.len() > 2 || !digits(whole) || !digits(frac) {
        return None;
    }
    let mut cents: u64 = whole.parse().ok()?;
    cents *= 100;
    let f: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    Some(cents + if frac.len() == 1 { f * 10 } else { f })
}

/// An order id as stored: `#w 123` → `W123` (trimmed, `#` dropped, uppercase).
pub fn norm_order_id(text: &str) -> String {
    let t = text.trim();
    t.strip_prefix('#').unwrap_or(t).trim().to_ascii_uppercase()
}

/// An address in one canonical spelling: words capitalised, one space, `, ` between parts, no
/// trailing period — so that `77 birch road,lakeside.` and `77 Birch Road, Lakeside` are equal.
pub fn canon_address(text: &str) -> String {
    let spaced = text.trim().trim_end_matches('.').replace(',', ", ");
    let mut out = String::with_capacity(spaced.len());
    for word in spaced.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        let mut chars = word.chars();
        if let Some(c) = chars.next() {
            out.extend(c.to_uppercase());
            out.extend(chars.flat_map(char::to_lowercase));
        }
    }
    out.replace(" ,", ",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_round_trips_and_rejects_junk() {
        assert_eq!(money(4598), "$45.98");
        assert_eq!(money(5), "$0.05");
        assert_eq!(parse_money("$45.98"), Some(4598));
        assert_eq!(parse_money(" 12.5 "), Some(1250));
        assert_eq!(parse_money("7"), Some(700));
        for bad in ["", "$", "1.234", "-3", "1e3", "12,50", "1234567890", ".5", "4.5.6"] {
            assert_eq!(parse_money(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_and_addresses_normalise() {
        assert_eq!(norm_order_id(" #w1234567 "), "W1234567");
        assert_eq!(canon_address("77 birch  road,lakeside."), "77 Birch Road, Lakeside");
        assert_eq!(canon_address("77 Birch Road , Lakeside"), "77 Birch Road, Lakeside");
        assert_eq!(canon_address(""), "");
    }
}
