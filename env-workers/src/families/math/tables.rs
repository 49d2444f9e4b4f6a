//! The tables word problems are drawn from: the difficulty levels (see the table in
//! [`generate` module](mod@super::generate)), the themes and the names. Numbers never appear in these
//! texts, so every number of a problem is one of its operands.

/// What a difficulty level draws from.
pub(super) struct Level {
    pub(super) ops: (i64, i64),
    pub(super) magnitude: i64,
    pub(super) multiplier: i64,
    pub(super) divisor: i64,
    pub(super) fraction_chance: f64,
    pub(super) decimal_chance: f64,
}

/// Difficulty 1, 2 and 3.
pub(super) const LEVELS: [Level; 3] = [
    Level { ops: (2, 2), magnitude: 20, multiplier: 5, divisor: 5, fraction_chance: 0.0, decimal_chance: 0.0 },
    Level { ops: (3, 4), magnitude: 100, multiplier: 9, divisor: 9, fraction_chance: 0.33, decimal_chance: 0.0 },
    Level { ops: (5, 6), magnitude: 1000, multiplier: 12, divisor: 12, fraction_chance: 0.5, decimal_chance: 0.25 },
];

/// What the story is about and the verbs it uses.
pub(super) struct Theme {
    pub(super) unit: &'static str,
    pub(super) container: &'static str,
    pub(super) gain: &'static str,
    pub(super) loss: &'static str,
}

/// The stories' subjects.
pub(super) const THEMES: [Theme; 6] = [
    Theme { unit: "kilograms of flour", container: "sacks", gain: "buys", loss: "uses" },
    Theme { unit: "litres of juice", container: "jugs", gain: "makes", loss: "pours out" },
    Theme { unit: "metres of ribbon", container: "gift boxes", gain: "buys", loss: "cuts off" },
    Theme { unit: "dollars", container: "envelopes", gain: "earns", loss: "spends" },
    Theme { unit: "kilograms of rice", container: "bags", gain: "harvests", loss: "cooks" },
    Theme { unit: "litres of paint", container: "cans", gain: "mixes", loss: "uses up" },
];

/// The stories' people.
pub(super) const NAMES: [&str; 12] =
    ["Mia", "Omar", "Lena", "Ravi", "Sofia", "Kenji", "Amara", "Lucas", "Ines", "Tariq", "Hana", "Diego"];
