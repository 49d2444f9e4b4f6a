//! The passages a searchqa task searches: one per entity stating its facts (passage number =
//! entity number), then distractor "mention" passages that name an entity of the question's
//! chain next to some other entity (a lecture in another city, an office elsewhere), so that a
//! search by name alone can surface a wrong lead. Each relation's keyword
//! ([`Relation::keyword`]) appears only in the sentences stating that relation; mentions use none.

use super::world::{Kind, Relation, World};
use crate::rng::Rng;

/// The passage stating entity `e`'s facts.
pub fn own_passage(world: &World, e: usize) -> String {
    let Some(x) = world.get(e) else { return String::new() };
    let of = |r: Relation| x.fact(r).map_or("", |o| world.name(o));
    let (name, year, attr) = (&x.name, x.year, &x.attr);
    match x.kind {
        Kind::Country => format!("{name} is a country with about {attr} million inhabitants."),
        Kind::City => format!("{name} is a city in {} with about {attr} thousand inhabitants.", of(Relation::CityIn)),
        Kind::University => {
            format!(
                "{name} is a public institution established in {year}. Its campus is in {}.",
                of(Relation::CampusIn)
            )
        }
        Kind::Person => format!(
            "{name} is {} {attr} born in {} in {year}. {name} studied at {}.",
            article(attr),
            of(Relation::BornIn),
            of(Relation::StudiedAt)
        ),
        Kind::Company => format!(
            "{name} is {} {attr} company founded by {} in {year}. Its headquarters are in {}.",
            article(attr),
            of(Relation::FoundedBy),
            of(Relation::HeadquarteredIn)
        ),
        Kind::Book => format!(
            "{name} is {} {attr} novel written by {} and published by {} in {year}.",
            article(attr),
            of(Relation::WrittenBy),
            of(Relation::PublishedBy)
        ),
        Kind::Film => format!(
            "{name} is a film directed by {} and produced by {} in {year}.",
            of(Relation::DirectedBy),
            of(Relation::ProducedBy)
        ),
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A distractor naming entity `e` beside a random other entity, stating none of `e`'s facts.
pub fn mention(rng: &mut Rng, world: &World, e: usize) -> String {
    let Some(x) = world.get(e) else { return String::new() };
    let any = |rng: &mut Rng, kind: Kind| {
        let pool: Vec<usize> =
            (0..world.entities.len()).filter(|&i| world.entities[i].kind == kind && i != e).collect();
        if pool.is_empty() {
            String::new()
        } else {
            world.name(pool[rng.below(pool.len())]).to_string()
        }
    };
    let year = rng.range(1990, 2024);
    let name = &x.name;
    match x.kind {
        Kind::Country => format!("{name} signed a trade agreement with {} in {year}.", any(rng, Kind::Country)),
        Kind::City => {
            format!("{name} hosted a trade fair in {year} where {} showed its products.", any(rng, Kind::Company))
        }
        Kind::University => format!("{name} hosted a congress in {} in {year}.", any(rng, Kind::City)),
        Kind::Person => format!("{name} gave a lecture in {} in {year}.", any(rng, Kind::City)),
        Kind::Company => format!("{name} opened an office in {} in {year}.", any(rng, Kind::City)),
        Kind::Book => format!("{name} won a prize at a fair in {} in {year}.", any(rng, Kind::City)),
        Kind::Film => format!("{name} was shown at a festival in {} in {year}.", any(rng, Kind::City)),
    }
}

/// Every passage: one per entity, then `mentions` distractors cycling over `focus` (the
/// chain's entities).
pub fn build(rng: &mut Rng, world: &World, focus: &[usize], mentions: usize) -> Vec<String> {
    let mut out: Vec<String> = (0..world.entities.len()).map(|e| own_passage(world, e)).collect();
    for i in 0..mentions {
        if let Some(&e) = focus.get(i % focus.len().max(1)) {
            out.push(mention(rng, world, e));
        }
    }
    out
}
