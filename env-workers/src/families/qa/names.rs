//! Word pools for generated names. Each kind of name draws its words from its own pool, and no
//! word is in two pools, so a name of one kind never contains a name of another kind (the
//! verifiers find entity names in text by whole-word matching) and two kinds of passage share
//! no name words. Within a kind, names deliberately share words (two people called Ada, two
//! companies called Acme …): those are the distractors.

/// Given names of people.
pub const FIRST_NAMES: &[&str] = &[
    "Ada", "Ben", "Clara", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Leon", "Maya",
    "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Samir", "Tess", "Umar", "Vera", "Wendell", "Xenia", "Yusuf", "Zoe",
    "Anton", "Bianca", "Cyrus", "Dalia", "Emil", "Freya", "Gideon", "Hana", "Ivo", "Jasmin", "Kofi", "Lina", "Marek",
    "Nadia",
];

/// Family names of people.
pub const LAST_NAMES: &[&str] = &[
    "Abbott",
    "Brandt",
    "Castell",
    "Dunmore",
    "Ekland",
    "Fairley",
    "Garrow",
    "Holloway",
    "Imrie",
    "Jessop",
    "Kettering",
    "Lindqvist",
    "Marchetti",
    "Nakamura",
    "Okafor",
    "Pemberton",
    "Quaid",
    "Rosales",
    "Sandoval",
    "Thorne",
    "Ulrich",
    "Varga",
    "Whitlock",
    "Yardley",
    "Zeller",
    "Achebe",
    "Bergman",
    "Carvalho",
    "Delacroix",
    "Esposito",
    "Fenwick",
    "Gallagher",
    "Hartmann",
    "Iversen",
    "Jovanovic",
    "Kowalski",
    "Lindgren",
    "Moreau",
    "Novak",
    "Oyelaran",
];

/// City names (one word each).
pub const CITIES: &[&str] = &[
    "Ashford",
    "Brightwater",
    "Caldmoor",
    "Dunhaven",
    "Elmstead",
    "Fairport",
    "Glenrock",
    "Harrowgate",
    "Ironbridge",
    "Juniper",
    "Kestrel",
    "Larkspur",
    "Millbrook",
    "Northcliff",
    "Oakhurst",
    "Pinecrest",
    "Queensport",
    "Ravenholm",
    "Stonebury",
    "Thornwick",
    "Umberton",
    "Valewood",
    "Westmarch",
    "Yarrowby",
    "Zephyrton",
    "Ambervale",
    "Blackmere",
    "Coldwater",
    "Driftwood",
    "Eastbrook",
];

/// Country names (one word each).
pub const COUNTRIES: &[&str] = &[
    "Aldoria", "Belmora", "Caspia", "Drevania", "Estoria", "Falmark", "Galdovia", "Hestoria", "Istavia", "Jarnholm",
    "Kalmora", "Lysmark", "Montevar", "Norveld", "Orlesia", "Pellucia", "Quarnia", "Rovenia", "Sarnland", "Tavaria",
];

/// First words of company names.
pub const COMPANY_WORDS: &[&str] = &[
    "Acme",
    "Northwind",
    "Bluefin",
    "Copperleaf",
    "Dynamo",
    "Everglow",
    "Foxglove",
    "Granitex",
    "Helix",
    "Ironclad",
    "Junova",
    "Kinetic",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Orbital",
    "Pioneer",
    "Redwood",
    "Summit",
    "Tidal",
    "Vertex",
    "Wavecrest",
    "Zenith",
    "Cobalt",
];

/// Second words of company names.
pub const COMPANY_SUFFIXES: &[&str] =
    &["Corp", "Labs", "Foods", "Systems", "Motors", "Media", "Holdings", "Energy", "Textiles", "Logistics"];

/// First words of university names.
pub const UNIVERSITY_WORDS: &[&str] = &[
    "Halden",
    "Marlow",
    "Crestfield",
    "Easton",
    "Greyhall",
    "Kingsley",
    "Lockwood",
    "Merriweather",
    "Redcliffe",
    "Saltmarsh",
    "Whitcombe",
    "Ashbury",
    "Belgrave",
    "Carrow",
    "Dalton",
    "Fernleigh",
];

