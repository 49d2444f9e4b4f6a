//! The knowledge base behind a searchqa task: entities of seven kinds and functional relations
//! between them (every entity has exactly one value per relation of its kind, so every chain of
//! relations has one answer). The kinds form a DAG, so chains never loop:
//!
//! ```text
//!  Book ─written_by─► Person ─born_in──► City ─city_in─► Country
//!   └─published_by─► Company ─founded_by─► Person ─studied_at─► University ─campus_in─► City
//!  Film ─directed_by─► Person;  Film ─produced_by─► Company ─headquartered_in─► City
//! ```

use crate::families::qa::names::*;
use crate::families::qa::{pair_names, sample};
use crate::rng::Rng;

/// The kinds of entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A country (terminal).
    Country,
    /// A city, in a country.
    City,
    /// A university, with a campus in a city.
    University,
    /// A person, born in a city, who studied at a university.
    Person,
    /// A company, founded by a person, headquartered in a city.
    Company,
    /// A book, written by a person, published by a company.
    Book,
    /// A film, directed by a person, produced by a company.
    Film,
}

/// The relations: each maps an entity of one kind to one entity of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// City → Country.
    CityIn,
    /// University → City.
    CampusIn,
    /// Person → City.
    BornIn,
    /// Person → University.
    StudiedAt,
    /// Company → Person.
    FoundedBy,
    /// Company → City.
    HeadquarteredIn,
    /// Book → Person.
    WrittenBy,
    /// Book → Company.
    PublishedBy,
    /// Film → Person.
    DirectedBy,
    /// Film → Company.
    ProducedBy,
}

impl Kind {
    /// The relations an entity of this kind has.
    pub fn relations(self) -> &'static [Relation] {
        use Relation::*;
        match self {
            Kind::Country => &[],
            Kind::City => &[CityIn],
            Kind::University => &[CampusIn],
            Kind::Person => &[BornIn, StudiedAt],
            Kind::Company => &[FoundedBy, HeadquarteredIn],
            Kind::Book => &[WrittenBy, PublishedBy],
            Kind::Film => &[DirectedBy, ProducedBy],
        }
    }

    /// The longest chain of relations starting from this kind.
    pub fn depth(self) -> usize {
        self.relations().iter().map(|r| 1 + r.object().depth()).max().unwrap_or(0)
    }
}

impl Relation {
    /// The kind it points to.
    pub fn object(self) -> Kind {
        use Relation::*;
        match self {
            CityIn => Kind::Country,
            CampusIn | BornIn | HeadquarteredIn => Kind::City,
            StudiedAt => Kind::University,
            FoundedBy | WrittenBy | DirectedBy => Kind::Person,
            PublishedBy | ProducedBy => Kind::Company,
        }
    }

    /// The word that states this relation in a passage, and in no other kind of sentence.
    pub fn keyword(self) -> &'static str {
        use Relation::*;
        match self {
            CityIn => "city",
            CampusIn => "campus",
            BornIn => "born",
            StudiedAt => "studied",
            FoundedBy => "founded",
            HeadquarteredIn => "headquarters",
            WrittenBy => "written",
            PublishedBy => "published",
            DirectedBy => "directed",
            ProducedBy => "produced",
        }
    }

    /// A noun phrase for the object of this relation applied to `x`: "the founder of x".
    pub fn phrase(self, x: &str) -> String {
        use Relation::*;
        match self {
            CityIn => format!("the country where {x} lies"),
            CampusIn => format!("the city where {x} has its campus"),
            BornIn => format!("the birthplace of {x}"),
            StudiedAt => format!("the institution where {x} studied"),
            FoundedBy => format!("the founder of {x}"),
            HeadquarteredIn => format!("the city where {x} has its headquarters"),
            WrittenBy => format!("the author of {x}"),
            PublishedBy => format!("the publisher of {x}"),
            DirectedBy => format!("the director of {x}"),
            ProducedBy => format!("the company that produced {x}"),
        }
    }

    /// A question asking for the object of this relation applied to `x`.
    pub fn question(self, x: &str) -> String {
        use Relation::*;
        match self {
            CityIn => format!("In which country does {x} lie?"),
            CampusIn => format!("In which city does {x} have its campus?"),
            BornIn => format!("In which city was {x} born?"),
            StudiedAt => format!("At which institution did {x} study?"),
            FoundedBy => format!("Who founded {x}?"),
            HeadquarteredIn => format!("In which city does {x} have its headquarters?"),
            WrittenBy => format!("Who wrote {x}?"),
            PublishedBy => format!("Which company published {x}?"),
            DirectedBy => format!("Who directed {x}?"),
            ProducedBy => format!("Which company produced {x}?"),
        }
    }
}

