//! Builds the pages of a site from its [`World`]. The link structure makes the reference route
//! the only route: a department is linked from the home page, its staff directory from the
//! department page, a profile only from its staff directory, and a lab only from its leader's
//! profile (pages link back up freely). So a question about a lab's project sits four clicks
//! deep, and guessing a URL is the only shortcut.
//!
//! ```text
//!  /  ──► /departments/physics ──► /departments/physics/staff ──► /people/ada-brandt ──► /labs/soft-matter-lab
//!  ├──► /news/…  (distractors: old offices, other funders)
//!  ├──► /about
//!  └──► /archive (a dead link, from difficulty 2)
//! ```

use super::site::{Link, Page};
use super::world::World;
use crate::families::qa::slug;

/// A news item: title, slug and text.
#[derive(Debug, Clone)]
pub struct News {
    /// Title, also the link text.
    pub title: String,
    /// URL slug under `/news/`.
    pub slug: String,
    /// Paragraphs.
    pub text: Vec<String>,
}

/// URL of department `d`.
pub fn dept_url(world: &World, d: usize) -> String {
    format!("/departments/{}", slug(world.depts.get(d).copied().unwrap_or("none")))
}

/// URL of department `d`'s staff directory.
pub fn staff_url(world: &World, d: usize) -> String {
    format!("{}/staff", dept_url(world, d))
}

/// URL of person `p`'s profile.
pub fn person_url(world: &World, p: usize) -> String {
    format!("/people/{}", world.people.get(p).map_or("none", |x| x.slug.as_str()))
}

/// URL of lab `l`.
pub fn lab_url(world: &World, l: usize) -> String {
    format!("/labs/{}", world.labs.get(l).map_or("none", |x| x.slug.as_str()))
}

fn link(text: impl Into<String>, url: impl Into<String>) -> Link {
    Link { text: text.into(), url: url.into() }
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Every page of the site, the home page first.
pub fn build(world: &World, news: &[News], dead_link: bool) -> Vec<Page> {
    let mut pages = vec![home(world, news, dead_link), about(world)];
    for d in 0..world.depts.len() {
        pages.push(department(world, d));
        pages.push(staff(world, d));
    }
    pages.extend((0..world.people.len()).map(|p| profile(world, p)));
    pages.extend((0..world.labs.len()).map(|l| lab(world, l)));
    pages.extend(news.iter().map(|n| Page {
        url: format!("/news/{}", n.slug),
        title: n.title.clone(),
        paragraphs: n.text.clone(),
        table: Vec::new(),
        links: vec![link("Home", "/")],
    }));
    pages
}

fn home(world: &World, news: &[News], dead_link: bool) -> Page {
    let mut links: Vec<Link> = world
        .depts
        .iter()
        .enumerate()
        .map(|(d, name)| link(format!("Department of {name}"), dept_url(world, d)))
        .collect();
    links.extend(news.iter().map(|n| link(n.title.clone(), format!("/news/{}", n.slug))));
    links.push(link("About the university", "/about"));
    if dead_link {
        links.push(link("Archive of the old site", "/archive"));
    }
    Page {
        url: "/".into(),
        title: world.univ.clone(),
        paragraphs: vec![format!(
            "Welcome to {}. The university has {} departments; news and departments are linked below.",
            world.univ,
            world.depts.len()
        )],
        table: Vec::new(),
        links,
    }
}

fn about(world: &World) -> Page {
    Page {
        url: "/about".into(),
        title: format!("About {}", world.univ),
        paragraphs: vec![format!(
            "{} was founded in {} in the city of {}. Staff can be reached at addresses ending in @{}.",
            world.univ, world.founded, world.city, world.domain
        )],
        table: Vec::new(),
        links: vec![link("Home", "/")],
    }
}

fn department(world: &World, d: usize) -> Page {
    let name = world.depts.get(d).copied().unwrap_or("");
    let staff: Vec<_> = world.people.iter().filter(|p| p.dept == d).collect();
    let head = staff.first().map_or("", |p| p.name.as_str());
    Page {
        url: dept_url(world, d),
        title: format!("Department of {name}"),
        paragraphs: vec![
            format!("The Department of {name} at {} has {} members of staff.", world.univ, staff.len()),
            format!("Head of department: {head}. Contact details of all staff are in the staff directory."),
        ],
        table: Vec::new(),
        links: vec![link("Staff directory", staff_url(world, d)), link("Home", "/")],
    }
}

fn staff(world: &World, d: usize) -> Page {
    let name = world.depts.get(d).copied().unwrap_or("");
    let mut table = vec![row(&["Name", "Role", "Office", "Phone", "Joined"])];
    let mut links = Vec::new();
    for (i, p) in world.people.iter().enumerate().filter(|(_, p)| p.dept == d) {
        table.push(row(&[&p.name, p.role, &p.office, &p.phone, &p.joined.to_string()]));
        links.push(link(p.name.clone(), person_url(world, i)));
    }
    links.push(link(format!("Department of {name}"), dept_url(world, d)));
    Page {
        url: staff_url(world, d),
        title: format!("Staff of the Department of {name}"),
        paragraphs: vec!["Members of staff with their offices, phone numbers and year of joining.".into()],
        table,
        links,
    }
}

fn profile(world: &World, i: usize) -> Page {
    let Some(p) = world.people.get(i) else { return Page::default() };
    let dept = world.depts.get(p.dept).copied().unwrap_or("");
    let mut paragraphs = vec![format!("{}, {} in the Department of {dept}, works on {}.", p.name, p.role, p.area)];
    let mut links = Vec::new();
    if let Some(lab) = p.lab.and_then(|l| world.labs.get(l).map(|lab| (l, lab))) {
        paragraphs.push(format!("{} leads the {}.", p.name, lab.1.name));
        links.push(link(lab.1.name.clone(), lab_url(world, lab.0)));
    }
    links.push(link(format!("Department of {dept}"), dept_url(world, p.dept)));
    links.push(link("Staff directory", staff_url(world, p.dept)));
    let table = vec![
        row(&["Field", "Value"]),
        row(&["Email", &p.email]),
        row(&["Office", &p.office]),
        row(&["Phone", &p.phone]),
        row(&["Research area", p.area]),
        row(&["Doctorate", &p.doctorate]),
    ];
    Page { url: person_url(world, i), title: p.name.clone(), paragraphs, table, links }
}

fn lab(world: &World, l: usize) -> Page {
    let Some(lab) = world.labs.get(l) else { return Page::default() };
    let dept = world.depts.get(lab.dept).copied().unwrap_or("");
    let leader = world.people.get(lab.leader).map_or("", |p| p.name.as_str());
    let mut table = vec![row(&["Project", "Funder", "Start", "Coordinator"])];
    for p in &lab.projects {
        table.push(row(&[p.name, p.funder, &p.start.to_string(), &p.coordinator]));
    }
    Page {
        url: lab_url(world, l),
        title: lab.name.clone(),
        paragraphs: vec![format!(
            "The {} is part of the Department of {dept}. It is led by {leader} and housed in Building {}.",
            lab.name, lab.building
        )],
        table,
        links: vec![
            link(leader, person_url(world, lab.leader)),
            link(format!("Department of {dept}"), dept_url(world, lab.dept)),
        ],
    }
}
