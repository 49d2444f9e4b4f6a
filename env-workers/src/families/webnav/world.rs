//! The facts behind a generated university web site: departments, staff, labs and their
//! projects. Pages are built from these in [`pages`](super::pages); questions in
//! [`generate`](super::generate).
//!
//! Distractors come from the draw itself: people's names are drawn from a few given and family
//! names, so namesakes abound (two Adas, three Brandts); project code names repeat across labs
//! with other funders; and there are more departments, staff and labs at higher difficulty.

use std::collections::HashSet;

use crate::families::qa::names::{CITIES, DEPARTMENTS, FIRST_NAMES, FUNDERS, LAST_NAMES, PROJECTS, ROLES, TOPICS};
use crate::families::qa::{pair_names, pick, sample, slug};
use crate::rng::Rng;

/// One member of staff.
#[derive(Debug, Clone)]
pub struct Person {
    /// Full name, unique on the site.
    pub name: String,
    /// URL slug of the profile page.
    pub slug: String,
    /// Index of the department.
    pub dept: usize,
    /// Job title.
    pub role: &'static str,
    /// Office, e.g. `B-214`.
    pub office: String,
    /// Phone number, e.g. `555-0142`.
    pub phone: String,
    /// Year of joining the department.
    pub joined: u32,
    /// Email address.
    pub email: String,
    /// Research area.
    pub area: &'static str,
    /// The university that awarded the doctorate.
    pub doctorate: String,
    /// The lab this person leads, if any.
    pub lab: Option<usize>,
}

/// One project in a lab's table.
#[derive(Debug, Clone)]
pub struct Project {
    /// Code name, e.g. `Aurora` (repeats across labs).
    pub name: &'static str,
    /// Funding organisation.
    pub funder: &'static str,
    /// Start year.
    pub start: u32,
    /// Name of the coordinating person (anyone on the site).
    pub coordinator: String,
}

/// One research lab, led by one member of its department.
#[derive(Debug, Clone)]
pub struct Lab {
    /// Name, e.g. `Quantum Optics Lab`.
    pub name: String,
    /// URL slug.
    pub slug: String,
    /// Index of the department.
    pub dept: usize,
    /// Index of the leading person.
    pub leader: usize,
    /// Building letter.
    pub building: char,
    /// Its projects (names distinct within the lab).
    pub projects: Vec<Project>,
}

/// Everything the site shows.
#[derive(Debug, Clone)]
pub struct World {
    /// The university's name.
    pub univ: String,
    /// Its city.
    pub city: &'static str,
    /// Its email domain.
    pub domain: String,
    /// Its founding year.
    pub founded: u32,
    /// Department names.
    pub depts: Vec<&'static str>,
    /// Staff, grouped by department in order.
    pub people: Vec<Person>,
    /// Labs.
    pub labs: Vec<Lab>,
}

/// Sizes by difficulty (1..=3): departments, staff per department, labs per department,
/// projects per lab.
pub fn sizes(difficulty: u32) -> (usize, usize, usize, usize) {
    let d = difficulty.clamp(1, 3) as usize;
    (2 + d, 3 + d, 1 + usize::from(d >= 2), 2 + usize::from(d >= 2))
}

impl World {
    /// Draws a world.
    pub fn generate(rng: &mut Rng, difficulty: u32) -> Self {
        let (n_depts, staff, labs_per_dept, n_projects) = sizes(difficulty);
        let cities = sample(rng, CITIES, 6);
        let city = cities[0];
        let univ = format!("{city} University");
        let domain = format!("{}.edu", city.to_lowercase());
        let depts = sample(rng, DEPARTMENTS, n_depts);
        let names = pair_names(rng, FIRST_NAMES, LAST_NAMES, n_depts * staff);
        let mut used = HashSet::new();
        let mut people = Vec::with_capacity(names.len());
        for (i, name) in names.into_iter().enumerate() {
            let office = unique(rng, &mut used, |r| {
                format!("{}-{}{:02}", char::from(b'A' + r.below(6) as u8), r.range(1, 4), r.range(1, 40))
            });
            let phone = unique(rng, &mut used, |r| format!("555-{:04}", r.range(1000, 9999)));
            let (first, last) = name.split_once(' ').unwrap_or((name.as_str(), ""));
            let handle = format!("{}.{}", first.chars().next().unwrap_or('x'), last).to_lowercase();
            let plain = format!("{handle}@{domain}");
            let email = if used.insert(plain.clone()) {
                plain
            } else {
                unique(rng, &mut used, |r| format!("{handle}{}@{domain}", r.range(2, 99)))
            };
            let doctorate = format!("{} University", rng.pick(&cities[1..]));
            people.push(Person {
                slug: slug(&name),
                name,
                dept: i / staff,
                role: pick(rng, ROLES),
                office,
                phone,
                joined: rng.range(1988, 2023) as u32,
                email,
                area: pick(rng, TOPICS),
                doctorate,
                lab: None,
            });
        }
        let topics = sample(rng, TOPICS, n_depts * labs_per_dept);
        let mut labs = Vec::with_capacity(topics.len());
        for (dept, chunk) in topics.chunks(labs_per_dept).enumerate() {
            let mut members: Vec<usize> = (dept * staff..(dept + 1) * staff).collect();
            rng.shuffle(&mut members);
            for (topic, &leader) in chunk.iter().zip(&members) {
                let projects = sample(rng, PROJECTS, n_projects)
                    .into_iter()
                    .map(|name| Project {
                        name,
                        funder: pick(rng, FUNDERS),
                        start: rng.range(2010, 2024) as u32,
                        coordinator: people[rng.below(people.len())].name.clone(),
                    })
                    .collect();
                let name = format!("{topic} Lab");
                people[leader].lab = Some(labs.len());
                labs.push(Lab {
                    slug: slug(&name),
                    name,
                    dept,
                    leader,
                    building: char::from(b'A' + rng.below(6) as u8),
                    projects,
                });
            }
        }
        let founded = rng.range(1820, 1970) as u32;
        Self { univ, city, domain, founded, depts, people, labs }
    }
}

/// A value from `draw` not drawn before on this site (tries a bounded number of times).
fn unique(rng: &mut Rng, used: &mut HashSet<String>, mut draw: impl FnMut(&mut Rng) -> String) -> String {
    let mut value = draw(rng);
    for _ in 0..64 {
        if !used.contains(&value) {
            break;
        }
        value = draw(rng);
    }
    used.insert(value.clone());
    value
}