/// Second words of university names.
pub const UNIVERSITY_KINDS: &[&str] = &["Institute", "College", "University", "Academy"];

/// Adjectives of book titles ("The Silent River").
pub const BOOK_ADJECTIVES: &[&str] =
    &["Silent", "Hidden", "Broken", "Golden", "Distant", "Crimson", "Quiet", "Endless", "Burning", "Frozen", "Hollow"];

/// Nouns of book titles.
pub const BOOK_NOUNS: &[&str] =
    &["River", "Garden", "Lantern", "Orchard", "Harbour", "Mirror", "Tower", "Meadow", "Compass", "Archive", "Island"];

/// First words of film titles ("Midnight Express").
pub const FILM_WORDS: &[&str] = &["Midnight", "Paper", "Neon", "Velvet", "Iron", "Glass", "Shadow", "Silver", "Wild"];

/// Second words of film titles.
pub const FILM_NOUNS: &[&str] =
    &["Express", "Circus", "Horizon", "Kingdom", "Parade", "Signal", "Voyage", "Carnival", "Frontier", "Empire"];

/// University departments (webnav).
pub const DEPARTMENTS: &[&str] = &[
    "Physics",
    "Chemistry",
    "Biology",
    "History",
    "Mathematics",
    "Economics",
    "Linguistics",
    "Geology",
    "Philosophy",
    "Music",
    "Astronomy",
    "Medicine",
    "Law",
    "Architecture",
    "Psychology",
    "Sociology",
];

/// Research topics: people's research areas and lab names (webnav).
pub const TOPICS: &[&str] = &[
    "Quantum Optics",
    "Soft Matter",
    "Marine Ecology",
    "Medieval Trade",
    "Number Theory",
    "Labour Markets",
    "Language Change",
    "Volcanology",
    "Ethics of Care",
    "Baroque Opera",
    "Exoplanets",
    "Cardiology",
    "Maritime Law",
    "Urban Design",
    "Child Development",
    "Migration Studies",
    "Protein Folding",
    "Catalysis",
    "Game Theory",
    "Glaciology",
    "Cognitive Science",
    "Climate Modelling",
    "Sound Synthesis",
    "Ancient Scripts",
];

/// Organisations that fund projects (webnav).
pub const FUNDERS: &[&str] = &[
    "Northgate Foundation",
    "Royal Science Council",
    "Atlas Trust",
    "Civic Research Board",
    "Horizon Grant Office",
    "Beacon Endowment",
    "Harbor Charitable Fund",
    "National Arts Agency",
    "Evergreen Society",
    "Polar Research Fund",
];

/// Project code names (webnav).
pub const PROJECTS: &[&str] = &[
    "Aurora", "Beacon", "Cascade", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Keystone", "Lattice",
    "Mosaic", "Nova", "Orbit", "Prism", "Quasar",
];

/// Staff roles (webnav).
pub const ROLES: &[&str] =
    &["Professor", "Associate Professor", "Lecturer", "Research Fellow", "Senior Lecturer", "Reader"];

/// Occupations of people (searchqa).
pub const OCCUPATIONS: &[&str] =
    &["engineer", "painter", "chemist", "architect", "economist", "novelist", "surgeon", "composer", "geologist"];

/// Industries of companies (searchqa).
pub const INDUSTRIES: &[&str] = &["software", "food", "shipping", "energy", "textile", "media", "robotics", "mining"];

/// Genres of books (searchqa).
pub const GENRES: &[&str] = &["mystery", "historical", "adventure", "romance", "crime", "satirical"];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn name_pools_share_no_word() {
        let pools: &[&[&str]] = &[
            FIRST_NAMES,
            LAST_NAMES,
            CITIES,
            COUNTRIES,
            COMPANY_WORDS,
            COMPANY_SUFFIXES,
            UNIVERSITY_WORDS,
            UNIVERSITY_KINDS,
            BOOK_ADJECTIVES,
            BOOK_NOUNS,
            FILM_WORDS,
            FILM_NOUNS,
        ];
        let mut seen = HashSet::new();
        for word in pools.iter().flat_map(|p| p.iter()) {
            assert!(seen.insert(word.to_lowercase()), "{word} is in two pools");
        }
    }
}