/// One entity.
#[derive(Debug, Clone)]
pub struct Entity {
    /// Its kind.
    pub kind: Kind,
    /// Its name, unique in the world.
    pub name: String,
    /// A year (birth, founding, publication …).
    pub year: u32,
    /// A descriptive word (occupation, industry, genre) or a size, by kind.
    pub attr: String,
    /// Its relations, one per relation of its kind.
    pub facts: Vec<(Relation, usize)>,
}

impl Entity {
    /// The entity `r` points to from this one.
    pub fn fact(&self, r: Relation) -> Option<usize> {
        self.facts.iter().find(|(x, _)| *x == r).map(|(_, e)| *e)
    }
}

/// All entities of a task.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// Entities; an entity's number is its position.
    pub entities: Vec<Entity>,
}

impl World {
    /// Draws a world; sizes grow with difficulty (1..=3).
    pub fn generate(rng: &mut Rng, difficulty: u32) -> Self {
        let d = difficulty.clamp(1, 3) as usize;
        let mut w = World::default();
        let names: Vec<String> = sample(rng, COUNTRIES, 3 + d).iter().map(|s| s.to_string()).collect();
        let countries = w.add_all(rng, Kind::Country, names);
        let names: Vec<String> = sample(rng, CITIES, 2 * (3 + d)).iter().map(|s| s.to_string()).collect();
        let cities = w.add_all(rng, Kind::City, names);
        let names = pair_names(rng, UNIVERSITY_WORDS, UNIVERSITY_KINDS, 3 + d);
        let univs = w.add_all(rng, Kind::University, names);
        let names = pair_names(rng, FIRST_NAMES, LAST_NAMES, 6 + 2 * d);
        let people = w.add_all(rng, Kind::Person, names);
        let names = pair_names(rng, COMPANY_WORDS, COMPANY_SUFFIXES, 4 + d);
        let companies = w.add_all(rng, Kind::Company, names);
        let names =
            pair_names(rng, BOOK_ADJECTIVES, BOOK_NOUNS, 3 + d).into_iter().map(|t| format!("The {t}")).collect();
        w.add_all(rng, Kind::Book, names);
        let names = pair_names(rng, FILM_WORDS, FILM_NOUNS, 3 + d);
        w.add_all(rng, Kind::Film, names);
        let targets = |r: Relation| match r.object() {
            Kind::Country => &countries,
            Kind::City => &cities,
            Kind::University => &univs,
            Kind::Person => &people,
            _ => &companies,
        };
        for e in &mut w.entities {
            for &r in e.kind.relations() {
                let pool = targets(r);
                if !pool.is_empty() {
                    e.facts.push((r, pool[rng.below(pool.len())]));
                }
            }
        }
        w
    }

    fn add_all(&mut self, rng: &mut Rng, kind: Kind, names: Vec<String>) -> Vec<usize> {
        names
            .into_iter()
            .map(|name| {
                let (year, attr) = match kind {
                    Kind::Country => (0, rng.range(2, 90).to_string()),
                    Kind::City => (0, rng.range(20, 900).to_string()),
                    Kind::University => (rng.range(1700, 1990) as u32, String::new()),
                    Kind::Person => (rng.range(1930, 2000) as u32, rng.pick(OCCUPATIONS).to_string()),
                    Kind::Company => (rng.range(1950, 2020) as u32, rng.pick(INDUSTRIES).to_string()),
                    Kind::Book => (rng.range(1950, 2024) as u32, rng.pick(GENRES).to_string()),
                    Kind::Film => (rng.range(1960, 2024) as u32, String::new()),
                };
                self.entities.push(Entity { kind, name, year, attr, facts: Vec::new() });
                self.entities.len() - 1
            })
            .collect()
    }

    /// The entity numbered `e`.
    pub fn get(&self, e: usize) -> Option<&Entity> {
        self.entities.get(e)
    }

    /// The name of entity `e` ("" if none).
    pub fn name(&self, e: usize) -> &str {
        self.entities.get(e).map_or("", |x| x.name.as_str())
    }
}
