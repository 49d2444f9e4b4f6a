//! Generation of store rows from the task's RNG: a fixed product catalog, name and address
//! pools, and unique ids, emails and zip codes.

use super::db::{Item, Order, Status, User, REASONS};
use crate::rng::Rng;

/// The product catalog: name and price in cents. Orders hold copies of these.
pub const CATALOG: [(&str, u64); 24] = [
    ("desk lamp", 3499),
    ("wireless mouse", 2499),
    ("mechanical keyboard", 8999),
    ("usb-c cable", 1299),
    ("water bottle", 1850),
    ("yoga mat", 2975),
    ("coffee grinder", 6450),
    ("bluetooth speaker", 5599),
    ("hiking backpack", 11900),
    ("running shoes", 9495),
    ("ceramic mug", 1425),
    ("phone case", 1999),
    ("air fryer", 12999),
    ("electric kettle", 4380),
    ("wool scarf", 3150),
    ("table fan", 4725),
    ("noise-cancelling headphones", 19900),
    ("smart watch", 24999),
    ("camping tent", 17450),
    ("cast iron skillet", 3899),
    ("office chair", 21500),
    ("laptop stand", 4199),
    ("sketchbook", 1150),
    ("board game", 3675),
];

const FIRST: [&str; 24] = [
    "Ann", "Omar", "Yusuf", "Mia", "Liam", "Sofia", "Ivan", "Chloe", "Noah", "Aisha", "Lucas", "Emma", "Raj", "Yara",
    "Ethan", "Lena", "Mateo", "Zoe", "Hugo", "Nora", "Kenji", "Amara", "Felix", "Ines",
];
const LAST: [&str; 24] = [
    "Lee", "Rossi", "Garcia", "Kim", "Nguyen", "Smith", "Patel", "Silva", "Muller", "Khan", "Lopez", "Sato", "Brown",
    "Ito", "Moreau", "Novak", "Costa", "Ali", "Berg", "Diaz", "Wright", "Okafor", "Hansen", "Cohen",
];
const STREETS: [&str; 14] = [
    "Oak", "Maple", "Birch", "Cedar", "Elm", "Pine", "Willow", "Chestnut", "Lake", "Hill", "Park", "River", "Sunset",
    "Meadow",
];
const SUFFIXES: [&str; 6] = ["Street", "Avenue", "Road", "Lane", "Drive", "Court"];
const CITIES: [&str; 10] = [
    "Fairview",
    "Lakeside",
    "Springfield",
    "Riverton",
    "Oakdale",
    "Brookfield",
    "Maplewood",
    "Westport",
    "Hillcrest",
    "Greenville",
];

/// Makes unique users, orders and addresses from one RNG.
pub struct Gen {
    /// The generator every choice of the task draws from.
    pub rng: Rng,
    taken: Vec<String>,
}

impl Gen {
    /// A generator over `rng`.
    pub fn new(rng: Rng) -> Self {
        Self { rng, taken: Vec::new() }
    }

    /// A value from `make` that no earlier call returned (after 64 collisions, one made unique
    /// with a suffix; the spaces are far larger than a store, so that never happens in practice).
    fn fresh(&mut self, make: impl Fn(&mut Rng) -> String) -> String {
        let mut v = make(&mut self.rng);
        for _ in 0..64 {
            if !self.taken.contains(&v) {
                break;
            }
            v = make(&mut self.rng);
        }
        while self.taken.contains(&v) {
            v.push('0');
        }
        self.taken.push(v.clone());
        v
    }

    /// A random (first, last) name.
    pub fn name(&mut self) -> (&'static str, &'static str) {
        (*self.rng.pick(&FIRST), *self.rng.pick(&LAST))
    }

    /// A random street address.
    pub fn address(&mut self) -> String {
        let r = &mut self.rng;
        let (n, s, k, c) = (r.range(1, 999), *r.pick(&STREETS), *r.pick(&SUFFIXES), *r.pick(&CITIES));
        format!("{n} {s} {k}, {c}")
    }

    /// A new customer with a unique id, email and zip.
    pub fn user(&mut self, first: &'static str, last: &'static str) -> User {
        let (f, l) = (first.to_ascii_lowercase(), last.to_ascii_lowercase());
        let id = self.fresh(|r| format!("{f}_{l}_{}", r.range(1000, 9999)));
        let email = self.fresh(|r| format!("{f}.{l}{}@example.com", r.range(1, 99)));
        let zip = self.fresh(|r| r.range(10000, 99999).to_string());
        User { id, first, last, email, zip, address: self.address() }
    }

    /// A new order of `user` in `status`, with one to three different products.
    pub fn order(&mut self, user: &User, status: Status) -> Order {
        let id = self.fresh(|r| format!("W{}", r.range(1_000_000, 9_999_999)));
        let mut picks: Vec<usize> = (0..CATALOG.len()).collect();
        self.rng.shuffle(&mut picks);
        let n = self.rng.range(1, 3) as usize;
        let items: Vec<Item> = picks[..n].iter().map(|&i| Item { name: CATALOG[i].0, price: CATALOG[i].1 }).collect();
        let total = items.iter().map(|i| i.price).sum();
        let reason = (status == Status::Cancelled).then(|| *self.rng.pick(&REASONS));
        Order { id, user_id: user.id.clone(), status, items, total, refunded: 0, reason, ship_to: user.address.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rows_are_unique() {
        let mut g = Gen::new(Rng::new(3, 4));
        let users: Vec<User> = (0..30).map(|_| g.user("Ann", "Lee")).collect();
        for (i, a) in users.iter().enumerate() {
            for b in &users[i + 1..] {
                assert!(a.id != b.id && a.email != b.email && a.zip != b.zip);
            }
        }
        let o = g.order(&users[0], Status::Cancelled);
        assert!(o.reason.is_some() && (1..=3).contains(&o.items.len()));
        assert_eq!(o.total, o.items.iter().map(|i| i.price).sum::<u64>());
    }
}
