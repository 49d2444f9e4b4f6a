//! Draws a webnav task from a seed: the [`World`], the question with its reference route, the
//! distractor news, and the compiled [`Site`].
//!
//! | difficulty | depth (clicks after `/`) | asks for | answer on |
//! |---|---|---|---|
//! | 1 | 2 | office, phone or year joined | the department's staff directory |
//! | 2 | 3 | email, research area or doctorate | the person's profile |
//! | 3 | 4 | a project's funder, start year or coordinator | the lab the person leads |

use super::pages::{build, dept_url, lab_url, person_url, staff_url, News};
use super::site::Site;
use super::world::World;
use crate::families::qa::names::{FUNDERS, PROJECTS, TOPICS};
use crate::families::qa::slug;
use crate::rng::Rng;

/// Decorrelates this family's draws from other families' for the same seed.
pub const SALT: u64 = 0x7765_626e_6176;

/// One generated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The compiled site.
    pub site: Site,
    /// The university's name.
    pub univ: String,
    /// The question (the first user message).
    pub question: String,
    /// The answer, exactly as the site shows it.
    pub answer: String,
    /// Page numbers of the reference route: `/`, then one per click down to the answer's page.
    pub chain: Vec<usize>,
    /// One line of reasoning per reference message: one per page of the route, then the answer.
    pub notes: Vec<String>,
}

struct Question {
    text: String,
    answer: String,
    route: Vec<String>,
    notes: Vec<String>,
    target: usize,
    project: Option<&'static str>,
}

/// The task for `seed` at `difficulty` (clamped to 1..=3).
pub fn generate(seed: u64, difficulty: u32) -> Task {
    let d = difficulty.clamp(1, 3);
    let mut rng = Rng::new(seed, SALT.wrapping_add(u64::from(d)));
    let world = World::generate(&mut rng, d);
    let q = question(&mut rng, &world, d);
    let news = news(&mut rng, &world, &q, d);
    let site = Site::new(build(&world, &news, d >= 2));
    let chain = q.route.iter().filter_map(|u| site.id(u)).collect();
    Task { site, univ: world.univ, question: q.text, answer: q.answer, chain, notes: q.notes }
}

fn question(rng: &mut Rng, world: &World, d: u32) -> Question {
    let lab = if d >= 3 && !world.labs.is_empty() { Some(rng.below(world.labs.len())) } else { None };
    let target = match lab.and_then(|l| world.labs.get(l)) {
        Some(lab) => lab.leader,
        None => rng.below(world.people.len()),
    };
    let Some(p) = world.people.get(target) else {
        return Question {
            text: String::new(),
            answer: String::new(),
            route: vec![],
            notes: vec![],
            target,
            project: None,
        };
    };
    let dept = world.depts.get(p.dept).copied().unwrap_or("");
    let (name, of) = (p.name.as_str(), format!("the Department of {dept}"));
    let mut route = vec!["/".to_string(), dept_url(world, p.dept), staff_url(world, p.dept)];
    let mut notes = vec![
        format!("I start from the home page of {}.", world.univ),
        format!("The question is about {of}, which the home page links to."),
        format!("The staff directory of {of} should list {name}."),
    ];
    let kind = rng.below(3);
    let lab_project = lab.and_then(|l| world.labs.get(l)).and_then(|l| l.projects.get(rng.below(l.projects.len())));
    let project = lab_project.map(|pr| pr.name);
    let (text, answer, source) = match (d, lab_project) {
        (1, _) => match kind {
            0 => (format!("What is the office of {name} in {of}?"), p.office.clone(), "staff directory"),
            1 => (format!("What is the phone number of {name} from {of}?"), p.phone.clone(), "staff directory"),
            _ => (format!("In which year did {name} join {of}?"), p.joined.to_string(), "staff directory"),
        },
        (2, _) | (_, None) => match kind {
            0 => (format!("What is the email address of {name} from {of}?"), p.email.clone(), "profile"),
            1 => (format!("What is the research area of {name} from {of}?"), p.area.to_string(), "profile"),
            _ => {
                (format!("Which university awarded the doctorate of {name} from {of}?"), p.doctorate.clone(), "profile")
            }
        },
        (_, Some(pr)) => {
            let about = format!("the {} project of the lab led by {name} in {of}", pr.name);
            let source = "lab's project table";
            match kind {
                0 => (format!("Which organisation funds {about}?"), pr.funder.to_string(), source),
                1 => (format!("In which year did {about} start?"), pr.start.to_string(), source),
                _ => (format!("Who coordinates {about}?"), pr.coordinator.clone(), source),
            }
        }
    };
    if d >= 2 {
        route.push(person_url(world, target));
        notes.push(format!("{name}'s profile should give more details."));
    }
    if let (Some(l), Some(_)) = (lab, lab_project) {
        route.push(lab_url(world, l));
        let lab_name = world.labs.get(l).map_or("", |x| x.name.as_str());
        notes.push(format!("{name} leads the {lab_name}; its page lists the lab's projects."));
    }
    notes.push(format!("The {source} gives the answer."));
    Question { text, answer, route, notes, target, project }
}

/// `1 + d` news items; the first always mentions the target with an outdated office.
fn news(rng: &mut Rng, world: &World, q: &Question, d: u32) -> Vec<News> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let Some(p) = world.people.get(q.target) else { return Vec::new() };
    let dept = |i: usize| world.depts.get(i).copied().unwrap_or("");
    let building = char::from(b'A' + rng.below(6) as u8);
    out.push((
        format!("Office moves in Building {building}"),
        vec![format!(
            "After the renovation of Building {building}, {} of the Department of {} left office {building}-{}{:02}.",
            p.name,
            dept(p.dept),
            rng.range(1, 4),
            rng.range(41, 60)
        )],
    ));
    let namesake =
        world.people.iter().find(|o| o.name != p.name && o.name.split(' ').any(|w| p.name.split(' ').any(|v| v == w)));
    let mut kinds = [0usize, 1, 2, 3];
    rng.shuffle(&mut kinds);
    for &kind in kinds.iter().take(d as usize) {
        let other = &world.people[rng.below(world.people.len())];
        let year = rng.range(2015, 2024);
        let item = match kind {
            1 => {
                let who = namesake.unwrap_or(other);
                (
                    "Phone numbers are changing".to_string(),
                    format!("The old number 555-{:04} of {} is no longer in use.", rng.range(1000, 9999), who.name),
                )
            }
            2 => {
                let pr = q.project.unwrap_or_else(|| *rng.pick(PROJECTS));
                (
                    format!("New funding for {pr}"),
                    format!("The {pr} project received a grant from the {} in {year}.", rng.pick(FUNDERS)),
                )
            }
            3 => (
                format!("Teaching award {year}"),
                format!("{} of the Department of {} received the {year} teaching award.", other.name, dept(other.dept)),
            ),
            _ => (
                format!("Research day {year}"),
                format!("Staff presented work on {} at the research day in {year}.", rng.pick(TOPICS)),
            ),
        };
        out.push((item.0, vec![item.1]));
    }
    out.into_iter()
        .enumerate()
        .map(|(i, (title, text))| News { slug: format!("{}-{}", i + 1, slug(&title)), title, text })
        .collect()
}
